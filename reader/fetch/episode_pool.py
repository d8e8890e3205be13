"""Admitted episodes: fetched whole (rows + compressed video), decoded only on demand.

``EpisodeFetcher`` reads one episode: its parquet row group(s) and ONE ranged read covering
all its mp4 members (they are adjacent in the tar), checked against the index CRCs.
``EpisodePool`` holds the open episodes, has ``reader.fetch.prefetch.Prefetcher`` fetch the next
ones in background threads in the exact order the pool schedule will need them, and releases
an episode after its last draw.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from reader.errors import EpisodeDataError, IntegrityError, ShortReadError, StorageError
from reader.fetch.disk_cache import DiskCache, range_key
from reader.fetch.packed_index import EpisodeEntry, PackedIndex
from reader.fetch.prefetch import Prefetcher
from reader.format import check_bytes, shard_name, shard_parquet_path, shard_tar_path
from reader.format.shard_parquet import check_row_group, decode_row_group, parse_footer
from reader.storage import Storage


def _column_tensor(array: pa.ChunkedArray):
    """Columns as LeRobot returns them: ``torch.tensor(python value)`` semantics, so ints
    become int64 and floats float32 (the default dtype), bools stay bool."""
    arrow_type = array.type
    if pa.types.is_fixed_size_list(arrow_type) and array.null_count == 0 and not pa.types.is_nested(arrow_type.value_type):
        # Vectors (state, action): flatten respects the slice offset; no Python objects.
        flat = array.combine_chunks().flatten()
        if flat.null_count:
            values = np.array(array.to_pylist())
        else:
            values = flat.to_numpy(zero_copy_only=False).reshape(len(array), arrow_type.list_size)
    elif pa.types.is_fixed_size_list(arrow_type) or pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        values = np.array(array.to_pylist())
    elif pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type):
        values = array.to_numpy()
    else:
        return array.to_pylist()  # strings and other objects stay Python values
    if values.dtype == np.bool_:
        return torch.from_numpy(values.copy())
    if np.issubdtype(values.dtype, np.integer):
        return torch.from_numpy(values.astype(np.int64))
    return torch.from_numpy(values.astype(np.float32))


@dataclass(eq=False)
class LoadedEpisode:
    """An admitted episode: per-column tensors (rows x ...) and member bytes per camera.

    ``nbytes``: the memory it holds, compressed members plus row tensors (open decoders,
    which the sample builder keeps per episode while it is held, come on top). Compared and
    hashed by identity: one object per admission.
    """

    entry: EpisodeEntry
    columns: dict[str, object]
    video: dict[str, bytes]
    nbytes: int

    def where(self, camera: str | None = None) -> str:
        text = f"{shard_name(self.entry.shard)} episode {self.entry.episode_index}"
        return f"{text} camera {camera}" if camera else text


@dataclass
class FetchCounters:
    bytes_fetched: int = 0
    fetch_seconds: float = 0.0
    episodes_admitted: int = 0
    disk_cache_hits: int = 0


class EpisodeFetcher:
    """Reads episodes of one packed dataset (thread-safe; fetch threads run in parallel).

    Rows: the episode's row group of the shard parquet. The shard's footer is read once per
    process (its span and SHA-256 come from the manifest) and the group's bytes are read and
    checked against the digest in the episodes index before pyarrow decodes them; decoded
    groups stay in a small byte-bounded LRU (episodes are admitted in plan order, so
    neighbours often share a group). Threads needing the same group wait for one read of it.
    Members: one ranged read over all of an episode's members, each checked by SHA-256.
    """

    def __init__(
        self,
        storage: Storage,
        index: PackedIndex,
        *,
        row_group_cache_bytes: int = 64 * 1024 * 1024,
        disk_cache: DiskCache | None = None,
    ):
        self.storage = storage
        self.index = index
        self.disk_cache = disk_cache
        self._shards = {s.index: s for s in index.manifest.shards}
        # Per row group, its episodes and rows in the whole index (not only the selection):
        # a group must hold exactly those, and only a group of one episode may exceed
        # ROW_GROUP_MAX_BYTES.
        self._group_sizes: dict[tuple[int, int], tuple[int, int]] = {}
        for entry in index.all_episodes:
            key = (entry.shard, entry.row_group.index)
            count, rows = self._group_sizes.get(key, (0, 0))
            self._group_sizes[key] = (count + 1, rows + entry.length)
        self._lock = threading.Lock()  # guards the dicts below, never held during I/O
        self._footers: dict[int, pq.FileMetaData] = {}
        self._footer_locks: dict[int, threading.Lock] = {}
        self._group_locks: dict[tuple[int, int], threading.Lock] = {}
        self._groups: OrderedDict[tuple[int, int], tuple[pa.Table, int]] = OrderedDict()
        self._group_cache_bytes = row_group_cache_bytes
        self._group_bytes = 0
        self.counters = FetchCounters()

    def _footer(self, shard: int) -> pq.FileMetaData:
        with self._lock:
            footer = self._footers.get(shard)
            lock = self._footer_locks.setdefault(shard, threading.Lock())
        if footer is not None:
            return footer
        with lock:
            with self._lock:
                if shard in self._footers:
                    return self._footers[shard]
            entry = self._shards[shard].parquet_footer
            rel = shard_parquet_path(shard)
            data = self.storage.read_range(rel, entry.offset, entry.bytes)
            footer = parse_footer(data, size=entry.bytes, sha256=entry.sha256, where=self.storage.describe(rel))
            with self._lock:
                self._footers[shard] = footer
            return footer

    def _row_group(self, entry: EpisodeEntry) -> tuple[pa.Table, int]:
        """The decoded row group holding ``entry``'s rows, and the file row it starts at."""
        ref = entry.row_group
        key = (entry.shard, ref.index)
        with self._lock:
            group_lock = self._group_locks.setdefault(key, threading.Lock())
        with group_lock:
            with self._lock:
                if key in self._groups:
                    self._groups.move_to_end(key)
                    return self._groups[key]
            rel = shard_parquet_path(entry.shard)
            where = self.storage.describe(rel)
            metadata = self._footer(entry.shard)
            episodes_in_group, group_rows = self._group_sizes[key]
            group_start = check_row_group(
                metadata, ref.index, offset=ref.offset, nbytes=ref.bytes, first_row=entry.row_start, rows=entry.length,
                group_rows=group_rows, single_episode=episodes_in_group == 1, where=where,
            )
            data = self.storage.read_range(rel, ref.offset, ref.bytes)
            table = decode_row_group(
                metadata, ref.index, data, offset=ref.offset, sha256=ref.sha256, file_size=self._shards[entry.shard].parquet_bytes,
                where=where,
            )
            with self._lock:
                self._groups[key] = (table, group_start)
                self._group_bytes += table.nbytes
                while len(self._groups) > 1 and self._group_bytes > self._group_cache_bytes:
                    evicted_key, (evicted, _) = self._groups.popitem(last=False)
                    self._group_bytes -= evicted.nbytes
                    self._group_locks.pop(evicted_key, None)
            return table, group_start

    def fetch(self, entry: EpisodeEntry) -> LoadedEpisode:
        """Read one episode's rows and members, checked against the index.

        Raises:
            IntegrityError: rows or member bytes differ from what was packed (names the file).
            EpisodeDataError: rows disagree with the index (names shard + episode).
            StorageError: the read failed after retries.
        """
        try:
            return self._fetch(entry)
        except ShortReadError as err:
            # The manifest records every file's size: a file shorter than that is damaged.
            raise IntegrityError(f"{shard_name(entry.shard)} episode {entry.episode_index}: {err}") from err
        except StorageError as err:
            raise type(err)(
                f"{shard_name(entry.shard)} episode {entry.episode_index}: {err}", url=err.url, operation=err.operation,
                attempts=err.attempts,
            ) from err

    def _fetch(self, entry: EpisodeEntry) -> LoadedEpisode:
        started = time.perf_counter()
        where = f"{shard_name(entry.shard)} episode {entry.episode_index}"
        table, group_start = self._row_group(entry)
        rows = table.slice(entry.row_start - group_start, entry.length)
        if rows.num_rows != entry.length or "episode_index" not in rows.column_names or (
            entry.length and (rows["episode_index"][0].as_py(), rows["episode_index"][-1].as_py()) != (entry.episode_index,) * 2
        ):
            raise EpisodeDataError(
                f"{self.storage.describe(shard_parquet_path(entry.shard))}: rows [{entry.row_start}, "
                f"{entry.row_start + entry.length}) are not episode {entry.episode_index}'s"
            )
        columns = {name: _column_tensor(rows[name]) for name in rows.column_names}
        video: dict[str, bytes] = {}
        offset, size = entry.byte_range
        if size:
            shard = self._shards[entry.shard]
            tar = shard_tar_path(entry.shard)
            # Stamped with the shard's sha256: a re-packed shard misses instead of serving old bytes.
            cache_key = range_key(self.storage.object_url(tar), offset, size, shard.tar_sha256)
            blob = self.disk_cache.get(cache_key) if self.disk_cache is not None else None
            if blob is not None:
                try:
                    video = self._members(entry, blob, offset, tar, where)
                    with self._lock:
                        self.counters.disk_cache_hits += 1
                except IntegrityError:
                    blob = None  # a damaged cache entry is a miss: fetch the shard's bytes
            if blob is None:
                blob = self.storage.read_range(tar, offset, size)
                video = self._members(entry, blob, offset, tar, where)
                if self.disk_cache is not None:
                    self.disk_cache.put(cache_key, blob)
        with self._lock:
            self.counters.bytes_fetched += size + rows.nbytes
            self.counters.fetch_seconds += time.perf_counter() - started
            self.counters.episodes_admitted += 1
        # What the pool holds: the compressed members and the row tensors (decoders excluded).
        held = size + sum(v.element_size() * v.nelement() for v in columns.values() if isinstance(v, torch.Tensor))
        return LoadedEpisode(entry=entry, columns=columns, video=video, nbytes=held)

    def _members(self, entry: EpisodeEntry, blob: bytes, offset: int, tar: str, where: str) -> dict[str, bytes]:
        """Each camera's member cut from ``blob`` (bytes from ``offset`` of the tar), checked."""
        video = {}
        for key, member in entry.cameras.items():
            data = blob[member.offset - offset : member.offset - offset + member.size]
            check_bytes(data, size=member.size, sha256=member.sha256, where=f"{self.storage.describe(tar)} {where} camera {key}")
            video[key] = data
        return video


