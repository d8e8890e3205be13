"""Admitted episodes: fetched whole (rows + compressed video), decoded only on demand.

``EpisodeFetcher`` reads one episode of a catalog (``lerobot_shards.core.pack.catalog``): its parquet row
group and ONE ranged read covering all its mp4 members (they are adjacent in the tar), every
byte checked against the digests the catalog carries. ``EpisodePool`` holds a consumer's open
pieces, has ``lerobot_shards.reader.fetch.prefetch.Prefetcher`` fetch the next ones in background threads in
the exact order the schedule will need them, and releases a piece after its last draw.

One fetcher, one pool and one set of fetch threads serve a consumer whatever the number of
packs it reads: caches (footers, row groups) and the prefetch budget are per consumer, and a
pack's ``Storage`` is made when its first episode is fetched (its client is shared).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as _compute
import pyarrow.parquet as pq
import torch

from lerobot_shards.core.errors import EpisodeDataError, FormatError, IntegrityError, ShortReadError, StorageError
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    EpisodeEntry,
    EpisodeTable,
    Manifest,
    check_bytes,
    parse_episodes_index,
    shard_parquet_path,
    shard_tar_path,
)
from lerobot_shards.core.format.features import LANGUAGE_COLUMNS, Features, check_language_type, image_column_type_ok
from lerobot_shards.core.format.mp4 import check_preroll, read_track
from lerobot_shards.core.format.parquet.row_groups import check_row_group, decode_row_group, parse_footer
from lerobot_shards.core.pack.catalog import CatalogPack, EpisodeCatalog
from lerobot_shards.core.pack.packed_index import PackedIndex, read_manifest, verified_read
from lerobot_shards.core.storage import RetryPolicy, Storage
from lerobot_shards.reader.fetch import handover
from lerobot_shards.reader.fetch.disk_cache import DiskCache, range_key
from lerobot_shards.reader.fetch.prefetch import Prefetcher

# pyarrow.compute makes its functions at import; a static checker cannot see them.
pc: Any = _compute

# Reads an EpisodeFetcher has in flight besides its callers' own (two per fetching thread: the
# row group beside the footer, the members beside both), per process.
_IO_THREADS = 8


def _holds_structs(arrow_type: pa.DataType) -> bool:
    while pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        arrow_type = arrow_type.value_type
    return pa.types.is_struct(arrow_type)


def column_values(array: pa.ChunkedArray):
    """An episode's column as LeRobot returns its values: ``torch.tensor(python value)``
    semantics, so ints become int64 and floats float32 (the default dtype), bools stay bool;
    an image feature's pictures as their bytes; strings and lists of records (language
    columns) as Python values. Returns a tensor with the rows first, or a list."""
    if isinstance(array.type, pa.ExtensionType):
        # Extension types are whatever the process registered: with ``datasets`` imported (as
        # under lerobot-train), LeRobot's 2-D..5-D features read as its ArrayND types. Their
        # storage is the plain nested list the values are.
        array = pa.chunked_array([chunk.storage for chunk in array.chunks], type=array.type.storage_type)
    arrow_type = array.type
    if pa.types.is_struct(arrow_type) and arrow_type.get_field_index("bytes") >= 0:
        # An image feature ({bytes, path} per row): the pictures' bytes, decoded when a sample needs one.
        return pc.struct_field(array, "bytes").to_pylist()
    if _holds_structs(arrow_type):
        return array.to_pylist()  # lists of records (LeRobot's language columns) stay Python values
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


def _check_column_types(schema: pa.Schema, features: Features, *, where: str) -> None:
    """Columns whose type the format fixes have it (a hostile pack's shard parquet may hold
    anything under a language or picture column's name): LeRobot's language rows, pictures.

    Raises:
        EpisodeDataError: names the file, the column, the type found and the one expected.
    """
    for name in LANGUAGE_COLUMNS:
        if name in schema.names:
            try:
                check_language_type(name, schema.field(name).type, where=where)
            except FormatError as err:
                raise EpisodeDataError(str(err)) from None
    for key in features.image_keys:
        if key in schema.names and not image_column_type_ok(schema.field(key).type):
            raise EpisodeDataError(
                f"{where}: image feature {key!r} is stored as {str(schema.field(key).type)[:120]}, not LeRobot's {{bytes, path}}"
            )


def _held_bytes(column) -> int:
    """Memory a column of an admitted episode holds: a tensor's elements, or the pictures'
    bytes of an image column (other Python values are small: strings, language lists)."""
    if isinstance(column, torch.Tensor):
        return column.element_size() * column.nelement()
    return sum(len(v) for v in column if isinstance(v, bytes))


@dataclass(eq=False)
class LoadedEpisode:
    """An admitted episode: per-column tensors (rows x ...) and member bytes per camera.

    ``nbytes``: the memory it holds, compressed members plus row tensors (open decoders,
    which the sample builder keeps per episode while it is held, come on top). Compared and
    hashed by identity: one object per admission.
    """

    entry: EpisodeEntry
    dataset: int
    columns: dict[str, Any]  # tensors, or lists of pictures and language values
    video: dict[str, bytes]
    nbytes: int
    label: str = ""

    def where(self, camera: str | None = None) -> str:
        return f"{self.label} camera {camera}" if camera else self.label


@dataclass
class FetchCounters:
    bytes_fetched: int = 0
    fetch_seconds: float = 0.0
    episodes_admitted: int = 0
    disk_cache_hits: int = 0


class DatasetStorages:
    """A ``Storage`` per pack root of a catalog, made on first use (cheap: roots with the same
    options share one client, ``lerobot_shards.core.storage.clients``)."""

    def __init__(
        self,
        catalog: EpisodeCatalog,
        storage_options: dict | None = None,
        retry: RetryPolicy = RetryPolicy(),
        *,
        given: tuple[Storage, ...] = (),
    ):
        self._catalog, self._options, self._retry = catalog, dict(storage_options or {}), retry
        self._made: dict[int, Storage] = dict(enumerate(given))
        self._given = len(given)
        self._lock = threading.Lock()

    def get(self, dataset: int) -> Storage:
        storage = self._made.get(dataset)
        if storage is None:
            with self._lock:
                storage = self._made.get(dataset)
                if storage is None:
                    storage = self._made[dataset] = Storage(
                        self._catalog.datasets[dataset].root, self._options, retry=self._retry
                    )
        return storage

    @property
    def retries(self) -> int:
        """Retries of every storage made so far (this process)."""
        return sum(s.counters.retries for s in list(self._made.values()))

    @property
    def opened(self) -> int:
        """How many packs this consumer has read from."""
        return len(self._made) - self._given + sum(1 for s in list(self._made.values())[: self._given] if s.counters.requests)


class EpisodeFetcher:
    """Reads episodes of a catalog (thread-safe; fetch threads run in parallel).

    Rows: the episode's row group of its shard parquet. A shard's footer is read once (its
    span and SHA-256 come from the catalog) and kept in a small LRU; the group's bytes are read
    and checked against their digest before pyarrow decodes them; decoded groups stay in a
    byte-bounded LRU (episodes are admitted in plan order, so neighbours often share a group).
    Threads needing the same footer or group wait for one read of it.
    Members: one ranged read over all of an episode's members, each checked by SHA-256.
    """

    def __init__(
        self,
        catalog: EpisodeCatalog,
        storages: DatasetStorages,
        *,
        row_group_cache_bytes: int = 64 * 1024 * 1024,
        footer_cache_bytes: int = 32 * 1024 * 1024,
        disk_cache: DiskCache | None = None,
    ):
        self.catalog = catalog
        self.storages = storages
        self.disk_cache = disk_cache
        self._lock = threading.Lock()  # guards the dicts below, never held during I/O
        self._footers: OrderedDict[int, tuple[pq.FileMetaData, int]] = OrderedDict()
        self._footer_bytes = 0
        self._footer_cache_bytes = footer_cache_bytes
        self._key_locks: dict[tuple, threading.Lock] = {}
        self._groups: OrderedDict[tuple[int, int], tuple[pa.Table, int]] = OrderedDict()
        self._group_cache_bytes = row_group_cache_bytes
        self._group_bytes = 0
        self._io_pool: tuple[int, ThreadPoolExecutor] | None = None
        self._packs: dict[int, tuple[Manifest, EpisodeTable, np.ndarray, np.ndarray]] = {}  # compiled catalogs' truth
        self.counters = FetchCounters()
        # Every episode fetched, kept for the workers forked next (a first batch built in the
        # training process: fetch.handover); None: nothing kept.
        self.kept: dict[int, LoadedEpisode] | None = None

    @classmethod
    def for_pack(cls, storage: Storage, index: PackedIndex, **options) -> EpisodeFetcher:
        """A fetcher of one opened pack: episode ``i`` is ``index.episodes[i]``; reads go
        through ``storage`` (its options, retries and counters)."""
        info = CatalogPack.opened(storage.url.rsplit("/", 1)[-1], storage.url, index)
        catalog = EpisodeCatalog.from_packs([(info, index, {})])
        return cls(catalog, DatasetStorages(catalog, storage.storage_options, storage.retry, given=(storage,)), **options)

    def _soon(self, storage: Storage, call: Callable[[], bytes]) -> Callable[[], bytes]:
        """``call`` (a read) started now on an I/O thread when ``storage`` is remote, its result
        taken when the returned function is called: an episode's reads (footer, row group,
        members) go out in one round of requests instead of one after another. Local storage
        does not wait on requests: ``call`` runs when asked."""
        if storage.is_local:
            return call
        with self._lock:
            if self._io_pool is None or self._io_pool[0] != os.getpid():  # made per process (workers fork)
                self._io_pool = (
                    os.getpid(),
                    ThreadPoolExecutor(max_workers=_IO_THREADS, thread_name_prefix="lerobot-shards-read"),
                )
            pool = self._io_pool[1]
        return pool.submit(call).result

    def close(self, *, wait: bool = False) -> None:
        """Stop the I/O threads (reads in flight finish, their results dropped; with ``wait``,
        before this returns)."""
        with self._lock:
            made, self._io_pool = self._io_pool, None
        if made is not None and made[0] == os.getpid():
            made[1].shutdown(wait=wait, cancel_futures=True)

    def _key_lock(self, key: tuple) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _footer(self, episode: int, storage: Storage) -> pq.FileMetaData:
        row = int(self.catalog.shard_row[episode])
        with self._lock:
            if row in self._footers:
                self._footers.move_to_end(row)
                return self._footers[row][0]
        with self._key_lock(("footer", row)):
            with self._lock:
                if row in self._footers:
                    return self._footers[row][0]
            shard = self.catalog.shard(episode)
            rel = shard_parquet_path(shard.number)
            data = storage.read_range(rel, shard.footer.offset, shard.footer.bytes)
            footer = parse_footer(data, size=shard.footer.bytes, sha256=shard.footer.sha256, where=storage.describe(rel))
            with self._lock:
                self._footers[row] = (footer, shard.footer.bytes)
                self._footer_bytes += shard.footer.bytes
                while len(self._footers) > 1 and self._footer_bytes > self._footer_cache_bytes:
                    evicted, (_, size) = self._footers.popitem(last=False)
                    self._footer_bytes -= size
                    self._key_locks.pop(("footer", evicted), None)
            return footer

    def _row_group(self, episode: int, entry: EpisodeEntry, storage: Storage) -> tuple[pa.Table, int]:
        """The decoded row group holding ``entry``'s rows, and the file row it starts at."""
        catalog = self.catalog
        key = (int(catalog.shard_row[episode]), entry.row_group.index)
        with self._key_lock(("group", *key)):
            with self._lock:
                if key in self._groups:
                    self._groups.move_to_end(key)
                    return self._groups[key]
            ref = entry.row_group
            rel = shard_parquet_path(entry.shard)
            where = storage.describe(rel)
            # The group's bytes are asked for with the footer (both spans are in the catalog);
            # nothing is decoded before the footer's checks.
            group_bytes = self._soon(storage, lambda: storage.read_range(rel, ref.offset, ref.bytes))
            metadata = self._footer(episode, storage)
            group_start = check_row_group(
                metadata,
                ref.index,
                offset=ref.offset,
                nbytes=ref.bytes,
                first_row=entry.row_start,
                rows=entry.length,
                group_rows=int(catalog.row_group_rows[episode]),
                where=where,
            )
            data = group_bytes()
            table = decode_row_group(
                metadata,
                ref.index,
                data,
                offset=ref.offset,
                sha256=ref.sha256,
                file_size=catalog.shard(episode).parquet_bytes,
                single_episode=int(catalog.row_group_episodes[episode]) == 1,
                values_per_row=catalog.datasets[int(catalog.dataset[episode])].column_caps,
                where=where,
            )
            with self._lock:
                self._groups[key] = (table, group_start)
                self._group_bytes += table.nbytes
                while len(self._groups) > 1 and self._group_bytes > self._group_cache_bytes:
                    evicted_key, (evicted, _) = self._groups.popitem(last=False)
                    self._group_bytes -= evicted.nbytes
                    self._key_locks.pop(("group", *evicted_key), None)
            return table, group_start

    def fetch(self, episode: int) -> LoadedEpisode:
        """Read one episode (a catalog position): its rows and members, checked.

        Raises:
            IntegrityError: rows or member bytes differ from what was packed (names the file).
            EpisodeDataError: rows disagree with the index (names shard + episode).
            StorageError: the read failed after retries.
            ResourceLimitError: a process limit (open files, threads, memory) was hit.
        """
        handed = handover.take(self.catalog, episode)
        if handed is not None:  # read by the training process just before this worker forked
            with self._lock:
                self.counters.episodes_admitted += 1
            return handed
        label = self.catalog.describe(episode)
        try:
            loaded = self._fetch(episode, label)
        except ShortReadError as err:
            # The catalog records every file's size: a file shorter than that is damaged.
            raise IntegrityError(f"{label}: {err}") from err
        except StorageError as err:
            raise type(err)(f"{label}: {err}", url=err.url, operation=err.operation, attempts=err.attempts) from err
        if self.kept is not None:
            with self._lock:
                self.kept.setdefault(episode, loaded)
        return loaded

    def _fetch(self, episode: int, label: str) -> LoadedEpisode:
        started = time.perf_counter()
        catalog = self.catalog
        dataset = int(catalog.dataset[episode])
        storage = self.storages.get(dataset)
        entry = catalog.entry(episode)
        if catalog.compiled:
            self._check_against_pack(episode, dataset, storage, entry, label)
        offset, size = entry.byte_range
        tar = shard_tar_path(entry.shard)
        # Stamped with the shard's sha256: a re-packed shard misses instead of serving old bytes.
        cache_key = range_key(storage.object_url(tar), offset, size, catalog.shard(episode).tar_sha256) if size else None
        cached = self.disk_cache.get(cache_key) if cache_key is not None and self.disk_cache is not None else None
        # The members' bytes are asked for with the rows' (one round of requests per episode).
        members_bytes = self._soon(storage, lambda: storage.read_range(tar, offset, size)) if size and cached is None else None
        table, group_start = self._row_group(episode, entry, storage)
        rows = table.slice(entry.row_start - group_start, entry.length)
        if (
            rows.num_rows != entry.length
            or "episode_index" not in rows.column_names
            or (
                entry.length
                and (rows["episode_index"][0].as_py(), rows["episode_index"][-1].as_py()) != (entry.episode_index,) * 2
            )
        ):
            raise EpisodeDataError(
                f"{storage.describe(shard_parquet_path(entry.shard))}: rows [{entry.row_start}, "
                f"{entry.row_start + entry.length}) are not episode {entry.episode_index}'s"
            )
        _check_column_types(
            rows.schema, catalog.datasets[dataset].features, where=storage.describe(shard_parquet_path(entry.shard))
        )
        columns: dict[str, Any] = {name: column_values(rows[name]) for name in rows.column_names}
        video: dict[str, bytes] = {}
        if size:
            blob = cached
            if blob is not None:
                try:
                    video = self._members(entry, blob, offset, storage.describe(tar), label)
                    with self._lock:
                        self.counters.disk_cache_hits += 1
                except IntegrityError:
                    blob = None  # a damaged cache entry is a miss: fetch the shard's bytes
            if blob is None:
                blob = members_bytes() if members_bytes is not None else storage.read_range(tar, offset, size)
                video = self._members(entry, blob, offset, storage.describe(tar), label)
                if self.disk_cache is not None and cache_key is not None:
                    self.disk_cache.put(cache_key, blob)
        with self._lock:
            self.counters.bytes_fetched += size + rows.nbytes
            self.counters.fetch_seconds += time.perf_counter() - started
            self.counters.episodes_admitted += 1
        # What the pool holds: the compressed members and the row tensors (decoders excluded).
        held = size + sum(_held_bytes(v) for v in columns.values())
        return LoadedEpisode(entry=entry, dataset=dataset, columns=columns, video=video, nbytes=held, label=label)

    def _pack_truth(self, dataset: int, storage: Storage) -> tuple[Manifest, EpisodeTable, np.ndarray, np.ndarray]:
        """The pack's manifest (at its pin) and episodes index (at the manifest's digest), read
        once per process: two files per pack, not per episode; and, per episode, the episodes
        and rows of its row group."""
        with self._key_lock(("pack", dataset)):
            found = self._packs.get(dataset)
            if found is None:
                manifest, _ = read_manifest(storage, manifest_sha256=self.catalog.datasets[dataset].manifest_sha256)
                data = verified_read(storage, manifest, EPISODES_INDEX_PATH)
                table = parse_episodes_index(data, manifest, where=storage.describe(EPISODES_INDEX_PATH))
                found = self._packs[dataset] = (manifest, table, *table.row_group_totals())
            return found

    def _check_against_pack(self, episode: int, dataset: int, storage: Storage, entry: EpisodeEntry, label: str) -> None:
        """A compiled mixture's row of an episode is its pack's own: every field that decides
        which bytes and frames are read (rows, row group, shard, members, pre-roll), compared
        with the pack's index when the episode is admitted. A shared mixture file re-sealed with
        rows of another episode would otherwise send them to its frames, every digest intact.

        Raises:
            EpisodeDataError: names the episode, the pack and the fields that differ.
        """
        manifest, table, group_episodes, group_rows = self._pack_truth(dataset, storage)
        catalog = self.catalog
        at = int(np.searchsorted(table.episode_index, entry.episode_index))
        differ: list[str] = []
        if at >= len(table) or int(table.episode_index[at]) != entry.episode_index:
            differ.append("episode_index (not in the pack)")
        else:
            own = table[at]
            differ += [
                name
                for name in ("shard", "length", "dataset_from_index", "row_start", "row_group", "cameras")
                if getattr(own, name) != getattr(entry, name)
            ]
            if (int(group_episodes[at]), int(group_rows[at])) != (
                int(catalog.row_group_episodes[episode]),
                int(catalog.row_group_rows[episode]),
            ):
                differ.append("row group totals")
            shard = catalog.shard(episode)
            recorded = next((s for s in manifest.shards if s.index == shard.number), None)
            if recorded is None or (recorded.parquet_bytes, recorded.tar_bytes, recorded.tar_sha256) != (
                shard.parquet_bytes,
                shard.tar_bytes,
                shard.tar_sha256,
            ):
                differ.append("shard")
        if differ:
            name = catalog.datasets[dataset].name
            raise EpisodeDataError(
                f"{label}: the compiled mixture's row differs from pack {name!r}'s own index ({', '.join(differ)}): the "
                "mixture file was changed after it was made; re-create it with `lerobot-shards mixture create`"
            )

    def _members(self, entry: EpisodeEntry, blob: bytes, offset: int, tar: str, label: str) -> dict[str, bytes]:
        """Each camera's member cut from ``blob`` (bytes from ``offset`` of the tar), checked."""
        video = {}
        for key, member in entry.cameras.items():
            data = blob[member.offset - offset : member.offset - offset + member.size]
            where = f"{tar} {label} camera {key}"
            check_bytes(data, size=member.size, sha256=member.sha256, where=where)
            if member.preroll:  # only members cut between keyframes: their boxes parsed once more
                check_preroll(read_track(data, where=where, frames=member.samples).layout.keyframes, member.preroll, where=where)
            video[key] = data
        return video


