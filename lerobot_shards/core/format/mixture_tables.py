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
    _check_schemas(tables, preroll=preroll, where=where)
    e, s, a, t = tables["episodes"], tables["shards"], tables["anchors"], tables["tasks"]
    member_start = _member_starts(e, preroll=preroll, where=where)
    return CatalogColumns(
        dataset=_column(e, "dataset").astype(np.int32),
        episode_index=_column(e, "episode_index"),
        length=_column(e, "length"),
        from_index=_column(e, "dataset_from_index"),
        shard_row=_column(e, "shard_row"),
        row_start=_column(e, "row_start"),
        row_group=_column(e, "row_group").astype(np.int32),
        row_group_offset=_column(e, "row_group_offset"),
        row_group_bytes=_column(e, "row_group_bytes"),
        row_group_sha256=_digests(e, "row_group_sha256"),
        row_group_episodes=_column(e, "row_group_episodes").astype(np.int32),
        row_group_rows=_column(e, "row_group_rows"),
        anchor_counts=_column(e, "anchors"),
        member_start=member_start,
        member_offset=_member_values(e, "member_offset").astype(np.int64),
        member_size=_member_values(e, "member_size").astype(np.int64),
        member_frames=_member_values(e, "member_frames").astype(np.int64),
        member_codec=_codec_indices(e, where),
        member_sha256=_digests(e, "member_sha256"),
        run_start=_run_starts(a, e.num_rows, where),
        run_lo=_column(a, "lo"),
        run_hi=_column(a, "hi"),
        shard_dataset=_column(s, "dataset").astype(np.int32),
        shard_number=_column(s, "shard").astype(np.int32),
        shard_parquet_bytes=_column(s, "parquet_bytes"),
        shard_footer_offset=_column(s, "footer_offset"),
        shard_footer_bytes=_column(s, "footer_bytes"),
        shard_footer_sha256=_digests(s, "footer_sha256"),
        shard_tar_bytes=_column(s, "tar_bytes"),
        shard_tar_sha256=_digests(s, "tar_sha256"),
        task_dataset=_column(t, "dataset").astype(np.int32),
        task_index=_column(t, "task_index"),
        task_text=t["task"].to_pylist(),
        member_preroll=_member_values(e, PREROLL_COLUMN[0]).astype(np.int64) if preroll else None,
    )


def _check_schemas(tables: Mapping[str, pa.Table], *, preroll: bool, where: str) -> None:
    """Each table has exactly the format's schema, and no nulls."""
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


def _column(table: pa.Table, name: str) -> np.ndarray:
    return table[name].combine_chunks().to_numpy(zero_copy_only=False)


def _digests(table: pa.Table, name: str) -> np.ndarray:
    """A column of 32-byte digests (or a list of them per row, flattened) as an (n, 32) array."""
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


def _member_values(episodes: pa.Table, name: str) -> np.ndarray:
    """A member list column's values, flattened (one per member)."""
    return episodes[name].combine_chunks().flatten().to_numpy(zero_copy_only=False)


def _member_starts(episodes: pa.Table, *, preroll: bool, where: str) -> np.ndarray:
    """Where each episode's members start (from ``member_offset``'s list offsets); every other
    member list must list one value per member too."""

    def starts(name: str) -> np.ndarray:
        return episodes[name].combine_chunks().offsets.to_numpy().astype(np.int64)

    member_start = starts("member_offset")
    for name in ("member_size", "member_frames", "member_codec", "member_sha256") + ((PREROLL_COLUMN[0],) if preroll else ()):
        if not np.array_equal(starts(name), member_start):
            raise FormatError(f"{where}: episodes table: {name} does not list one value per member")
    return member_start


def _codec_indices(episodes: pa.Table, where: str) -> np.ndarray:
    """Member codec names as indices of ``VIDEO_CODECS`` (int8), without a Python string per
    member (a million-member mixture)."""
    codec_names = episodes["member_codec"].combine_chunks().flatten()
    codec_index = pc.index_in(codec_names, value_set=pa.array(VIDEO_CODECS, pa.string()))
    if codec_index.null_count:
        unknown = sorted(set(pc.filter(codec_names, pc.is_null(codec_index)).unique().to_pylist()))
        raise FormatError(f"{where}: episodes table: member codecs {unknown[:5]} are not among {list(VIDEO_CODECS)}")
    return codec_index.to_numpy(zero_copy_only=False).astype(np.int8)


