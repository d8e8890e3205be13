"""The compiled index of a mixture as columns, and back (beside ``mixture_index``, which names
its files and schemas).

``CatalogColumns`` holds every episode, member, anchor run, shard and task of the datasets a
mixture lists as numpy columns (what a reader's ``EpisodeCatalog`` is built on).
``catalog_tables`` writes them as the four tables ``mixture create`` writes;
``read_catalog_tables`` reads them back from tables as untrusted as any dataset file (schema,
nulls, member lists, codecs), and ``check_catalog_columns`` checks every value against the
format's rules and the mixture file's counts before anything is read with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as _compute

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.layout import VIDEO_CODECS
from lerobot_shards.core.format.limits import MAX_CAMERAS, MAX_EPISODE_FRAMES
from lerobot_shards.core.format.mixture_index import (
    ANCHORS_SCHEMA,
    PREROLL_COLUMN,
    SHARDS_SCHEMA,
    TASKS_SCHEMA,
    episodes_schema,
)

# pyarrow.compute makes its functions at import; a static checker cannot see them.
pc: Any = _compute

_TAR_BLOCK = 512


@dataclass(eq=False)
class CatalogColumns:
    """Episodes of one or more packs, columnar; arrays are made read-only."""

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

    def __post_init__(self) -> None:
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)


def _binary_column(values: np.ndarray) -> pa.Array:
    return pa.array([bytes(row) for row in values], pa.binary(32))


def catalog_tables(columns: CatalogColumns) -> dict[str, pa.Table]:
    """The compiled index tables (``episodes``, ``shards``, ``anchors``, ``tasks``) of ``columns``:
    what ``mixture create`` writes."""
    counts = np.diff(columns.member_start)
    offsets = pa.array(columns.member_start.astype(np.int32))

    def listed(values: pa.Array) -> pa.Array:
        return pa.ListArray.from_arrays(offsets, values)

    episodes = pa.table(
        {
            "dataset": columns.dataset,
            "episode_index": columns.episode_index,
            "length": columns.length,
            "dataset_from_index": columns.from_index,
            "shard_row": columns.shard_row,
            "row_start": columns.row_start,
            "row_group": columns.row_group,
            "row_group_offset": columns.row_group_offset,
            "row_group_bytes": columns.row_group_bytes,
            "row_group_sha256": _binary_column(columns.row_group_sha256),
            "row_group_episodes": columns.row_group_episodes,
            "row_group_rows": columns.row_group_rows,
            "anchors": columns.anchor_counts,
            "member_offset": listed(pa.array(columns.member_offset)),
            "member_size": listed(pa.array(columns.member_size)),
            "member_frames": listed(pa.array(columns.member_frames)),
            "member_codec": listed(pa.array([VIDEO_CODECS[c] for c in columns.member_codec.tolist()], pa.string())),
            "member_sha256": listed(_binary_column(columns.member_sha256)),
            **({PREROLL_COLUMN[0]: listed(pa.array(columns.member_preroll))} if columns.member_preroll is not None else {}),
        },
        schema=episodes_schema(preroll=columns.member_preroll is not None),
    )
    assert int(counts.sum()) == len(columns.member_offset)
    run_counts = np.diff(columns.run_start)
    anchors = pa.table(
        {
            "episode_row": np.repeat(np.arange(len(columns.dataset), dtype=np.int64), run_counts),
            "lo": columns.run_lo,
            "hi": columns.run_hi,
        },
        schema=ANCHORS_SCHEMA,
    )
    shards = pa.table(
        {
            "dataset": columns.shard_dataset,
            "shard": columns.shard_number,
            "parquet_bytes": columns.shard_parquet_bytes,
            "footer_offset": columns.shard_footer_offset,
            "footer_bytes": columns.shard_footer_bytes,
            "footer_sha256": _binary_column(columns.shard_footer_sha256),
            "tar_bytes": columns.shard_tar_bytes,
            "tar_sha256": _binary_column(columns.shard_tar_sha256),
        },
        schema=SHARDS_SCHEMA,
    )
    tasks = pa.table(
        {"dataset": columns.task_dataset, "task_index": columns.task_index, "task": pa.array(columns.task_text, pa.string())},
        schema=TASKS_SCHEMA,
    )
    return {"episodes": episodes, "shards": shards, "anchors": anchors, "tasks": tasks}


def read_catalog_tables(tables: Mapping[str, pa.Table], *, where: str) -> CatalogColumns:
    """The columns of a compiled index's tables (``episodes``, ``shards``, ``anchors``, ``tasks``):
    the format's schema without nulls, one value per member in every member list, codecs the
    format knows, anchor runs in episode order. Values are checked by ``check_catalog_columns``.

    Raises:
        FormatError: a schema other than the format's, nulls, misaligned member lists, an
            unknown codec, or anchor runs out of order (names the table).
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
    return CatalogColumns(
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


def check_catalog_columns(
    columns: CatalogColumns,
    *,
    names: Sequence[str],
    cameras: Sequence[int],
    episodes_per_dataset: Sequence[int],
    anchors_per_dataset: Sequence[int],
    where: str,
) -> None:
    """Every rule a reader relies on, vectorized, against the mixture file's datasets (their
    ``names``, ``cameras`` each, and the episodes and anchors it records for each).

    Raises:
        FormatError: the first broken rule (names the table and row).
    """
    self = columns
    n, d_count, s_count = len(self.dataset), len(names), len(self.shard_number)

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
            f"{where}: dataset {names[bad]!r} has {int(per_dataset[bad])} episodes in the index, "
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
            f"{where}: dataset {names[bad]!r} has {int(anchors[bad])} anchors in the index, "
            f"the mixture file records {anchors_per_dataset[bad]}"
        )
    camera_counts = np.asarray(cameras, dtype=np.int64)
    if any(c > MAX_CAMERAS for c in camera_counts.tolist()):
        raise FormatError(f"{where}: more than {MAX_CAMERAS} cameras in a dataset")
    member_counts = np.diff(self.member_start)
    fail(
        "episodes",
        member_counts != camera_counts[self.dataset] if n else np.zeros(0, bool),
        "one member per camera of its dataset expected",
    )
    owner = np.repeat(np.arange(n), member_counts)
    fail(
        "episodes",
        ((self.member_offset < _TAR_BLOCK) | (self.member_size < 0) | (self.member_offset + self.member_size > tar_bytes[owner]))[
            np.argsort(owner, kind="stable")
        ]
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
    fail("shards", (self.shard_dataset < 0) | (self.shard_dataset >= d_count) | (self.shard_number < 0), "bad dataset or shard")
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
        np.bincount(run_owner, weights=self.run_hi - self.run_lo, minlength=n).astype(np.int64) if n else np.zeros(0, np.int64)
    )
    partial = (self.anchor_counts > 0) & (self.anchor_counts < self.length)
    fail(
        "episodes",
        (partial & (covered != self.anchor_counts)) | (~partial & (runs > 0)),
        "its anchor runs do not add up to its anchors",
    )
    fail("tasks", (self.task_dataset < 0) | (self.task_dataset >= d_count), f"dataset must be in [0, {d_count})")


__all__ = ["CatalogColumns", "catalog_tables", "check_catalog_columns", "read_catalog_tables"]
