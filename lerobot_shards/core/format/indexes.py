"""``index/episodes.parquet`` and ``index/samples.parquet``: their schemas, defined once, and
the validating parser of the episodes index.

The packer writes the tables with ``episodes_index_schema``/``samples_index_schema``; the
reader, ``verify`` and ``sql`` read them through ``parse_episodes_index``, which checks the
schema, the row count (before reading rows) and every value against the manifest: shards,
lengths, row ranges, row-group spans inside the shard parquet, member ranges inside the tar,
frame counts and digests. What it returns can be used without further checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as _compute

from lerobot_shards.core.address_space import at_limit
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.layout import (
    EPISODES_INDEX_PATH,
    PREROLL_FIELD,
    PREROLL_FORMAT_VERSION,
    VIDEO_CODECS,
    VIDEO_MEMBER_FIELDS,
    pad_column,
    video_column,
)
from lerobot_shards.core.format.limits import (
    INDEX_DICTIONARY_CHUNK_BYTES,
    INDEX_MIN_GROUP_ROWS,
    INDEX_TASKS_PER_EPISODE,
    MAX_DATASET_EPISODES,
    MAX_DATASET_MEMBERS,
    MAX_EPISODE_FRAMES,
    MAX_EPISODE_TASKS,
    MAX_TASK_BYTES,
    MIN_DIGEST_BYTES,
    TEXT_EXPANSION,
)
from lerobot_shards.core.format.manifest import Manifest
from lerobot_shards.core.format.parquet.bounded import BoundedColumns, Budget, read_bounded_columns
from lerobot_shards.core.format.parquet.pages import row_bytes, value_bytes

# pyarrow.compute makes its functions at import; a static checker cannot see them.
pc: Any = _compute

# Tar headers precede every member: a member's data never starts before byte 512.
_TAR_BLOCK = 512

EPISODE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("episode_index", pa.int64()),
    ("shard", pa.int32()),
    ("length", pa.int64()),
    ("dataset_from_index", pa.int64()),
    ("dataset_to_index", pa.int64()),
    ("tasks", pa.list_(pa.string())),
    ("row_start", pa.int64()),
    ("row_group", pa.int32()),
    ("row_group_offset", pa.int64()),
    ("row_group_bytes", pa.int64()),
    ("row_group_sha256", pa.string()),
)
MEMBER_COLUMN_TYPES: dict[str, pa.DataType] = {
    "offset": pa.int64(),
    "size": pa.int64(),
    "frames": pa.int64(),
    "codec": pa.string(),
    "sha256": pa.string(),
    "reencoded": pa.bool_(),
}
assert tuple(MEMBER_COLUMN_TYPES) == VIDEO_MEMBER_FIELDS

SAMPLE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("index", pa.int64()),
    ("episode_index", pa.int64()),
    ("frame_index", pa.int64()),
    ("shard", pa.int32()),
    ("row", pa.int64()),
    ("timestamp", pa.float32()),
    ("task_index", pa.int64()),
)


def episodes_index_schema(video_keys: list[str], *, preroll: bool = False) -> pa.Schema:
    """The exact Arrow schema of ``index/episodes.parquet`` for these cameras; ``preroll``
    (format 4) adds each camera's ``video/<key>/preroll`` after its other member columns."""
    fields = [pa.field(name, arrow_type) for name, arrow_type in EPISODE_COLUMNS]
    for key in video_keys:
        fields += [pa.field(video_column(key, name), arrow_type) for name, arrow_type in MEMBER_COLUMN_TYPES.items()]
        if preroll:
            fields.append(pa.field(video_column(key, PREROLL_FIELD), pa.int64()))
    return pa.schema(fields)


def samples_index_schema(windows: dict[str, dict[str, object]]) -> pa.Schema:
    """The exact Arrow schema of ``index/samples.parquet`` for these windows (pad counts)."""
    fields = [pa.field(name, arrow_type) for name, arrow_type in SAMPLE_COLUMNS]
    for window, keys in windows.items():
        for key in keys:
            fields += [pa.field(pad_column(window, key, side), pa.int32()) for side in ("before", "after")]
    return pa.schema(fields)


