"""Every episode of every pack a stream reads, as columns: what fetching an episode needs.

A ``PackedDataset`` is a catalog of one pack, a ``MixtureDataset`` one of many; the runtime
reads both the same way (one pool, one prefetcher, one fetcher per consumer, a dataset being
only a label of its episodes). Columns are numpy arrays, not one object per episode: a
mixture of 3,000 packs and 350,000 episodes costs tens of MB, shared by forked DataLoader
workers, and an ``EpisodeEntry`` is built only for an episode being admitted.

Built from opened packs (``from_packs``: each pack's checked manifest and episodes index) or
from the compiled index ``mixture create`` wrote (``from_tables``), which is as untrusted as
any dataset file: its tables are read and every value checked against the format's rules and
the mixture file's counts beside the format that defines them
(``lerobot_shards.core.format.mixture_tables``) before anything is read with it. ``to_tables``
is the inverse, what ``mixture create`` writes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
import pyarrow as pa
from numpy.typing import DTypeLike

from lerobot_shards.core.errors import MixtureSpecError
from lerobot_shards.core.format import (
    VIDEO_CODECS,
    CameraMember,
    EpisodeEntry,
    FooterEntry,
    RowGroupRef,
    shard_name,
)
from lerobot_shards.core.format.features import Features
from lerobot_shards.core.format.mixture import MixtureEntry
from lerobot_shards.core.format.mixture_tables import (
    CatalogColumns,
    catalog_tables,
    check_catalog_columns,
    read_catalog_tables,
)
from lerobot_shards.core.format.parquet.row_groups import feature_budget
from lerobot_shards.core.pack.packed_index import PackedIndex
from lerobot_shards.core.windows import DEFAULT_TOLERANCE_S


@dataclass(frozen=True)
class CatalogPack:
    """One pack of a catalog: what reading it needs besides its episodes.

    Attributes:
        name: the dataset's name in the stream (its mixture name, or the root's last part).
        root: the pack's root (path or URL).
        manifest_sha256: ``sha256:<hex>`` of the manifest its index came from.
        fps, features, video_keys, tolerance_s: from that manifest.
        where: the predicate that selected its anchors, if any.
    """

    name: str
    root: str
    manifest_sha256: str
    fps: float
    features: Features
    video_keys: tuple[str, ...]
    tolerance_s: float
    where: str | None = None

    @classmethod
    def opened(
        cls, name: str, root: str, index: PackedIndex, *, where: str | None = None, tolerance_s: float | None = None
    ) -> CatalogPack:
        """The pack ``index`` was opened from (its checked manifest), named ``name`` in the
        stream; ``tolerance_s`` overrides the manifest's (a reader's option)."""
        manifest = index.manifest
        return cls(
            name=name,
            root=root,
            manifest_sha256=index.manifest_sha256,
            fps=manifest.fps,
            features=manifest.features,
            video_keys=tuple(manifest.video_keys),
            tolerance_s=manifest.tolerance_s if tolerance_s is None else tolerance_s,
            where=where,
        )

    @classmethod
    def recorded(cls, name: str, entry: MixtureEntry) -> CatalogPack:
        """A pack as a compiled mixture records it (its ``mixture.json`` entry, parsed).

        Raises:
            MixtureSpecError: an entry without a pin (compiled mixtures, version 2 on, pin each).
        """
        if entry.manifest_sha256 is None:
            raise MixtureSpecError(f"mixture entry {name!r}: a compiled mixture pins each pack (manifest_sha256)")
        return cls(
            name=name,
            root=entry.path,
            manifest_sha256=entry.manifest_sha256,
            fps=entry.fps,
            features=entry.features,
            video_keys=tuple(entry.video_keys),
            tolerance_s=entry.tolerance_s if entry.tolerance_s is not None else DEFAULT_TOLERANCE_S,
            where=entry.where,
        )

    @functools.cached_property
    def column_caps(self) -> dict[str, int]:
        """Values per row each tabular feature's parquet column may hold (its shape's product)."""
        return feature_budget(self.features)

    @property
    def frame_sizes(self) -> dict[str, tuple[int, int]]:
        """(height, width) of each camera: every member is checked against it when decoded."""
        return {k: camera.size for k in self.video_keys if (camera := self.features[k].camera) is not None}


@dataclass(frozen=True)
class ShardRef:
    """What a reader needs of a shard before parsing its footer."""

    dataset: int
    number: int
    parquet_bytes: int
    footer: FooterEntry
    tar_bytes: int
    tar_sha256: str


def _sha_matrix(hex_digests: Sequence[str]) -> np.ndarray:
    if not hex_digests:
        return np.zeros((0, 32), np.uint8)
    return np.frombuffer(b"".join(bytes.fromhex(h) for h in hex_digests), dtype=np.uint8).reshape(-1, 32).copy()


def _nonzero_or_none(values: np.ndarray) -> np.ndarray | None:
    """A pre-roll column as the catalog keeps it: None when no member has any."""
    return values if values.any() else None


def _anchor_runs(frames: np.ndarray, start: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Anchor frames of every episode (``frames[start[i]:start[i + 1]]``, ascending) as
    ``[lo, hi)`` runs of consecutive frames, and runs per episode. An episode whose anchors are
    every frame or none keeps no runs (its anchor count says which). Vectorized."""
    counts = np.diff(start)
    owner = np.repeat(np.arange(len(counts)), counts)
    partial = (counts > 0) & (counts < length)
    keep = partial[owner]
    frames, owner = frames[keep], owner[keep]
    if not len(frames):
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(len(counts), np.int64)
    opens = np.r_[True, (np.diff(frames) != 1) | (owner[1:] != owner[:-1])]
    first = np.flatnonzero(opens)
    last = np.r_[first[1:], len(frames)] - 1
    return (
        frames[first].astype(np.int64),
        frames[last].astype(np.int64) + 1,
        np.bincount(owner[first], minlength=len(counts)).astype(np.int64),
    )


