"""Admitted episodes: fetched whole (rows + compressed video), decoded only on demand.

``EpisodeFetcher`` reads one episode: its parquet row group(s) and ONE ranged read covering
all its mp4 members (they are adjacent in the tar), checked against the index CRCs.
``EpisodePool`` runs fetches ahead of need in background threads, in the exact order the
pool schedule will need them, and releases an episode after its last draw.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from reader.decode import CpuDecodeStage, EpisodeDecoder
from reader.disk_cache import DiskCache
from reader.format import FormatError, shard_name, shard_parquet_path, shard_tar_path
from reader.packed_index import EpisodeEntry, PackedIndex
from reader.storage import Storage, StorageError


class EpisodeDataError(FormatError):
    """An episode's bytes or rows do not match the index (truncated shard, bad member...)."""


def _column_tensor(array: pa.ChunkedArray):
    """Columns as LeRobot returns them: ``torch.tensor(python value)`` semantics, so ints
    become int64 and floats float32 (the default dtype), bools stay bool."""
    arrow_type = array.type
    if pa.types.is_fixed_size_list(arrow_type) or pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
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
    """An admitted episode: per-column tensors (rows x ...) and member bytes per camera."""

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


class EpisodeFetcher:
    """Reads episodes of one packed dataset (thread-safe)."""

    def __init__(self, storage: Storage, index: PackedIndex, *, row_group_cache: int = 16, disk_cache: DiskCache | None = None):
        self.storage = storage
        self.index = index
        self.disk_cache = disk_cache
        self._lock = threading.Lock()
        self._files: dict[int, pq.ParquetFile] = {}
        self._group_starts: dict[int, np.ndarray] = {}
        self._groups: OrderedDict[tuple[int, int], pa.Table] = OrderedDict()
        self._group_cache = row_group_cache
        self.counters = FetchCounters()

    def _row_group(self, shard: int, group: int) -> tuple[pa.Table, int]:
        with self._lock:
            key = (shard, group)
            if key in self._groups:
                self._groups.move_to_end(key)
                return self._groups[key], int(self._group_starts[shard][group])
            if shard not in self._files:
                handle = self.storage.open(shard_parquet_path(shard))
                parquet = pq.ParquetFile(handle)
                self._files[shard] = parquet
                sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
                self._group_starts[shard] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            parquet = self._files[shard]
            if group >= parquet.metadata.num_row_groups:
                raise EpisodeDataError(f"{self.storage.describe(shard_parquet_path(shard))}: has no row group {group}")
            table = parquet.read_row_group(group)
            self._groups[key] = table
            while len(self._groups) > self._group_cache:
                self._groups.popitem(last=False)
            return table, int(self._group_starts[shard][group])

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
            cache_key = f"{self.storage.url}/{shard_tar_path(entry.shard)}@{offset}+{size}"
            blob = self.disk_cache.get(cache_key) if self.disk_cache is not None else None
            if blob is None:
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
        return LoadedEpisode(entry=entry, columns=columns, video=video, nbytes=size + rows.nbytes)


class EpisodePool:
    """Episodes a consumer holds, fetched ahead in schedule order and evicted after use.

    ``schedule`` gives episode positions in the order they are first needed; at most
    ``prefetch`` fetches run ahead, holding at most ``prefetch_bytes`` of fetched-but-unused
    video bytes beyond the open pool (at least one fetch always runs).
    """

    def __init__(self, fetcher: EpisodeFetcher, *, prefetch: int = 4, prefetch_bytes: int | None = None, threads: int = 2):
        self.fetcher = fetcher
        self.prefetch = max(prefetch, 0)
        self.prefetch_bytes = prefetch_bytes
        self._executor = ThreadPoolExecutor(max_workers=max(threads, 1), thread_name_prefix="lerobot-shards-fetch")
        self._futures: dict[int, Future] = {}
        self._order: list[int] = []
        self._next = 0
        self.open_episodes: dict[int, LoadedEpisode] = {}
        self.max_open = 0
        self.max_open_bytes = 0

    def schedule(self, order: list[int]) -> None:
        """Set the order (episode positions) in which episodes will first be needed."""
        self._order = list(order)
        self._next = 0
        self._top_up()

    def _in_flight_bytes(self) -> int:
        return sum(self.fetcher.index.episodes[p].byte_range[1] for p in self._futures)

    def _top_up(self) -> None:
        while self._next < len(self._order) and len(self._futures) < self.prefetch:
            position = self._order[self._next]
            if (
                self.prefetch_bytes is not None
                and self._futures
                and self._in_flight_bytes() + self.fetcher.index.episodes[position].byte_range[1] > self.prefetch_bytes
            ):
                break  # the byte budget for fetched-but-unused episodes is spent
            self._next += 1
            if position in self._futures or position in self.open_episodes:
                continue
            entry = self.fetcher.index.episodes[position]
            self._futures[position] = self._executor.submit(self.fetcher.fetch, entry)

    def get(self, position: int) -> LoadedEpisode:
        """The admitted episode at ``position``; waits for (or starts) its fetch.

        A failure in a background fetch is re-raised here, naming the shard and episode.
        """
        episode = self.open_episodes.get(position)
        if episode is None:
            future = self._futures.pop(position, None)
            if future is None:
                future = self._executor.submit(self.fetcher.fetch, self.fetcher.index.episodes[position])
            episode = future.result()
            self.open_episodes[position] = episode
            self.max_open = max(self.max_open, len(self.open_episodes))
            self.max_open_bytes = max(self.max_open_bytes, sum(e.nbytes for e in self.open_episodes.values()))
            self._top_up()
        return episode

    def release(self, position: int) -> None:
        """Evict an episode after its last draw: rows, bytes and decoders go."""
        episode = self.open_episodes.pop(position, None)
        if episode is not None:
            episode.decoders.clear()

    def close(self) -> None:
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        self.open_episodes.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)


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