@dataclass(frozen=True)
class CameraMember:
    """One camera's mp4 member of an episode: its byte range in the shard tar and digest.

    ``frames`` are the frames rows read; ``preroll`` (format 4) the frames before them (the
    member starts on the keyframe before its episode's first frame): the member holds
    ``samples`` = ``preroll + frames`` frames and row ``j`` reads frame ``position(j)``."""

    offset: int
    size: int
    frames: int
    sha256: str
    codec: str
    preroll: int = 0

    @property
    def samples(self) -> int:
        """Frames the member's mp4 holds (what a decoder of it sees)."""
        return self.preroll + self.frames

    def position(self, row: int) -> int:
        """The member frame of an episode row: past the pre-roll, and rows past a short video
        (``--on-frame-mismatch pad``) reuse its last frame."""
        return self.preroll + min(row, self.frames - 1)


@dataclass(frozen=True)
class RowGroupRef:
    """The shard parquet row group holding an episode's rows: its index, the byte span of its
    column chunks (``[offset, offset + bytes)``) and their SHA-256."""

    index: int
    offset: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class EpisodeEntry:
    """One packed episode: where its rows and members are (validated)."""

    episode_index: int
    shard: int
    length: int
    dataset_from_index: int
    row_start: int
    row_group: RowGroupRef
    tasks: tuple[str, ...]
    cameras: dict[str, CameraMember]

    @property
    def byte_range(self) -> tuple[int, int]:
        """``(offset, size)`` covering every member (they are adjacent in the tar)."""
        if not self.cameras:
            return 0, 0
        start = min(m.offset for m in self.cameras.values())
        stop = max(m.offset + m.size for m in self.cameras.values())
        return start, stop - start


def parse_episodes_index(
    data: bytes, manifest: Manifest, *, where: str = EPISODES_INDEX_PATH, with_tasks: bool = False
) -> EpisodeTable:
    """Read and validate ``index/episodes.parquet`` (its bytes, already checked against the
    manifest's digest) into an ``EpisodeTable`` (columns; ascending ``episode_index``).
    O(episodes x cameras), vectorized: no Python step per episode.

    What the file decodes to is bounded before it is decoded (``parquet.read_bounded``): the
    manifest's row count (at most ``MAX_DATASET_EPISODES``), at most ``MAX_EPISODE_TASKS``
    tasks per episode of at most ``MAX_TASK_BYTES`` each, and in all what an honest index of
    that many episodes can be plus ``MAX_EXPANSION`` times the file's bytes
    (``episodes_index_budget``). ``with_tasks=False`` (the reader, which takes a sample's task from
    its row) leaves ``tasks`` empty and never decodes them.

    Raises:
        FormatError: not a parquet file, another schema, a row count other than the
            manifest's, a bound exceeded, or a value inconsistent with the manifest (the
            message names the episode and column).
    """
    try:
        return _parse_episodes_index(data, manifest, where, with_tasks)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as err:
        # Damage that makes pyarrow fail in any of its ways (thrift, flatbuffers, strings
        # that are not UTF-8) is a format error naming the file; this process at its limit is not.
        if at_limit(err):
            raise
        raise FormatError(f"{where}: not a readable parquet file ({type(err).__name__}: {err})") from None


def _parse_episodes_index(data: bytes, manifest: Manifest, where: str, with_tasks: bool) -> EpisodeTable:
    preroll = manifest.format_version >= PREROLL_FORMAT_VERSION
    expected = episodes_index_schema(manifest.video_keys, preroll=preroll)
    columns = expected.names if with_tasks else [name for name in expected.names if name != "tasks"]
    episodes = manifest.totals["episodes"]
    if episodes > MAX_DATASET_EPISODES:
        raise FormatError(f"{where}: the manifest records {episodes} episodes, more than the {MAX_DATASET_EPISODES} allowed")
    budget = episodes_index_budget(manifest.video_keys, rows=episodes, encoded=len(data), preroll=preroll)
    reader = read_bounded_columns(
        data,
        where=where,
        rows=episodes,
        rows_expected=f"the manifest records {episodes} episodes",
        max_rows=MAX_DATASET_EPISODES,
        budget=budget,
    )
    found = {f.name: f.type for f in reader.schema}
    wrong = {
        k: (str(found[k]) if k in found else None, str(expected.field(k).type))
        for k in columns
        if found.get(k) != expected.field(k).type
    }
    extra = sorted(set(found) - set(expected.names))
    if wrong or extra:
        raise FormatError(
            f"{where}: columns differ from the format: expected/found {wrong}" + (f", unexpected {extra}" if extra else "")
        )
    return _table(_IndexColumns(reader, where), manifest, where, with_tasks=with_tasks)


