"""Admitted episodes: fetched whole (rows + compressed video), decoded only on demand.

``EpisodeFetcher`` reads one episode: its parquet row group(s) and ONE ranged read covering
all its mp4 members (they are adjacent in the tar), checked against the index CRCs.
``EpisodePool`` holds the open episodes, has ``reader.prefetch.Prefetcher`` fetch the next
ones in background threads in the exact order the pool schedule will need them, and releases
an episode after its last draw.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from reader.decode import CpuDecodeStage, EpisodeDecoder
from reader.disk_cache import DiskCache, range_key
from reader.format import FormatError, shard_name, shard_parquet_path, shard_tar_path
from reader.packed_index import EpisodeEntry, PackedIndex
from reader.prefetch import Prefetcher
from reader.storage import Storage, StorageError


class EpisodeDataError(FormatError):
    """An episode's bytes or rows do not match the index (truncated shard, bad member...)."""


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


@dataclass
class LoadedEpisode:
    """An admitted episode: per-column tensors (rows x ...) and member bytes per camera.

    ``nbytes``: the memory it holds, compressed members plus row tensors (open decoders,
    at most one per camera, come on top).
    """

    entry: EpisodeEntry
    columns: dict[str, object]
    video: dict[str, bytes]
    nbytes: int
    decoders: dict[str, EpisodeDecoder] = field(default_factory=dict)

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

    Rows: the episode's row group of the shard parquet, decoded whole and kept in a small
    byte-bounded LRU (episodes are admitted in plan order, so neighbours often share a
    group). Each read opens its own file handle on the footer parsed once per shard, so
    threads reading different groups never wait on each other; threads needing the same
    group wait for one read of it.
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
        self._lock = threading.Lock()  # guards the dicts below, never held during I/O
        self._footers: dict[int, tuple[pq.FileMetaData, np.ndarray]] = {}
        self._group_locks: dict[tuple[int, int], threading.Lock] = {}
        self._groups: OrderedDict[tuple[int, int], pa.Table] = OrderedDict()
        self._group_cache_bytes = row_group_cache_bytes
        self._group_bytes = 0
        self.counters = FetchCounters()

    def _open_parquet(self, shard: int, handle) -> pq.ParquetFile:
        footer = self._footers.get(shard)
        if footer is not None:
            return pq.ParquetFile(handle, metadata=footer[0])
        parquet = pq.ParquetFile(handle)
        metadata = parquet.metadata
        sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        with self._lock:
            self._footers[shard] = (metadata, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64))
        return parquet

    def _row_group(self, shard: int, group: int) -> tuple[pa.Table, int]:
        key = (shard, group)
        with self._lock:
            group_lock = self._group_locks.setdefault(key, threading.Lock())
        with group_lock:
            with self._lock:
                if key in self._groups:
                    self._groups.move_to_end(key)
                    return self._groups[key], int(self._footers[shard][1][group])
            known = self._shards.get(shard)
            handle = self.storage.open_input(shard_parquet_path(shard), size=known.parquet_bytes if known else None)
            try:
                parquet = self._open_parquet(shard, handle)
                if group >= parquet.metadata.num_row_groups:
                    raise EpisodeDataError(
                        f"{self.storage.object_url(shard_parquet_path(shard))}: has no row group {group} "
                        f"(it has {parquet.metadata.num_row_groups})"
                    )
                table = parquet.read_row_group(group)
            finally:
                handle.close()
            with self._lock:
                self._groups[key] = table
                self._group_bytes += table.nbytes
                while len(self._groups) > 1 and self._group_bytes > self._group_cache_bytes:
                    evicted_key, evicted = self._groups.popitem(last=False)
                    self._group_bytes -= evicted.nbytes
                    self._group_locks.pop(evicted_key, None)
                return table, int(self._footers[shard][1][group])

    def fetch(self, entry: EpisodeEntry) -> LoadedEpisode:
        """Read one episode's rows and members.

        Raises:
            EpisodeDataError: rows or bytes disagree with the index (names shard + episode).
            StorageError: the read failed after retries.
        """
        started = time.perf_counter()
        where = f"{shard_name(entry.shard)} episode {entry.episode_index}"
        try:
            table, group_start = self._row_group(entry.shard, entry.row_group)
        except (OSError, pa.ArrowException) as err:
            raise EpisodeDataError(f"{where}: cannot read rows from {shard_parquet_path(entry.shard)} ({err})") from err
        rows = table.slice(entry.row_start - group_start, entry.length)
        if rows.num_rows != entry.length or (
            entry.length and rows["episode_index"][0].as_py() != entry.episode_index
        ):
            raise EpisodeDataError(f"{where}: shard parquet rows do not match the index (row_start {entry.row_start})")
        columns = {name: _column_tensor(rows[name]) for name in rows.column_names}
        video: dict[str, bytes] = {}
        offset, size = entry.byte_range
        if size:
            shard = self._shards.get(entry.shard)
            # Stamped with the shard's sha256: a re-packed shard misses instead of serving old bytes.
            cache_key = range_key(self.storage.object_url(shard_tar_path(entry.shard)), offset, size, shard.tar_sha256 if shard else "")
            blob = self.disk_cache.get(cache_key) if self.disk_cache is not None else None
            if blob is not None:
                with self._lock:
                    self.counters.disk_cache_hits += 1
            else:
                try:
                    blob = self.storage.read_range(shard_tar_path(entry.shard), offset, size)
                except StorageError as err:
                    raise EpisodeDataError(f"{where}: {err}") from err
                if self.disk_cache is not None:
                    self.disk_cache.put(cache_key, blob)
            for key, member in entry.cameras.items():
                data = blob[member.offset - offset : member.offset - offset + member.size]
                if zlib.crc32(data) != member.crc32:
                    raise EpisodeDataError(
                        f"{where} camera {key}: member bytes in {shard_tar_path(entry.shard)} do not match the index "
                        "crc32 (shard corrupted or replaced?)"
                    )
                video[key] = data
        with self._lock:
            self.counters.bytes_fetched += size + rows.nbytes
            self.counters.fetch_seconds += time.perf_counter() - started
            self.counters.episodes_admitted += 1
        # What the pool holds: the compressed members and the row tensors (decoders excluded).
        held = size + sum(v.element_size() * v.nelement() for v in columns.values() if isinstance(v, torch.Tensor))
        return LoadedEpisode(entry=entry, columns=columns, video=video, nbytes=held)


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
        """Evict an episode after its last draw: rows, bytes and decoders go."""
        episode = self.open_episodes.pop(position, None)
        if episode is not None:
            self.open_bytes -= episode.nbytes
            episode.decoders.clear()

    def release_all(self) -> None:
        """Evict every open episode."""
        for position in list(self.open_episodes):
            self.release(position)

    def close(self) -> None:
        """Evict everything and stop prefetching."""
        self.prefetcher.close()
        self.release_all()


def decoder_for(episode: LoadedEpisode, camera: str, stage: CpuDecodeStage, counters: dict) -> EpisodeDecoder:
    """The episode's open decoder for a camera (opened on first use, dropped at eviction)."""
    decoder = episode.decoders.get(camera)
    if decoder is None:
        counters["decoder_misses"] += 1
        decoder = stage.open(episode.video[camera], where=episode.where(camera))
        episode.decoders[camera] = decoder
    else:
        counters["decoder_hits"] += 1
    return decoder


__all__ = ["EpisodeDataError", "EpisodeFetcher", "EpisodePool", "LoadedEpisode", "decoder_for"]
