"""Every episode of every pack a stream reads, as columns: what fetching an episode needs.

A ``PackedDataset`` is a catalog of one pack, a ``MixtureDataset`` one of many; the runtime
reads both the same way (one pool, one prefetcher, one fetcher per consumer, a dataset being
only a label of its episodes). Columns are numpy arrays, not one object per episode: a
mixture of 3,000 packs and 350,000 episodes costs tens of MB, shared by forked DataLoader
workers, and an ``EpisodeEntry`` is built only for an episode being admitted.

Built from opened packs (``from_packs``: each pack's checked manifest and episodes index) or
from the compiled index ``mixture create`` wrote (``from_tables``), which is as untrusted as
any dataset file: every value is checked here against the format's rules and the mixture
file's counts before anything is read with it. ``to_tables`` is the inverse, what ``mixture
create`` writes (lerobot_shards.core.format.mixture_index).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import (
    VIDEO_CODECS,
    CameraMember,
    EpisodeEntry,
    FooterEntry,
    RowGroupRef,
    shard_name,
)
from lerobot_shards.core.format.features import Features
from lerobot_shards.core.format.limits import MAX_CAMERAS, MAX_EPISODE_FRAMES
from lerobot_shards.core.format.mixture_index import (
    ANCHORS_SCHEMA,
    PREROLL_COLUMN,
    SHARDS_SCHEMA,
    TASKS_SCHEMA,
    episodes_schema,
)
from lerobot_shards.core.format.parquet.row_groups import feature_budget
from lerobot_shards.reader.fetch.packed_index import PackedIndex

_TAR_BLOCK = 512


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
    fps: int
    features: Features
    video_keys: tuple[str, ...]
    tolerance_s: float
    where: str | None = None

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


def _binary_column(values: np.ndarray) -> pa.Array:
    return pa.array([bytes(row) for row in values], pa.binary(32))


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


@dataclass(eq=False)
class EpisodeCatalog:
    """Episodes of one or more packs, columnar (see the module docstring). Build with
    ``from_packs`` or ``from_tables``; arrays are read-only."""

    datasets: list[CatalogPack]
    # per episode (E,)
    dataset: np.ndarray
    episode_index: np.ndarray
    length: np.ndarray
    from_index: np.ndarray
    shard_row: np.ndarray
    row_start: np.ndarray
    row_group: np.ndarray
    row_group_offset: np.ndarray
    row_group_bytes: np.ndarray
    row_group_sha256: np.ndarray  # (E, 32) uint8
    row_group_episodes: np.ndarray
    row_group_rows: np.ndarray
    anchor_counts: np.ndarray
    member_start: np.ndarray  # (E + 1,) into the member columns
    # per member (M,)
    member_offset: np.ndarray
    member_size: np.ndarray
    member_frames: np.ndarray
    member_codec: np.ndarray  # int8 index into VIDEO_CODECS
    member_sha256: np.ndarray  # (M, 32) uint8
    # anchor runs of episodes whose anchors are a strict subset: run_start (E + 1,) into (R,)
    run_start: np.ndarray
    run_lo: np.ndarray
    run_hi: np.ndarray
    # per shard (S,)
    shard_dataset: np.ndarray
    shard_number: np.ndarray
    shard_parquet_bytes: np.ndarray
    shard_footer_offset: np.ndarray
    shard_footer_bytes: np.ndarray
    shard_footer_sha256: np.ndarray
    shard_tar_bytes: np.ndarray
    shard_tar_sha256: np.ndarray
    # tasks, columnar; per-dataset dicts are made on first use
    task_dataset: np.ndarray
    task_index: np.ndarray
    task_text: list[str]
    # per member (M,), frames before the episode's first (packs of format 4); None: none has any
    member_preroll: np.ndarray | None = None
    dataset_start: np.ndarray = field(init=False)
    _tasks: dict[int, dict[int, str]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
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
        parts: dict[str, list[np.ndarray]] = {}

        def add(name: str, values) -> None:
            parts.setdefault(name, []).append(np.asarray(values))

        shard_rows = 0
        for d, (info, index, tasks) in enumerate(packs):
            shards, table = index.manifest.shards, index.episodes
            if tuple(table.video_keys) != tuple(info.video_keys):
                raise ValueError(f"{info.name}: the index's cameras {table.video_keys} are not the dataset's {info.video_keys}")
            add("shard_dataset", np.full(len(shards), d, np.int32))
            add("shard_number", np.array([s.index for s in shards], np.int32))
            add("shard_parquet_bytes", np.array([s.parquet_bytes for s in shards], np.int64))
            add("shard_footer_offset", np.array([s.parquet_footer.offset for s in shards], np.int64))
            add("shard_footer_bytes", np.array([s.parquet_footer.bytes for s in shards], np.int64))
            add("shard_footer_sha256", _sha_matrix([s.parquet_footer.sha256 for s in shards]))
            add("shard_tar_bytes", np.array([s.tar_bytes for s in shards], np.int64))
            add("shard_tar_sha256", _sha_matrix([s.tar_sha256 for s in shards]))
            # Totals of each episode's row group, over every episode of the pack (a selection
            # does not change what a row group holds).
            group_episodes, group_rows = index.all_episodes.row_group_totals()
            chosen = index.all_episodes.positions(table.episode_index)
            e = len(table)
            add("dataset", np.full(e, d, np.int32))
            for name in ("episode_index", "length", "row_start", "row_group_offset", "row_group_bytes"):
                add(name, getattr(table, name))
            add("from_index", table.dataset_from_index)
            add("shard_row", shard_rows + table.shard)
            add("row_group", table.row_group.astype(np.int32))
            add("row_group_sha256", table.row_group_sha256)
            add("row_group_episodes", group_episodes[chosen].astype(np.int32))
            add("row_group_rows", group_rows[chosen])
            anchors = np.asarray(index.anchor_counts, dtype=np.int64)
            add("anchor_counts", anchors)
            c = len(info.video_keys)
            add("member_count", np.full(e, c, np.int64))
            add("member_offset", table.member_offset.reshape(-1))
            add("member_size", table.member_size.reshape(-1))
            add("member_frames", table.member_frames.reshape(-1))
            add("member_codec", table.member_codec.reshape(-1))
            add("member_sha256", table.member_sha256.reshape(-1, 32))
            preroll = table.member_preroll if table.member_preroll is not None else np.zeros_like(table.member_frames)
            add("member_preroll", preroll.reshape(-1))
            if index.anchor_frames is not None:
                lo, hi, count = _anchor_runs(index.anchor_frames, index.anchor_start, table.length)
            else:
                lo = hi = np.zeros(0, np.int64)
                count = np.zeros(e, np.int64)
            add("run_lo", lo)
            add("run_hi", hi)
            add("run_count", count)
            ordered = sorted(tasks.items())
            add("task_dataset", np.full(len(ordered), d, np.int32))
            add("task_index", np.array([k for k, _ in ordered], np.int64))
            parts.setdefault("task_text", []).append([text for _, text in ordered])
            shard_rows += len(shards)

        def cat(name: str, dtype=np.int64, width: int = 0) -> np.ndarray:
            pieces = parts.get(name, [])
            if not pieces:
                return np.zeros((0, width) if width else 0, dtype)
            return np.concatenate(pieces).astype(dtype, copy=False)

        return cls(
            datasets=[info for info, _, _ in packs],
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
            task_text=[text for chunk in parts.get("task_text", []) for text in chunk],
            member_preroll=_nonzero_or_none(cat("member_preroll")),
        )

    def to_tables(self) -> dict[str, pa.Table]:
        """The compiled index tables (``episodes``, ``shards``, ``anchors``, ``tasks``)."""
        counts = np.diff(self.member_start)
        offsets = pa.array(self.member_start.astype(np.int32))

        def listed(values: pa.Array) -> pa.Array:
            return pa.ListArray.from_arrays(offsets, values)

        episodes = pa.table(
            {
                "dataset": self.dataset,
                "episode_index": self.episode_index,
                "length": self.length,
                "dataset_from_index": self.from_index,
                "shard_row": self.shard_row,
                "row_start": self.row_start,
                "row_group": self.row_group,
                "row_group_offset": self.row_group_offset,
                "row_group_bytes": self.row_group_bytes,
                "row_group_sha256": _binary_column(self.row_group_sha256),
                "row_group_episodes": self.row_group_episodes,
                "row_group_rows": self.row_group_rows,
                "anchors": self.anchor_counts,
                "member_offset": listed(pa.array(self.member_offset)),
                "member_size": listed(pa.array(self.member_size)),
                "member_frames": listed(pa.array(self.member_frames)),
                "member_codec": listed(pa.array([VIDEO_CODECS[c] for c in self.member_codec.tolist()], pa.string())),
                "member_sha256": listed(_binary_column(self.member_sha256)),
                **({PREROLL_COLUMN[0]: listed(pa.array(self.member_preroll))} if self.member_preroll is not None else {}),
            },
            schema=episodes_schema(preroll=self.member_preroll is not None),
        )
        assert int(counts.sum()) == len(self.member_offset)
        run_counts = np.diff(self.run_start)
        anchors = pa.table(
            {
                "episode_row": np.repeat(np.arange(len(self.dataset), dtype=np.int64), run_counts),
                "lo": self.run_lo,
                "hi": self.run_hi,
            },
            schema=ANCHORS_SCHEMA,
        )
        shards = pa.table(
            {
                "dataset": self.shard_dataset,
                "shard": self.shard_number,
                "parquet_bytes": self.shard_parquet_bytes,
                "footer_offset": self.shard_footer_offset,
                "footer_bytes": self.shard_footer_bytes,
                "footer_sha256": _binary_column(self.shard_footer_sha256),
                "tar_bytes": self.shard_tar_bytes,
                "tar_sha256": _binary_column(self.shard_tar_sha256),
            },
            schema=SHARDS_SCHEMA,
        )
        tasks = pa.table(
            {"dataset": self.task_dataset, "task_index": self.task_index, "task": pa.array(self.task_text, pa.string())},
            schema=TASKS_SCHEMA,
        )
        return {"episodes": episodes, "shards": shards, "anchors": anchors, "tasks": tasks}

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
        """A catalog from compiled tables, every value checked (see ``_check``).

        Raises:
            FormatError: a schema other than the format's, or a value that breaks its rules
                or disagrees with the mixture file's counts (names the table and row).
        """
        preroll = PREROLL_COLUMN[0] in tables["episodes"].column_names
        for name, schema in (
            ("episodes", episodes_schema(preroll=preroll)),
            ("shards", SHARDS_SCHEMA),
            ("anchors", ANCHORS_SCHEMA),
            ("tasks", TASKS_SCHEMA),
        ):
            table = tables[name]
            if not table.schema.remove_metadata().equals(schema):
                raise FormatError(f"{where}: {name} table columns {table.schema.names} are not the format's {schema.names}")
            nulls = [c for c in table.column_names if table[c].null_count]
            if nulls:
                raise FormatError(f"{where}: {name} table has null values in {nulls}")
        e, s, a, t = tables["episodes"], tables["shards"], tables["anchors"], tables["tasks"]

        def col(table: pa.Table, name: str) -> np.ndarray:
            return table[name].combine_chunks().to_numpy(zero_copy_only=False)

        def shas(table: pa.Table, name: str) -> np.ndarray:
            values = table[name].combine_chunks()
            if isinstance(values, pa.ListArray):
                values = values.flatten()
            buffer = values.buffers()[1]
            raw = (
                np.frombuffer(buffer, dtype=np.uint8)[values.offset * 32 : (values.offset + len(values)) * 32]
                if buffer
                else np.zeros(0, np.uint8)
            )
            return raw.reshape(-1, 32).copy()

        def members(name: str) -> tuple[np.ndarray, np.ndarray]:
            values = e[name].combine_chunks()
            return values.offsets.to_numpy().astype(np.int64), values.flatten().to_numpy(zero_copy_only=False)

        member_start, offsets_ = members("member_offset")
        for name in ("member_size", "member_frames", "member_codec", "member_sha256") + ((PREROLL_COLUMN[0],) if preroll else ()):
            starts, _ = (
                members(name) if name != "member_sha256" else (e[name].combine_chunks().offsets.to_numpy().astype(np.int64), None)
            )
            if not np.array_equal(starts, member_start):
                raise FormatError(f"{where}: episodes table: {name} does not list one value per member")
        # Codec names to indices without a Python string per member (a million-member mixture).
        codec_names = e["member_codec"].combine_chunks().flatten()
        codec_index = pc.index_in(codec_names, value_set=pa.array(VIDEO_CODECS, pa.string()))
        if codec_index.null_count:
            unknown = sorted(set(pc.filter(codec_names, pc.is_null(codec_index)).unique().to_pylist()))
            raise FormatError(f"{where}: episodes table: member codecs {unknown[:5]} are not among {list(VIDEO_CODECS)}")
        anchors_row = col(a, "episode_row")
        run_counts = np.bincount(anchors_row, minlength=e.num_rows) if len(anchors_row) else np.zeros(e.num_rows, np.int64)
        if len(anchors_row) and (anchors_row.min() < 0 or anchors_row.max() >= e.num_rows or (np.diff(anchors_row) < 0).any()):
            raise FormatError(f"{where}: anchors table: episode_row must be ascending in [0, {e.num_rows})")
        catalog = cls(
            datasets=list(datasets),
            dataset=col(e, "dataset").astype(np.int32),
            episode_index=col(e, "episode_index"),
            length=col(e, "length"),
            from_index=col(e, "dataset_from_index"),
            shard_row=col(e, "shard_row"),
            row_start=col(e, "row_start"),
            row_group=col(e, "row_group").astype(np.int32),
            row_group_offset=col(e, "row_group_offset"),
            row_group_bytes=col(e, "row_group_bytes"),
            row_group_sha256=shas(e, "row_group_sha256"),
            row_group_episodes=col(e, "row_group_episodes").astype(np.int32),
            row_group_rows=col(e, "row_group_rows"),
            anchor_counts=col(e, "anchors"),
            member_start=member_start,
            member_offset=offsets_.astype(np.int64),
            member_size=members("member_size")[1].astype(np.int64),
            member_frames=members("member_frames")[1].astype(np.int64),
            member_codec=codec_index.to_numpy(zero_copy_only=False).astype(np.int8),
            member_sha256=shas(e, "member_sha256"),
            run_start=np.concatenate([[0], np.cumsum(run_counts)]).astype(np.int64),
            run_lo=col(a, "lo"),
            run_hi=col(a, "hi"),
            shard_dataset=col(s, "dataset").astype(np.int32),
            shard_number=col(s, "shard").astype(np.int32),
            shard_parquet_bytes=col(s, "parquet_bytes"),
            shard_footer_offset=col(s, "footer_offset"),
            shard_footer_bytes=col(s, "footer_bytes"),
            shard_footer_sha256=shas(s, "footer_sha256"),
            shard_tar_bytes=col(s, "tar_bytes"),
            shard_tar_sha256=shas(s, "tar_sha256"),
            task_dataset=col(t, "dataset").astype(np.int32),
            task_index=col(t, "task_index"),
            task_text=t["task"].to_pylist(),
            member_preroll=members(PREROLL_COLUMN[0])[1].astype(np.int64) if preroll else None,
        )
        catalog._check(episodes_per_dataset, anchors_per_dataset, where)
        return catalog

    def _check(self, episodes_per_dataset: Sequence[int], anchors_per_dataset: Sequence[int], where: str) -> None:
        """Every rule a reader relies on, vectorized; the first broken one raises ``FormatError``."""
        n, d_count, s_count = len(self.dataset), len(self.datasets), len(self.shard_number)

        def fail(table: str, rows: np.ndarray, rule: str) -> None:
            if rows.any():
                raise FormatError(f"{where}: {table} table row {int(np.argmax(rows))}: {rule}")

        fail("episodes", (self.dataset < 0) | (self.dataset >= d_count), f"dataset must be in [0, {d_count})")
        if n and (np.diff(self.dataset) < 0).any():
            raise FormatError(f"{where}: episodes table: rows must be in dataset order")
        per_dataset = np.bincount(self.dataset, minlength=d_count)
        if per_dataset.tolist() != [int(x) for x in episodes_per_dataset]:
            bad = int(np.argmax(per_dataset != np.asarray(episodes_per_dataset)))
            raise FormatError(
                f"{where}: dataset {self.datasets[bad].name!r} has {int(per_dataset[bad])} episodes in the index, "
                f"the mixture file records {episodes_per_dataset[bad]}"
            )
        same_dataset = np.r_[False, self.dataset[1:] == self.dataset[:-1]] if n else np.zeros(0, bool)
        ascending = np.r_[True, self.episode_index[1:] > self.episode_index[:-1]] if n else np.zeros(0, bool)
        fail(
            "episodes",
            (self.episode_index < 0) | (same_dataset & ~ascending),
            "episode_index must be ascending and >= 0 within a dataset",
        )
        fail("episodes", (self.length < 0) | (self.from_index < 0), "length and dataset_from_index must be >= 0")
        fail("episodes", (self.shard_row < 0) | (self.shard_row >= s_count), f"shard_row must be in [0, {s_count})")
        shard_row = np.clip(self.shard_row, 0, max(s_count - 1, 0))
        if s_count:
            fail("episodes", self.shard_dataset[shard_row] != self.dataset, "its shard belongs to another dataset")
            footer_offset = self.shard_footer_offset[shard_row]
            tar_bytes = self.shard_tar_bytes[shard_row]
        else:
            footer_offset = tar_bytes = np.zeros(n, np.int64)
        fail(
            "episodes",
            (self.row_group < 0)
            | (self.row_group_offset < 4)
            | (self.row_group_bytes < 0)
            | (self.row_group_offset + self.row_group_bytes > footer_offset),
            "its row group lies outside the shard's row-group area",
        )
        fail(
            "episodes",
            (self.row_group_episodes < 1) | (self.row_group_rows < self.length) | (self.row_start < 0),
            "row_group_episodes must be >= 1, row_group_rows >= length, row_start >= 0",
        )
        fail("episodes", (self.anchor_counts < 0) | (self.anchor_counts > self.length), "anchors must be in [0, length]")
        anchors = np.bincount(self.dataset, weights=self.anchor_counts, minlength=d_count).astype(np.int64)
        if anchors.tolist() != [int(x) for x in anchors_per_dataset]:
            bad = int(np.argmax(anchors != np.asarray(anchors_per_dataset)))
            raise FormatError(
                f"{where}: dataset {self.datasets[bad].name!r} has {int(anchors[bad])} anchors in the index, "
                f"the mixture file records {anchors_per_dataset[bad]}"
            )
        cameras = np.array([len(self.datasets[d].video_keys) for d in range(d_count)], dtype=np.int64)
        if any(c > MAX_CAMERAS for c in cameras.tolist()):
            raise FormatError(f"{where}: more than {MAX_CAMERAS} cameras in a dataset")
        member_counts = np.diff(self.member_start)
        fail(
            "episodes",
            member_counts != cameras[self.dataset] if n else np.zeros(0, bool),
            "one member per camera of its dataset expected",
        )
        owner = np.repeat(np.arange(n), member_counts)
        fail(
            "episodes",
            (
                (self.member_offset < _TAR_BLOCK)
                | (self.member_size < 0)
                | (self.member_offset + self.member_size > tar_bytes[owner])
            )[np.argsort(owner, kind="stable")]
            if len(owner)
            else np.zeros(0, bool),
            "a member lies outside its shard's tar",
        )
        if self.member_preroll is not None:
            fail(
                "episodes",
                ((self.member_preroll < 0) | (self.member_preroll > MAX_EPISODE_FRAMES))[np.argsort(owner, kind="stable")]
                if len(owner)
                else np.zeros(0, bool),
                "a member's pre-roll is not a frame count",
            )
        low = np.minimum(1, self.length[owner]) if len(owner) else np.zeros(0, np.int64)
        bad_frames = (self.member_frames < low) | (self.member_frames > self.length[owner]) if len(owner) else np.zeros(0, bool)
        if bad_frames.any():
            raise FormatError(
                f"{where}: episodes table row {int(owner[np.argmax(bad_frames)])}: member frames must be in [1, length]"
            )
        if len(owner):
            order = np.lexsort((self.member_offset, self.shard_row[owner]))
            same_shard = self.shard_row[owner][order][1:] == self.shard_row[owner][order][:-1]
            overlap = same_shard & (self.member_offset[order][1:] < (self.member_offset + self.member_size)[order][:-1])
            if overlap.any():
                raise FormatError(
                    f"{where}: episodes table: members of rows {int(owner[order][np.argmax(overlap)])} and "
                    f"{int(owner[order][np.argmax(overlap) + 1])} overlap in one tar"
                )
        fail(
            "shards", (self.shard_dataset < 0) | (self.shard_dataset >= d_count) | (self.shard_number < 0), "bad dataset or shard"
        )
        fail(
            "shards",
            (self.shard_footer_offset < 4)
            | (self.shard_footer_bytes < 8)
            | (self.shard_footer_offset + self.shard_footer_bytes != self.shard_parquet_bytes)
            | (self.shard_tar_bytes < 2 * _TAR_BLOCK),
            "the footer must end the parquet file, and the tar hold at least its end blocks",
        )
        runs = np.diff(self.run_start)
        run_owner = np.repeat(np.arange(n), runs)
        if len(run_owner):
            if ((self.run_lo < 0) | (self.run_hi <= self.run_lo) | (self.run_hi > self.length[run_owner])).any():
                raise FormatError(f"{where}: anchors table: runs must satisfy 0 <= lo < hi <= length")
            same = run_owner[1:] == run_owner[:-1]
            if (same & (self.run_lo[1:] <= self.run_hi[:-1])).any():
                raise FormatError(f"{where}: anchors table: runs of an episode must be ascending and apart")
        covered = (
            np.bincount(run_owner, weights=self.run_hi - self.run_lo, minlength=n).astype(np.int64)
            if n
            else np.zeros(0, np.int64)
        )
        partial = (self.anchor_counts > 0) & (self.anchor_counts < self.length)
        fail(
            "episodes",
            (partial & (covered != self.anchor_counts)) | (~partial & (runs > 0)),
            "its anchor runs do not add up to its anchors",
        )
        fail("tasks", (self.task_dataset < 0) | (self.task_dataset >= d_count), f"dataset must be in [0, {d_count})")

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