class _IndexColumns:
    """The episodes index's columns, each read when asked for and held as arrays (not as the
    decoded table): the peak is the arrays and one column. Digest and codec columns are read as
    dictionaries where the writer made them so (a row group's digest repeats for each of its
    episodes): only the distinct values are decoded."""

    def __init__(self, reader: BoundedColumns, where: str):
        self.reader, self.where = reader, where

    def _read(self, name: str, *, plain: bool = False) -> pa.ChunkedArray:
        column = self.reader.column(name, plain=plain)
        if column.null_count:
            raise FormatError(f"{self.where}: null values in {[name]}")
        return column

    def numbers(self, name: str) -> np.ndarray:
        column = self._read(name)
        return column.to_numpy() if column.num_chunks == 1 else np.concatenate([c.to_numpy() for c in column.chunks])

    def strings(self, name: str) -> pa.ChunkedArray:
        return self._read(name, plain=True)

    def digests(self, name: str) -> tuple[np.ndarray, int]:
        """``_hex_matrix`` of a digest column (the first bad row, or -1)."""
        out, offset = [], 0
        for chunk in self._read(name).chunks:
            if pa.types.is_dictionary(chunk.type):
                distinct, bad = _hex_matrix(chunk.dictionary, where=self.where)
                indices = chunk.indices.to_numpy(zero_copy_only=False)
                if bad >= 0:
                    rows = np.flatnonzero(indices == bad)
                    if len(rows):
                        return np.zeros((0, 32), np.uint8), offset + int(rows[0])
                out.append(distinct[indices])
            else:
                for start in range(0, len(chunk), _HEX_ROWS):  # in slices: the hex temporaries stay small
                    matrix, bad = _hex_matrix(chunk.slice(start, _HEX_ROWS), where=self.where)
                    if bad >= 0:
                        return np.zeros((0, 32), np.uint8), offset + start + bad
                    out.append(matrix)
            offset += len(chunk)
        return (np.concatenate(out) if out else np.zeros((0, 32), np.uint8)), -1

    def codes(self, name: str, values: Sequence[str]) -> tuple[np.ndarray, int, str | None]:
        """Each row's position in ``values`` (int8), the first row holding another value (-1:
        none) and that value."""
        out, offset = [], 0
        known = pa.array(list(values), pa.string())
        for chunk in self._read(name).chunks:
            if pa.types.is_dictionary(chunk.type):
                found = pc.index_in(chunk.dictionary, value_set=known).to_numpy(zero_copy_only=False)
                per_row = found[chunk.indices.to_numpy(zero_copy_only=False)]
            else:
                per_row = pc.index_in(chunk, value_set=known).to_numpy(zero_copy_only=False)
            unknown = np.isnan(per_row) if per_row.dtype.kind == "f" else np.zeros(len(per_row), bool)
            if unknown.any():
                i = int(np.argmax(unknown))
                value = chunk[i].as_py()
                return np.zeros(0, np.int8), offset + i, value
            out.append(per_row.astype(np.int8))
            offset += len(chunk)
        return (np.concatenate(out) if out else np.zeros(0, np.int8)), -1, None


_HEX_ROWS = 1 << 16


# An honest episodes index: this much per episode, and this much per camera member.
# Strings at most a digest's 64 hex digits (codec names are shorter); task lists are left out.
_EPISODE_ROW_BYTES = row_bytes((f for f in episodes_index_schema([]) if f.name != "tasks"), string_bytes=64)
_MEMBER_ROW_BYTES = row_bytes(episodes_index_schema(["camera"]), string_bytes=64) - row_bytes(
    episodes_index_schema([]), string_bytes=64
)
_PREROLL_ROW_BYTES = row_bytes(episodes_index_schema(["camera"], preroll=True), string_bytes=64) - row_bytes(
    episodes_index_schema(["camera"]), string_bytes=64
)
# The honest index at the format's maxima (tasks aside): the most one may decode to.
MAX_EPISODES_INDEX_BYTES = MAX_DATASET_EPISODES * _EPISODE_ROW_BYTES + MAX_DATASET_MEMBERS * _MEMBER_ROW_BYTES