def _run_starts(anchors: pa.Table, episodes: int, where: str) -> np.ndarray:
    """Each episode's first anchor run (the anchors table's ``episode_row``, ascending)."""
    anchors_row = _column(anchors, "episode_row")
    run_counts = np.bincount(anchors_row, minlength=episodes) if len(anchors_row) else np.zeros(episodes, np.int64)
    if len(anchors_row) and (anchors_row.min() < 0 or anchors_row.max() >= episodes or (np.diff(anchors_row) < 0).any()):
        raise FormatError(f"{where}: anchors table: episode_row must be ascending in [0, {episodes})")
    return np.concatenate([[0], np.cumsum(run_counts)]).astype(np.int64)


def _refuse(where: str, table: str, rows: np.ndarray, rule: str) -> None:
    """Raise ``FormatError`` naming the first row where ``rows`` is True (a broken ``rule``)."""
    if rows.any():
        raise FormatError(f"{where}: {table} table row {int(np.argmax(rows))}: {rule}")


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
    _check_episode_rows(columns, names, episodes_per_dataset, where)
    footer_offset, tar_bytes = _check_shard_rows_of_episodes(columns, len(names), where)
    _check_row_groups(columns, footer_offset, where)
    _check_anchor_counts(columns, names, anchors_per_dataset, where)
    _check_members(columns, cameras, tar_bytes, where)
    _check_shards(columns, len(names), where)
    _check_anchor_runs(columns, where)
    d_count = len(names)
    _refuse(where, "tasks", (columns.task_dataset < 0) | (columns.task_dataset >= d_count), f"dataset must be in [0, {d_count})")


def _per_dataset(found: np.ndarray, recorded: Sequence[int], names: Sequence[str], what: str, where: str) -> None:
    """The index holds as many ``what`` per dataset as the mixture file records."""
    if found.tolist() != [int(x) for x in recorded]:
        bad = int(np.argmax(found != np.asarray(recorded)))
        raise FormatError(
            f"{where}: dataset {names[bad]!r} has {int(found[bad])} {what} in the index, the mixture file records {recorded[bad]}"
        )


def _check_episode_rows(c: CatalogColumns, names: Sequence[str], episodes_per_dataset: Sequence[int], where: str) -> None:
    """Episodes in dataset order, as many per dataset as the mixture file records,
    ``episode_index`` ascending within a dataset, lengths and first indices non-negative."""
    n, d_count = len(c.dataset), len(names)
    _refuse(where, "episodes", (c.dataset < 0) | (c.dataset >= d_count), f"dataset must be in [0, {d_count})")
    if n and (np.diff(c.dataset) < 0).any():
        raise FormatError(f"{where}: episodes table: rows must be in dataset order")
    _per_dataset(np.bincount(c.dataset, minlength=d_count), episodes_per_dataset, names, "episodes", where)
    same_dataset = np.r_[False, c.dataset[1:] == c.dataset[:-1]] if n else np.zeros(0, bool)
    ascending = np.r_[True, c.episode_index[1:] > c.episode_index[:-1]] if n else np.zeros(0, bool)
    rule = "episode_index must be ascending and >= 0 within a dataset"
    _refuse(where, "episodes", (c.episode_index < 0) | (same_dataset & ~ascending), rule)
    _refuse(where, "episodes", (c.length < 0) | (c.from_index < 0), "length and dataset_from_index must be >= 0")


def _check_anchor_counts(c: CatalogColumns, names: Sequence[str], anchors_per_dataset: Sequence[int], where: str) -> None:
    """Anchors in ``[0, length]`` per episode, as many per dataset as the mixture file records."""
    _refuse(where, "episodes", (c.anchor_counts < 0) | (c.anchor_counts > c.length), "anchors must be in [0, length]")
    found = np.bincount(c.dataset, weights=c.anchor_counts, minlength=len(names)).astype(np.int64)
    _per_dataset(found, anchors_per_dataset, names, "anchors", where)