class _Parts:
    """Columns of a catalog being built, one piece per pack (``EpisodeCatalog.from_packs``)."""

    def __init__(self) -> None:
        self._parts: dict[str, list[np.ndarray]] = {}
        self.task_text: list[str] = []

    def add(self, name: str, values) -> None:
        self._parts.setdefault(name, []).append(np.asarray(values))

    def add_shards(self, d: int, shards) -> None:
        self.add("shard_dataset", np.full(len(shards), d, np.int32))
        self.add("shard_number", np.array([s.index for s in shards], np.int32))
        self.add("shard_parquet_bytes", np.array([s.parquet_bytes for s in shards], np.int64))
        self.add("shard_footer_offset", np.array([s.parquet_footer.offset for s in shards], np.int64))
        self.add("shard_footer_bytes", np.array([s.parquet_footer.bytes for s in shards], np.int64))
        self.add("shard_footer_sha256", _sha_matrix([s.parquet_footer.sha256 for s in shards]))
        self.add("shard_tar_bytes", np.array([s.tar_bytes for s in shards], np.int64))
        self.add("shard_tar_sha256", _sha_matrix([s.tar_sha256 for s in shards]))

    def add_episodes(self, d: int, index: PackedIndex, shard_rows: int) -> None:
        """The selected episodes' rows; row-group totals over every episode of the pack (a
        selection does not change what a row group holds)."""
        table = index.episodes
        group_episodes, group_rows = index.all_episodes.row_group_totals()
        chosen = index.all_episodes.positions(table.episode_index)
        self.add("dataset", np.full(len(table), d, np.int32))
        for name in ("episode_index", "length", "row_start", "row_group_offset", "row_group_bytes"):
            self.add(name, getattr(table, name))
        self.add("from_index", table.dataset_from_index)
        self.add("shard_row", shard_rows + table.shard)
        self.add("row_group", table.row_group.astype(np.int32))
        self.add("row_group_sha256", table.row_group_sha256)
        self.add("row_group_episodes", group_episodes[chosen].astype(np.int32))
        self.add("row_group_rows", group_rows[chosen])
        self.add("anchor_counts", np.asarray(index.anchor_counts, dtype=np.int64))

    def add_members(self, table, cameras: int) -> None:
        self.add("member_count", np.full(len(table), cameras, np.int64))
        self.add("member_offset", table.member_offset.reshape(-1))
        self.add("member_size", table.member_size.reshape(-1))
        self.add("member_frames", table.member_frames.reshape(-1))
        self.add("member_codec", table.member_codec.reshape(-1))
        self.add("member_sha256", table.member_sha256.reshape(-1, 32))
        preroll = table.member_preroll if table.member_preroll is not None else np.zeros_like(table.member_frames)
        self.add("member_preroll", preroll.reshape(-1))

    def add_anchors(self, index: PackedIndex) -> None:
        """The anchor runs of a ``where=`` selection (none when every frame, or none, anchors)."""
        table = index.episodes
        if index.anchor_frames is not None and index.anchor_start is not None:
            lo, hi, count = _anchor_runs(index.anchor_frames, index.anchor_start, table.length)
        else:
            lo = hi = np.zeros(0, np.int64)
            count = np.zeros(len(table), np.int64)
        self.add("run_lo", lo)
        self.add("run_hi", hi)
        self.add("run_count", count)

    def add_tasks(self, d: int, tasks: dict[int, str]) -> None:
        ordered = sorted(tasks.items())
        self.add("task_dataset", np.full(len(ordered), d, np.int32))
        self.add("task_index", np.array([k for k, _ in ordered], np.int64))
        self.task_text += [text for _, text in ordered]

    def cat(self, name: str, dtype: DTypeLike = np.int64, width: int = 0) -> np.ndarray:
        pieces = self._parts.get(name, [])
        if not pieces:
            return np.zeros((0, width) if width else 0, dtype)
        return np.concatenate(pieces).astype(dtype, copy=False)

    def columns(self) -> dict:
        """Every ``CatalogColumns`` field, the packs' pieces concatenated."""
        cat = self.cat
        return dict(
            dataset=cat("dataset", np.int32),
            episode_index=cat("episode_index"),
            length=cat("length"),
            from_index=cat("from_index"),
            shard_row=cat("shard_row"),
            row_start=cat("row_start"),
            row_group=cat("row_group", np.int32),
            row_group_offset=cat("row_group_offset"),
            row_group_bytes=cat("row_group_bytes"),
            row_group_sha256=cat("row_group_sha256", np.uint8, 32),
            row_group_episodes=cat("row_group_episodes", np.int32),
            row_group_rows=cat("row_group_rows"),
            anchor_counts=cat("anchor_counts"),
            member_start=np.concatenate([[0], np.cumsum(cat("member_count"))]).astype(np.int64),
            member_offset=cat("member_offset"),
            member_size=cat("member_size"),
            member_frames=cat("member_frames"),
            member_codec=cat("member_codec", np.int8),
            member_sha256=cat("member_sha256", np.uint8, 32),
            run_start=np.concatenate([[0], np.cumsum(cat("run_count"))]).astype(np.int64),
            run_lo=cat("run_lo"),
            run_hi=cat("run_hi"),
            shard_dataset=cat("shard_dataset", np.int32),
            shard_number=cat("shard_number", np.int32),
            shard_parquet_bytes=cat("shard_parquet_bytes"),
            shard_footer_offset=cat("shard_footer_offset"),
            shard_footer_bytes=cat("shard_footer_bytes"),
            shard_footer_sha256=cat("shard_footer_sha256", np.uint8, 32),
            shard_tar_bytes=cat("shard_tar_bytes"),
            shard_tar_sha256=cat("shard_tar_sha256", np.uint8, 32),
            task_dataset=cat("task_dataset", np.int32),
            task_index=cat("task_index"),
            task_text=self.task_text,
            member_preroll=_nonzero_or_none(cat("member_preroll")),
        )