# Packs written before 2026-12-07 stored a digest repeated by identical members (a replicated
# dataset) as one dictionary entry; the writer has stored such a column plainly since, so a
# repair (which rewrites the index) makes such a pack readable.
REPEATED_MEMBERS_NOTE = (
    "; a pack written before 2026-12-07 whose episodes repeat a member's bytes reads so: "
    "`lerobot-shards pack SRC DST --repair` rewrites its index (`lerobot-shards verify DST` prints the command)"
)


def episodes_index_budget(video_keys: Sequence[str], *, rows: int, encoded: int, preroll: bool = False) -> Budget:
    """What reading an episodes index of ``rows`` episodes may decode to: what an honest index
    of that many episodes with these cameras can be (at most ``MAX_EPISODES_INDEX_BYTES``, the
    index at ``MAX_DATASET_EPISODES`` and ``MAX_DATASET_MEMBERS``) with a few task values per
    episode, plus one writer-sized dictionary page per column chunk (never more than the
    expansion budget of its ``encoded`` bytes), in row groups of the writer's size; every
    member's digest backed by ``MIN_DIGEST_BYTES`` of the file (digests do not compress, so a
    small file cannot claim many members). An index of a million episodes compresses far better
    than any fixed expansion factor honest data would fit (sorted integers, repeated row-group
    digests: 32x measured), so the rows are sized from the manifest's count, and what they may
    cost is what an honest index of that count is."""
    member = _MEMBER_ROW_BYTES + (_PREROLL_ROW_BYTES if preroll else 0)  # format 4: each member's pre-roll
    cap = MAX_EPISODES_INDEX_BYTES + (MAX_DATASET_MEMBERS * _PREROLL_ROW_BYTES if preroll else 0)
    honest = min(cap, rows * (_EPISODE_ROW_BYTES + len(video_keys) * member))
    tasks = rows * INDEX_TASKS_PER_EPISODE * value_bytes(0, 1, strings=True)
    return Budget(
        max_bytes=honest + tasks,
        values_per_row={"tasks": MAX_EPISODE_TASKS},
        backed={video_column(key, "sha256"): MIN_DIGEST_BYTES for key in video_keys},
        backed_note=REPEATED_MEMBERS_NOTE,
        dictionary_chunk_bytes=INDEX_DICTIONARY_CHUNK_BYTES,
        min_group_rows=INDEX_MIN_GROUP_ROWS,
        expanding={"tasks": TEXT_EXPANSION},
    )


def check_task_lists(tasks: pa.ChunkedArray, *, where: str) -> None:
    """At most ``MAX_EPISODE_TASKS`` tasks per episode, each at most ``MAX_TASK_BYTES`` long.

    Raises:
        FormatError: names the largest count or length found and the limit.
    """
    if not len(tasks):
        return
    most = pc.max(pc.list_value_length(tasks)).as_py() or 0
    if most > MAX_EPISODE_TASKS:
        raise FormatError(f"{where}: an episode lists {most} tasks; at most {MAX_EPISODE_TASKS} are allowed")
    check_strings(pc.list_flatten(tasks), limit=MAX_TASK_BYTES, where=where)


def check_strings(strings: pa.Array | pa.ChunkedArray, *, limit: int, where: str) -> None:
    """Every string at most ``limit`` bytes long.

    Raises:
        FormatError: names the longest length found and the limit.
    """
    if len(strings):
        longest = pc.max(pc.binary_length(strings)).as_py() or 0
        if longest > limit:
            raise FormatError(f"{where}: a string of {longest} bytes; at most {limit} are allowed")