def _check_shard_rows_of_episodes(c: CatalogColumns, d_count: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Each episode's shard is one of its dataset's; returns each episode's shard footer offset
    and tar size (what its row group and members must lie within)."""
    n, s_count = len(c.dataset), len(c.shard_number)
    _refuse(where, "episodes", (c.shard_row < 0) | (c.shard_row >= s_count), f"shard_row must be in [0, {s_count})")
    if not s_count:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    shard_row = np.clip(c.shard_row, 0, s_count - 1)
    _refuse(where, "episodes", c.shard_dataset[shard_row] != c.dataset, "its shard belongs to another dataset")
    return c.shard_footer_offset[shard_row], c.shard_tar_bytes[shard_row]


def _check_row_groups(c: CatalogColumns, footer_offset: np.ndarray, where: str) -> None:
    """Each row group inside its shard's row-group area, its totals consistent with the episode."""
    _refuse(
        where,
        "episodes",
        (c.row_group < 0)
        | (c.row_group_offset < 4)
        | (c.row_group_bytes < 0)
        | (c.row_group_offset + c.row_group_bytes > footer_offset),
        "its row group lies outside the shard's row-group area",
    )
    _refuse(
        where,
        "episodes",
        (c.row_group_episodes < 1) | (c.row_group_rows < c.length) | (c.row_start < 0),
        "row_group_episodes must be >= 1, row_group_rows >= length, row_start >= 0",
    )


def _check_members(c: CatalogColumns, cameras: Sequence[int], tar_bytes: np.ndarray, where: str) -> None:
    """One member per camera of the episode's dataset, each inside its shard's tar, with a
    pre-roll and frame count in range, no two overlapping in one tar."""
    n = len(c.dataset)
    camera_counts = np.asarray(cameras, dtype=np.int64)
    if any(count > MAX_CAMERAS for count in camera_counts.tolist()):
        raise FormatError(f"{where}: more than {MAX_CAMERAS} cameras in a dataset")
    member_counts = np.diff(c.member_start)
    _refuse(
        where,
        "episodes",
        member_counts != camera_counts[c.dataset] if n else np.zeros(0, bool),
        "one member per camera of its dataset expected",
    )
    owner = np.repeat(np.arange(n), member_counts)
    if not len(owner):
        return
    by_episode = np.argsort(owner, kind="stable")
    outside = (c.member_offset < _TAR_BLOCK) | (c.member_size < 0) | (c.member_offset + c.member_size > tar_bytes[owner])
    _refuse(where, "episodes", outside[by_episode], "a member lies outside its shard's tar")
    if c.member_preroll is not None:
        bad_preroll = (c.member_preroll < 0) | (c.member_preroll > MAX_EPISODE_FRAMES)
        _refuse(where, "episodes", bad_preroll[by_episode], "a member's pre-roll is not a frame count")
    bad_frames = (c.member_frames < np.minimum(1, c.length[owner])) | (c.member_frames > c.length[owner])
    if bad_frames.any():
        raise FormatError(
            f"{where}: episodes table row {int(owner[np.argmax(bad_frames)])}: member frames must be in [1, length]"
        )
    order = np.lexsort((c.member_offset, c.shard_row[owner]))
    same_shard = c.shard_row[owner][order][1:] == c.shard_row[owner][order][:-1]
    overlap = same_shard & (c.member_offset[order][1:] < (c.member_offset + c.member_size)[order][:-1])
    if overlap.any():
        raise FormatError(
            f"{where}: episodes table: members of rows {int(owner[order][np.argmax(overlap)])} and "
            f"{int(owner[order][np.argmax(overlap) + 1])} overlap in one tar"
        )


def _check_shards(c: CatalogColumns, d_count: int, where: str) -> None:
    """Each shard of a known dataset, its footer ending its parquet, its tar at least its end blocks."""
    _refuse(where, "shards", (c.shard_dataset < 0) | (c.shard_dataset >= d_count) | (c.shard_number < 0), "bad dataset or shard")
    _refuse(
        where,
        "shards",
        (c.shard_footer_offset < 4)
        | (c.shard_footer_bytes < 8)
        | (c.shard_footer_offset + c.shard_footer_bytes != c.shard_parquet_bytes)
        | (c.shard_tar_bytes < 2 * _TAR_BLOCK),
        "the footer must end the parquet file, and the tar hold at least its end blocks",
    )


def _check_anchor_runs(c: CatalogColumns, where: str) -> None:
    """Anchor runs inside their episode, ascending and apart, adding up to its anchors (an
    episode with every frame or none an anchor has none)."""
    n = len(c.dataset)
    runs = np.diff(c.run_start)
    run_owner = np.repeat(np.arange(n), runs)
    if len(run_owner):
        if ((c.run_lo < 0) | (c.run_hi <= c.run_lo) | (c.run_hi > c.length[run_owner])).any():
            raise FormatError(f"{where}: anchors table: runs must satisfy 0 <= lo < hi <= length")
        if ((run_owner[1:] == run_owner[:-1]) & (c.run_lo[1:] <= c.run_hi[:-1])).any():
            raise FormatError(f"{where}: anchors table: runs of an episode must be ascending and apart")
    covered = np.bincount(run_owner, weights=c.run_hi - c.run_lo, minlength=n).astype(np.int64) if n else np.zeros(0, np.int64)
    partial = (c.anchor_counts > 0) & (c.anchor_counts < c.length)
    rule = "its anchor runs do not add up to its anchors"
    _refuse(where, "episodes", (partial & (covered != c.anchor_counts)) | (~partial & (runs > 0)), rule)


__all__ = ["CatalogColumns", "catalog_tables", "check_catalog_columns", "read_catalog_tables"]