@dataclass(eq=False)
class EpisodeCatalog(CatalogColumns):
    """Episodes of one or more packs, columnar (see the module docstring), and the packs they
    belong to (``datasets``). Build with ``from_packs`` or ``from_tables``; arrays are read-only."""

    datasets: list[CatalogPack] = field(kw_only=True)
    # Built from a compiled mixture's tables (``from_tables``): its rows are what a mixture file
    # says of packs, which a reader compares with each pack's own index when it admits an episode.
    compiled: bool = field(default=False, kw_only=True)
    dataset_start: np.ndarray = field(init=False)
    _tasks: dict[int, dict[int, str]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        starts = np.searchsorted(self.dataset, np.arange(len(self.datasets) + 1), side="left").astype(np.int64)
        starts.setflags(write=False)
        self.dataset_start = starts

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def from_packs(cls, packs: Sequence[tuple[CatalogPack, PackedIndex, dict[int, str]]]) -> EpisodeCatalog:
        """A catalog of opened packs: ``(dataset, its checked index, its tasks)`` each, with the
        index's selection (``episodes=``, ``where=``) as the catalog's episodes and anchors.

        O(episodes x cameras + anchors) vectorized per pack: the only Python loop is over packs.
        """
        parts = _Parts()
        shard_rows = 0
        for d, (info, index, tasks) in enumerate(packs):
            table = index.episodes
            if tuple(table.video_keys) != tuple(info.video_keys):
                raise ValueError(f"{info.name}: the index's cameras {table.video_keys} are not the dataset's {info.video_keys}")
            parts.add_shards(d, index.manifest.shards)
            parts.add_episodes(d, index, shard_rows)
            parts.add_members(table, len(info.video_keys))
            parts.add_anchors(index)
            parts.add_tasks(d, tasks)
            shard_rows += len(index.manifest.shards)
        return cls(datasets=[info for info, _, _ in packs], **parts.columns())

    def to_tables(self) -> dict[str, pa.Table]:
        """The compiled index tables (``episodes``, ``shards``, ``anchors``, ``tasks``):
        ``lerobot_shards.core.format.mixture_tables.catalog_tables``."""
        return catalog_tables(self)

    @classmethod
    def from_tables(
        cls,
        datasets: list[CatalogPack],
        tables: dict[str, pa.Table],
        *,
        episodes_per_dataset: Sequence[int],
        anchors_per_dataset: Sequence[int],
        where: str,
    ) -> EpisodeCatalog:
        """A catalog from a compiled mixture's tables, every value checked against the format
        and the mixture file's counts (``lerobot_shards.core.format.mixture_tables``).

        Raises:
            FormatError: a schema other than the format's, or a value that breaks its rules
                or disagrees with the mixture file's counts (names the table and row).
        """
        columns = read_catalog_tables(tables, where=where)
        check_catalog_columns(
            columns,
            names=[d.name for d in datasets],
            cameras=[len(d.video_keys) for d in datasets],
            episodes_per_dataset=episodes_per_dataset,
            anchors_per_dataset=anchors_per_dataset,
            where=where,
        )
        return cls(datasets=list(datasets), compiled=True, **{f.name: getattr(columns, f.name) for f in fields(CatalogColumns)})

    # -- queries --------------------------------------------------------------------------------
    @property
    def num_episodes(self) -> int:
        return len(self.dataset)

    def episode_range(self, dataset: int) -> tuple[int, int]:
        """``[first, stop)`` catalog positions of the dataset's episodes."""
        return int(self.dataset_start[dataset]), int(self.dataset_start[dataset + 1])

    def dataset_anchor_counts(self) -> list[np.ndarray]:
        """Each dataset's (episodes,) anchor counts (views), in dataset order."""
        return [self.anchor_counts[self.dataset_start[d] : self.dataset_start[d + 1]] for d in range(len(self.datasets))]

    def shard(self, episode: int) -> ShardRef:
        row = int(self.shard_row[episode])
        return ShardRef(
            dataset=int(self.shard_dataset[row]),
            number=int(self.shard_number[row]),
            parquet_bytes=int(self.shard_parquet_bytes[row]),
            footer=FooterEntry(
                int(self.shard_footer_offset[row]), int(self.shard_footer_bytes[row]), bytes(self.shard_footer_sha256[row]).hex()
            ),
            tar_bytes=int(self.shard_tar_bytes[row]),
            tar_sha256=bytes(self.shard_tar_sha256[row]).hex(),
        )

    def entry(self, episode: int) -> EpisodeEntry:
        """The episode's ``EpisodeEntry`` (built on demand; ``tasks`` is not carried: a sample's
        task comes from its ``task_index``)."""
        d = int(self.dataset[episode])
        first = int(self.member_start[episode])
        cameras = {
            key: CameraMember(
                offset=int(self.member_offset[first + k]),
                size=int(self.member_size[first + k]),
                frames=int(self.member_frames[first + k]),
                sha256=bytes(self.member_sha256[first + k]).hex(),
                codec=VIDEO_CODECS[int(self.member_codec[first + k])],
                preroll=int(self.member_preroll[first + k]) if self.member_preroll is not None else 0,
            )
            for k, key in enumerate(self.datasets[d].video_keys)
        }
        return EpisodeEntry(
            episode_index=int(self.episode_index[episode]),
            shard=int(self.shard_number[int(self.shard_row[episode])]),
            length=int(self.length[episode]),
            dataset_from_index=int(self.from_index[episode]),
            row_start=int(self.row_start[episode]),
            row_group=RowGroupRef(
                int(self.row_group[episode]),
                int(self.row_group_offset[episode]),
                int(self.row_group_bytes[episode]),
                bytes(self.row_group_sha256[episode]).hex(),
            ),
            tasks=(),
            cameras=cameras,
        )

    def member_bytes(self, episode: int) -> int:
        """Bytes of the episode's members (one ranged read covers them: they are adjacent)."""
        a, b = int(self.member_start[episode]), int(self.member_start[episode + 1])
        if a == b:
            return 0
        return int((self.member_offset[a:b] + self.member_size[a:b]).max() - self.member_offset[a:b].min())

    def anchor_frames(self, episode: int, positions: np.ndarray) -> np.ndarray:
        """Frame positions of the episode's anchors at ``positions`` of its anchor list."""
        positions = np.asarray(positions, dtype=np.int64)
        a, b = int(self.run_start[episode]), int(self.run_start[episode + 1])
        if a == b:
            return positions  # every frame is an anchor
        sizes = self.run_hi[a:b] - self.run_lo[a:b]
        ends = np.cumsum(sizes)
        run = np.searchsorted(ends, positions, side="right")
        return self.run_lo[a:b][run] + positions - (ends[run] - sizes[run])

    def tasks(self, dataset: int) -> dict[int, str]:
        """``{task_index: task}`` of one dataset."""
        cached = self._tasks.get(dataset)
        if cached is None:
            rows = np.flatnonzero(self.task_dataset == dataset)
            cached = self._tasks[dataset] = {int(self.task_index[r]): self.task_text[r] for r in rows.tolist()}
        return cached

    def describe(self, episode: int) -> str:
        """``shard-000003 episode 17``, prefixed by the dataset's name in a catalog of several."""
        text = f"{shard_name(int(self.shard_number[int(self.shard_row[episode])]))} episode {int(self.episode_index[episode])}"
        return f"{self.datasets[int(self.dataset[episode])].name}: {text}" if len(self.datasets) > 1 else text


__all__ = ["CatalogPack", "EpisodeCatalog", "ShardRef"]