_HEX_VALUE = np.full(256, 255, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def hex_digests(column: pa.Array | pa.ChunkedArray, *, where: str) -> np.ndarray:
    """SHA-256 hex strings (64 lowercase hex digits each) as an ``(n, 32)`` uint8 matrix.

    Vectorized: the strings' bytes are read as one buffer and mapped through a table, so a
    million digests cost milliseconds, not a Python call each.

    Raises:
        FormatError: a value that is not 64 lowercase hex digits (names the first row).
    """
    digests, bad = _hex_matrix(column, where=where)
    if bad >= 0:
        raise FormatError(f"{where} row {bad}: not a sha256 hex digest")
    return digests


def _hex_matrix(column: pa.Array | pa.ChunkedArray, *, where: str) -> tuple[np.ndarray, int]:
    """``hex_digests``'s matrix and the first row that is not a digest (-1: none; the matrix
    is then unusable)."""
    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(values)
    if n == 0:
        return np.zeros((0, 32), np.uint8), -1
    if not pa.types.is_string(values.type):
        raise FormatError(f"{where}: digests must be strings, found {values.type}")
    wrong = pc.binary_length(values).to_numpy(zero_copy_only=False) != 64
    wrong |= values.is_null().to_numpy(zero_copy_only=False)
    if wrong.any():
        return np.zeros((n, 32), np.uint8), int(np.argmax(wrong))
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset : values.offset + n + 1]
    raw = np.frombuffer(values.buffers()[2], dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])]
    nibbles = _HEX_VALUE[raw].reshape(n, 64)
    bad = (nibbles == 255).any(axis=1)
    if bad.any():
        return np.zeros((n, 32), np.uint8), int(np.argmax(bad))
    return (nibbles[:, 0::2] << 4) | nibbles[:, 1::2], -1