class EpisodePool:
    """The pieces a consumer holds, fetched ahead in schedule order and evicted after use.

    A piece is one episode (or, in a weighted mixture, a range of one episode's anchors) of the
    plan; the pool keys by piece and fetches its episode. The schedule bounds how many pieces
    are open (``episode_pool_size`` slots); this class holds them and, through a
    ``Prefetcher``, fetches the next ones in the order they will first be needed: at most
    ``prefetch`` pieces and ``prefetch_bytes`` of their video bytes ahead of use (one always
    runs), over every dataset together. Peak memory per consumer is therefore about the open
    pieces (``max_open_bytes``), plus ``prefetch_bytes`` of video ahead (with its rows), plus
    the fetcher's caches, plus one open decoder per camera of each open piece.
    """

    def __init__(self, fetcher: EpisodeFetcher, *, prefetch: int = 4, prefetch_bytes: int | None = None, threads: int = 2):
        self.fetcher = fetcher
        catalog = fetcher.catalog
        self._episode_of: dict[int, int] = {}
        self.prefetcher: Prefetcher[LoadedEpisode] = Prefetcher(
            lambda piece: fetcher.fetch(self._episode_of[piece]),
            size_of=lambda piece: catalog.member_bytes(self._episode_of[piece]),
            describe=lambda piece: catalog.describe(self._episode_of[piece]),
            depth=max(prefetch, 0),
            byte_budget=prefetch_bytes,
            threads=threads,
        )
        self.open_episodes: dict[int, LoadedEpisode] = {}
        self.open_bytes = 0
        self.max_open = 0
        self.max_open_bytes = 0

    def schedule(self, order: Sequence[tuple[int, int]]) -> None:
        """Set the ``(piece, episode)`` order in which pieces will first be needed."""
        self._episode_of.update(order)
        self.prefetcher.schedule([piece for piece, _ in order], skip=self.open_episodes.__contains__)

    def extend(self, order: Sequence[tuple[int, int]]) -> None:
        """Append ``(piece, episode)`` pairs to the order set by ``schedule``."""
        self._episode_of.update(order)
        self.prefetcher.extend([piece for piece, _ in order])

    def get(self, piece: int, episode: int) -> LoadedEpisode:
        """The open piece's episode; waits for (or starts) its fetch.

        A failure in a background fetch is re-raised here, naming the shard and episode.
        """
        loaded = self.open_episodes.get(piece)
        if loaded is None:
            self._episode_of[piece] = episode
            loaded = self.prefetcher.take(piece)
            self.open_episodes[piece] = loaded
            self.open_bytes += loaded.nbytes
            self.max_open = max(self.max_open, len(self.open_episodes))
            self.max_open_bytes = max(self.max_open_bytes, self.open_bytes)
        return loaded

    def release(self, piece: int) -> None:
        """Evict a piece after its last draw: its rows and bytes go (and with the last
        reference, the decoders a sample builder opened on it)."""
        loaded = self.open_episodes.pop(piece, None)
        if loaded is not None:
            self.open_bytes -= loaded.nbytes
        self._episode_of.pop(piece, None)

    def release_all(self) -> None:
        """Evict every open piece."""
        for piece in list(self.open_episodes):
            self.release(piece)

    def close(self, *, wait: bool = False) -> None:
        """Evict everything and stop prefetching (with ``wait``, every fetch thread has ended on return)."""
        self.prefetcher.close(wait=wait)
        self.release_all()
        self.fetcher.close(wait=wait)


__all__ = ["DatasetStorages", "EpisodeDataError", "EpisodeFetcher", "EpisodePool", "FetchCounters", "LoadedEpisode"]