class EpisodePool:
    """Episodes a consumer holds, fetched ahead in schedule order and evicted after use.

    The pool schedule bounds how many episodes are open (``episode_pool_size`` slots, each
    holding one episode at a time); this class holds them and, through a ``Prefetcher``,
    fetches the next ones in the order they will first be needed: at most ``prefetch``
    episodes and ``prefetch_bytes`` of their video bytes ahead of use (one always runs).
    Peak memory per consumer is therefore about the open episodes (``max_open_bytes``), plus
    ``prefetch_bytes`` of video ahead (with its episodes' rows), plus the fetcher's row-group
    cache (``row_group_cache_bytes``), plus one open decoder per camera of each open episode.
    """

    def __init__(self, fetcher: EpisodeFetcher, *, prefetch: int = 4, prefetch_bytes: int | None = None, threads: int = 2):
        self.fetcher = fetcher
        episodes = fetcher.index.episodes
        self.prefetcher: Prefetcher[LoadedEpisode] = Prefetcher(
            lambda position: fetcher.fetch(episodes[position]),
            size_of=lambda position: episodes[position].byte_range[1],
            describe=lambda position: f"{shard_name(episodes[position].shard)} episode {episodes[position].episode_index}",
            depth=max(prefetch, 0),
            byte_budget=prefetch_bytes,
            threads=threads,
        )
        self.open_episodes: dict[int, LoadedEpisode] = {}
        self.open_bytes = 0
        self.max_open = 0
        self.max_open_bytes = 0

    def schedule(self, order: list[int]) -> None:
        """Set the order (episode positions) in which episodes will first be needed."""
        self.prefetcher.schedule(order, skip=self.open_episodes.__contains__)

    def extend(self, order: list[int]) -> None:
        """Append episode positions to the order set by ``schedule``."""
        self.prefetcher.extend(order)

    def get(self, position: int) -> LoadedEpisode:
        """The admitted episode at ``position``; waits for (or starts) its fetch.

        A failure in a background fetch is re-raised here, naming the shard and episode.
        """
        episode = self.open_episodes.get(position)
        if episode is None:
            episode = self.prefetcher.take(position)
            self.open_episodes[position] = episode
            self.open_bytes += episode.nbytes
            self.max_open = max(self.max_open, len(self.open_episodes))
            self.max_open_bytes = max(self.max_open_bytes, self.open_bytes)
        return episode

    def release(self, position: int) -> None:
        """Evict an episode after its last draw: its rows and bytes go (and with the last
        reference, the decoders a sample builder opened on it)."""
        episode = self.open_episodes.pop(position, None)
        if episode is not None:
            self.open_bytes -= episode.nbytes

    def release_all(self) -> None:
        """Evict every open episode."""
        for position in list(self.open_episodes):
            self.release(position)

    def close(self) -> None:
        """Evict everything and stop prefetching."""
        self.prefetcher.close()
        self.release_all()


__all__ = ["EpisodeDataError", "EpisodeFetcher", "EpisodePool", "LoadedEpisode"]