@dataclass(frozen=True, eq=False)
class EpisodeTable(Sequence[EpisodeEntry]):
    """A validated episodes index as columns, ascending ``episode_index``.

    ``E`` episodes, ``C`` cameras (``video_keys``). One array per column, no object per
    episode: a million episodes cost tens of MB and open in about a second. Indexing builds
    that episode's ``EpisodeEntry`` (O(cameras)); iterating builds one per episode (O(E), for
    tools that visit each). Arrays are read-only.
    """

    video_keys: tuple[str, ...]
    episode_index: np.ndarray  # (E,) int64
    shard: np.ndarray  # (E,) int64
    length: np.ndarray  # (E,) int64
    dataset_from_index: np.ndarray  # (E,) int64
    row_start: np.ndarray  # (E,) int64
    row_group: np.ndarray  # (E,) int64
    row_group_offset: np.ndarray  # (E,) int64
    row_group_bytes: np.ndarray  # (E,) int64
    row_group_sha256: np.ndarray  # (E, 32) uint8
    member_offset: np.ndarray  # (E, C) int64
    member_size: np.ndarray  # (E, C) int64
    member_frames: np.ndarray  # (E, C) int64
    member_codec: np.ndarray  # (E, C) int8, index into VIDEO_CODECS
    member_sha256: np.ndarray  # (E, C, 32) uint8
    tasks: pa.ListArray | None = None  # per episode, when read with tasks
    member_preroll: np.ndarray | None = None  # (E, C) int64, format 4; None: no member has pre-roll

    def __post_init__(self) -> None:
        for value in vars(self).values():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)

    def __len__(self) -> int:
        return len(self.episode_index)

    @overload
    def __getitem__(self, position: int) -> EpisodeEntry: ...

    @overload
    def __getitem__(self, position: slice) -> EpisodeTable: ...

    def __getitem__(self, position: int | slice) -> EpisodeEntry | EpisodeTable:
        """``EpisodeEntry`` of the episode at ``position``; a slice gives an ``EpisodeTable``."""
        if isinstance(position, slice):
            return self.take(np.arange(len(self))[position])
        i = range(len(self))[position]  # IndexError, negative positions as a list's
        cameras = {
            key: CameraMember(
                offset=int(self.member_offset[i, k]),
                size=int(self.member_size[i, k]),
                frames=int(self.member_frames[i, k]),
                sha256=self.member_sha256[i, k].tobytes().hex(),
                codec=VIDEO_CODECS[int(self.member_codec[i, k])],
                preroll=int(self.member_preroll[i, k]) if self.member_preroll is not None else 0,
            )
            for k, key in enumerate(self.video_keys)
        }
        return EpisodeEntry(
            episode_index=int(self.episode_index[i]),
            shard=int(self.shard[i]),
            length=int(self.length[i]),
            dataset_from_index=int(self.dataset_from_index[i]),
            row_start=int(self.row_start[i]),
            row_group=RowGroupRef(
                int(self.row_group[i]),
                int(self.row_group_offset[i]),
                int(self.row_group_bytes[i]),
                self.row_group_sha256[i].tobytes().hex(),
            ),
            tasks=tuple(self.tasks[i].as_py() or ()) if self.tasks is not None else (),
            cameras=cameras,
        )

    def take(self, positions: np.ndarray) -> EpisodeTable:
        """The episodes at ``positions`` (ascending), as a table. O(len(positions) x C)."""
        positions = np.asarray(positions, dtype=np.int64)
        picked = {name: value[positions] for name, value in vars(self).items() if isinstance(value, np.ndarray)}
        tasks = self.tasks.take(pa.array(positions)) if self.tasks is not None else None
        return EpisodeTable(video_keys=self.video_keys, tasks=tasks, **picked)

    def positions(self, episode_indices: np.ndarray) -> np.ndarray:
        """Positions of these ``episode_index`` values (-1 where absent). O(n log E)."""
        wanted = np.asarray(episode_indices, dtype=np.int64)
        at = np.searchsorted(self.episode_index, wanted)
        found = at < len(self)
        found[found] = self.episode_index[at[found]] == wanted[found]
        return np.where(found, at, -1)

    def shard_range(self, shard: int) -> tuple[int, int]:
        """``[first, stop)`` positions of the shard's episodes (shards ascend). O(log E)."""
        return int(np.searchsorted(self.shard, shard, side="left")), int(np.searchsorted(self.shard, shard, side="right"))

    def row_group_totals(self) -> tuple[np.ndarray, np.ndarray]:
        """Per episode: how many episodes and rows its (shard, row group) holds. O(E log E)."""
        if not len(self):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        _, inverse, counts = np.unique(np.stack([self.shard, self.row_group]), axis=1, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        rows = np.bincount(inverse, weights=self.length, minlength=len(counts)).astype(np.int64)
        return counts[inverse].astype(np.int64), rows[inverse]


def _table(columns: _IndexColumns, manifest: Manifest, where: str, *, with_tasks: bool) -> EpisodeTable:
    """Every rule of the episodes index, vectorized over its columns (no loop per episode),
    each checked as soon as its columns are read (a broken index stops early)."""
    episode, shard, length = _episode_columns(columns, manifest, where)
    from_index = columns.numbers("dataset_from_index").astype(np.int64, copy=False)
    wrong_range = ((columns.numbers("dataset_to_index") - from_index) != length) | (from_index < 0)
    if wrong_range.any():
        bad = int(episode[np.argmax(wrong_range)])
        raise FormatError(f"{where}: episode {bad}: dataset_to_index - dataset_from_index must equal length, from >= 0")
    row_start = _row_starts(columns, episode, shard, length, where)
    group, group_offset, group_bytes, group_sha = _row_groups(columns, manifest, episode, shard, where)
    members = _Members.read(columns, manifest, episode, shard, length, where)
    _check_members_disjoint(shard, members.offset, members.size, episode, manifest, where)
    tasks = None
    if with_tasks:
        tasks = columns.strings("tasks")
        check_task_lists(tasks, where=f"{where}: column tasks")
        tasks = tasks.combine_chunks()
    return EpisodeTable(
        video_keys=tuple(manifest.video_keys),
        episode_index=episode,
        shard=shard,
        length=length,
        dataset_from_index=from_index,
        row_start=row_start,
        row_group=group,
        row_group_offset=group_offset,
        row_group_bytes=group_bytes,
        row_group_sha256=group_sha,
        member_offset=members.offset,
        member_size=members.size,
        member_frames=members.frames,
        member_codec=members.codec,
        member_sha256=members.sha,
        tasks=tasks,
        member_preroll=members.preroll if members.preroll is not None and members.preroll.any() else None,
    )


def _episode_columns(columns: _IndexColumns, manifest: Manifest, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``episode_index`` (ascending), ``shard`` (ascending, a manifest shard) and ``length``
    (a frame count), each shard holding the episodes and frames the manifest records."""
    shards = manifest.shards
    episode = columns.numbers("episode_index").astype(np.int64, copy=False)
    n = len(episode)
    if n and (episode[0] < 0 or (np.diff(episode) <= 0).any()):
        raise FormatError(f"{where}: episode_index must be non-negative and strictly ascending")
    shard = columns.numbers("shard").astype(np.int64)
    if n and (shard.min() < 0 or shard.max() >= len(shards) or (np.diff(shard) < 0).any()):
        raise FormatError(f"{where}: shard must be ascending in [0, {len(shards) - 1}]")
    length = columns.numbers("length").astype(np.int64, copy=False)
    if n and (length < 0).any():
        raise FormatError(f"{where}: episode {int(episode[np.argmax(length < 0)])} has a negative length")
    if n and (length > MAX_EPISODE_FRAMES).any():
        bad = int(np.argmax(length > MAX_EPISODE_FRAMES))
        raise FormatError(
            f"{where}: episode {int(episode[bad])} has {int(length[bad])} frames; at most {MAX_EPISODE_FRAMES} are allowed"
        )
    per_shard_counts = np.bincount(shard, minlength=len(shards))
    per_shard_frames = np.bincount(shard, weights=length, minlength=len(shards)).astype(np.int64)
    for s in shards:
        if (per_shard_counts[s.index], per_shard_frames[s.index]) != (s.num_episodes, s.frames):
            raise FormatError(
                f"{where}: shard {s.name} has {int(per_shard_counts[s.index])} episodes / {int(per_shard_frames[s.index])} "
                f"frames, the manifest records {s.num_episodes} / {s.frames}"
            )
    return episode, shard, length


def _row_starts(columns: _IndexColumns, episode: np.ndarray, shard: np.ndarray, length: np.ndarray, where: str) -> np.ndarray:
    """``row_start``: rows of a shard's episodes are consecutive in its parquet, in episode
    order, so an episode starts where the shard's earlier episodes end."""
    before = np.cumsum(length) - length
    first_of_shard = np.searchsorted(shard, shard, side="left")
    row_start = columns.numbers("row_start").astype(np.int64, copy=False)
    wrong = row_start != before - before[first_of_shard]
    if wrong.any():
        raise FormatError(
            f"{where}: episode {int(episode[np.argmax(wrong)])}: row_start is not where its rows begin in the shard parquet"
        )
    return row_start


def _row_groups(
    columns: _IndexColumns, manifest: Manifest, episode: np.ndarray, shard: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each episode's row group (number, span, digest), the span inside its shard parquet's
    row-group area (before the footer)."""
    shards = manifest.shards
    footer_offset = np.array([s.parquet_footer.offset for s in shards], dtype=np.int64)[shard]
    group = columns.numbers("row_group").astype(np.int64)
    group_offset = columns.numbers("row_group_offset").astype(np.int64, copy=False)
    group_bytes = columns.numbers("row_group_bytes").astype(np.int64, copy=False)
    outside = (group < 0) | (group_offset < 4) | (group_bytes < 0) | (group_offset + group_bytes > footer_offset)
    if outside.any():
        i = int(np.argmax(outside))
        raise FormatError(
            f"{where}: episode {int(episode[i])}: row group {int(group[i])} at [{int(group_offset[i])}, "
            f"{int(group_offset[i] + group_bytes[i])}) is not inside the row-group area [4, {int(footer_offset[i])}) of "
            f"{shards[int(shard[i])].name}.parquet"
        )
    group_sha, bad = columns.digests("row_group_sha256")
    if bad >= 0:
        raise FormatError(f"{where}: episode {int(episode[bad])}: row_group_sha256 is not a sha256 hex digest")
    return group, group_offset, group_bytes, group_sha


@dataclass
class _Members:
    """Each episode's members, one column per camera (``(episodes, cameras)`` arrays)."""

    offset: np.ndarray
    size: np.ndarray
    frames: np.ndarray
    codec: np.ndarray
    sha: np.ndarray
    preroll: np.ndarray | None

    @classmethod
    def read(
        cls, columns: _IndexColumns, manifest: Manifest, episode: np.ndarray, shard: np.ndarray, length: np.ndarray, where: str
    ) -> _Members:
        """Every camera's member columns, each checked as it is read (``_camera``)."""
        n, c = len(episode), len(manifest.video_keys)
        preroll = np.zeros((n, c), np.int64) if manifest.format_version >= PREROLL_FORMAT_VERSION else None
        members = cls(
            offset=np.zeros((n, c), np.int64),
            size=np.zeros((n, c), np.int64),
            frames=np.zeros((n, c), np.int64),
            codec=np.zeros((n, c), np.int8),
            sha=np.zeros((n, c, 32), np.uint8),
            preroll=preroll,
        )
        tar_bytes = np.array([s.tar_bytes for s in manifest.shards], dtype=np.int64)[shard]
        for k, key in enumerate(manifest.video_keys):
            members._camera(columns, k, key, manifest, episode, shard, length, tar_bytes, where)
        return members

    def _camera(
        self,
        columns: _IndexColumns,
        k: int,
        key: str,
        manifest: Manifest,
        episode: np.ndarray,
        shard: np.ndarray,
        length: np.ndarray,
        tar_bytes: np.ndarray,
        where: str,
    ) -> None:
        """Camera ``k``'s columns: members inside their shard's tar, frames in ``[1, length]``, a
        known codec, digests, and (version 4) a pre-roll a member can hold."""
        label = f"{where}: episode %d camera {key}"
        offset, size = self.offset[:, k], self.size[:, k]
        offset[:] = columns.numbers(video_column(key, "offset"))
        size[:] = columns.numbers(video_column(key, "size"))
        out = (offset < _TAR_BLOCK) | (size < 0) | (offset + size > tar_bytes)
        if out.any():
            i = int(np.argmax(out))
            raise FormatError(
                f"{label % int(episode[i])}: member [{int(offset[i])}, {int(offset[i] + size[i])}) lies "
                f"outside {manifest.shards[int(shard[i])].name}.tar ({int(tar_bytes[i])} bytes)"
            )
        frames = self.frames[:, k]
        frames[:] = columns.numbers(video_column(key, "frames"))
        wrong = (frames < np.minimum(1, length)) | (frames > length)
        if wrong.any():
            i = int(np.argmax(wrong))
            raise FormatError(f"{label % int(episode[i])}: {int(frames[i])} frames for an episode of {int(length[i])} rows")
        found, bad, value = columns.codes(video_column(key, "codec"), VIDEO_CODECS)
        if bad >= 0:
            raise FormatError(f"{label % int(episode[bad])}: codec {str(value)[:40]!r} is not one of {list(VIDEO_CODECS)}")
        self.codec[:, k] = found
        digests, bad = columns.digests(video_column(key, "sha256"))
        if bad >= 0:
            raise FormatError(f"{label % int(episode[bad])}: sha256 is not a sha256 hex digest")
        self.sha[:, k] = digests
        columns.numbers(video_column(key, "reencoded"))  # read for its nulls and type; no reader uses it
        if self.preroll is not None:
            preroll = self.preroll[:, k]
            preroll[:] = columns.numbers(video_column(key, PREROLL_FIELD))
            # Pre-roll frames are the rest of the first GOP: the member's GOP bound (check_mp4,
            # MAX_GOP_PIXELS) bounds what decoding them costs; here, a count a member can hold.
            wrong = (preroll < 0) | (preroll > MAX_EPISODE_FRAMES)
            if wrong.any():
                i = int(np.argmax(wrong))
                raise FormatError(f"{label % int(episode[i])}: preroll {int(preroll[i])} is not a frame count")


def _check_members_disjoint(
    shard: np.ndarray, offset: np.ndarray, size: np.ndarray, episode: np.ndarray, manifest: Manifest, where: str
) -> None:
    """Members of a shard never overlap (a reader trusts each range to be its own member)."""
    if not offset.size:
        return
    owner = np.repeat(np.arange(len(shard)), offset.shape[1])
    member_shard, start, end = shard[owner], offset.reshape(-1), (offset + size).reshape(-1)
    order = np.lexsort((start, member_shard))
    overlap = (member_shard[order][1:] == member_shard[order][:-1]) & (start[order][1:] < end[order][:-1])
    if overlap.any():
        i = int(np.argmax(overlap))
        first, second = int(episode[owner[order][i]]), int(episode[owner[order][i + 1]])
        raise FormatError(
            f"{where}: members of episodes {first} and {second} overlap in "
            f"{manifest.shards[int(member_shard[order][i])].name}.tar"
        )


__all__ = [
    "EPISODE_COLUMNS",
    "MEMBER_COLUMN_TYPES",
    "SAMPLE_COLUMNS",
    "CameraMember",
    "EpisodeEntry",
    "EpisodeTable",
    "RowGroupRef",
    "hex_digests",
    "episodes_index_budget",
    "episodes_index_schema",
    "parse_episodes_index",
    "samples_index_schema",
    "check_strings",
    "check_task_lists",
]
