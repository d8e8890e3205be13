"""``index/episodes.parquet`` and ``index/samples.parquet``: their schemas, defined once, and
the validating parser of the episodes index.

The packer writes the tables with ``episodes_index_schema``/``samples_index_schema``; the
reader, ``verify`` and ``sql`` read them through ``parse_episodes_index``, which checks the
schema, the row count (before reading rows) and every value against the manifest: shards,
lengths, row ranges, row-group spans inside the shard parquet, member ranges inside the tar,
frame counts and digests. What it returns can be used without further checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reader.errors import FormatError
from reader.format.fields import is_sha256_hex
from reader.format.layout import (
    EPISODES_INDEX_PATH,
    VIDEO_CODECS,
    VIDEO_MEMBER_FIELDS,
    pad_column,
    video_column,
)
from reader.format.limits import MAX_DATASET_EPISODES, MAX_EPISODE_FRAMES, MAX_EPISODE_TASKS, MAX_TASK_BYTES
from reader.format.manifest import Manifest
from reader.format.parquet.bounded import Budget, read_bounded

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


def episodes_index_schema(video_keys: list[str]) -> pa.Schema:
    """The exact Arrow schema of ``index/episodes.parquet`` for these cameras."""
    fields = [pa.field(name, arrow_type) for name, arrow_type in EPISODE_COLUMNS]
    for key in video_keys:
        fields += [pa.field(video_column(key, name), arrow_type) for name, arrow_type in MEMBER_COLUMN_TYPES.items()]
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
    """One camera's mp4 member of an episode: its byte range in the shard tar and digest."""

    offset: int
    size: int
    frames: int
    sha256: str
    codec: str


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
) -> list[EpisodeEntry]:
    """Read and validate ``index/episodes.parquet`` (its bytes, already checked against the
    manifest's digest) into entries, ascending ``episode_index``.

    What the file decodes to is bounded before it is decoded (``parquet.read_bounded``): the
    manifest's row count (at most ``MAX_DATASET_EPISODES``), at most ``MAX_EPISODE_TASKS``
    tasks per episode of at most ``MAX_TASK_BYTES`` each, and ``MAX_EXPANSION`` times the
    file's bytes in all. ``with_tasks=False`` (the reader, which takes a sample's task from
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
        # that are not UTF-8) is a format error naming the file.
        raise FormatError(f"{where}: not a readable parquet file ({type(err).__name__}: {err})") from None


def _parse_episodes_index(data: bytes, manifest: Manifest, where: str, with_tasks: bool) -> list[EpisodeEntry]:
    expected = episodes_index_schema(manifest.video_keys)
    columns = expected.names if with_tasks else [name for name in expected.names if name != "tasks"]
    episodes = manifest.totals["episodes"]
    if episodes > MAX_DATASET_EPISODES:
        raise FormatError(f"{where}: the manifest records {episodes} episodes, more than the {MAX_DATASET_EPISODES} allowed")
    budget = Budget(values_per_row={"tasks": MAX_EPISODE_TASKS})
    table = read_bounded(data, where=where, columns=columns, rows=episodes, rows_expected=f"the manifest records {episodes} episodes",
                         max_rows=MAX_DATASET_EPISODES, budget=budget)
    wanted = pa.schema([expected.field(name) for name in columns])
    if not table.schema.remove_metadata().equals(wanted):
        found = {f.name: str(f.type) for f in table.schema}
        want = {f.name: str(f.type) for f in wanted}
        wrong = {k: (found.get(k), v) for k, v in want.items() if found.get(k) != v}
        extra = sorted(set(found) - set(want))
        raise FormatError(f"{where}: columns differ from the format: expected/found {wrong}" + (f", unexpected {extra}" if extra else ""))
    if table.num_rows and any(table[name].null_count for name in table.column_names):
        nulls = [name for name in table.column_names if table[name].null_count]
        raise FormatError(f"{where}: null values in {nulls}")
    if with_tasks:
        check_task_lists(table["tasks"], where=f"{where}: column tasks")
    return _entries(table, manifest, where)


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


def _entries(table: pa.Table, manifest: Manifest, where: str) -> list[EpisodeEntry]:
    col = {name: table[name].to_numpy(zero_copy_only=False) for name, _ in EPISODE_COLUMNS if name != "tasks"}
    tasks = table["tasks"].to_pylist() if "tasks" in table.column_names else [()] * table.num_rows
    shards = manifest.shards
    n = table.num_rows
    episode = col["episode_index"]
    if n and (episode[0] < 0 or (np.diff(episode) <= 0).any()):
        raise FormatError(f"{where}: episode_index must be non-negative and strictly ascending")
    shard = col["shard"].astype(np.int64)
    if n and (shard.min() < 0 or shard.max() >= len(shards) or (np.diff(shard) < 0).any()):
        raise FormatError(f"{where}: shard must be ascending in [0, {len(shards) - 1}]")
    length = col["length"]
    if n and (length < 0).any():
        raise FormatError(f"{where}: episode {int(episode[np.argmax(length < 0)])} has a negative length")
    if n and (length > MAX_EPISODE_FRAMES).any():
        bad = int(np.argmax(length > MAX_EPISODE_FRAMES))
        raise FormatError(f"{where}: episode {int(episode[bad])} has {int(length[bad])} frames; at most {MAX_EPISODE_FRAMES} are allowed")
    wrong_range = ((col["dataset_to_index"] - col["dataset_from_index"]) != length) | (col["dataset_from_index"] < 0)
    if wrong_range.any():
        bad = int(episode[np.argmax(wrong_range)])
        raise FormatError(f"{where}: episode {bad}: dataset_to_index - dataset_from_index must equal length, from >= 0")
    per_shard_counts = np.bincount(shard, minlength=len(shards))
    per_shard_frames = np.bincount(shard, weights=length, minlength=len(shards)).astype(np.int64)
    for s in shards:
        if (per_shard_counts[s.index], per_shard_frames[s.index]) != (s.num_episodes, s.frames):
            raise FormatError(
                f"{where}: shard {s.name} has {int(per_shard_counts[s.index])} episodes / {int(per_shard_frames[s.index])} "
                f"frames, the manifest records {s.num_episodes} / {s.frames}"
            )
    # Rows of a shard's episodes are consecutive in its parquet, in episode order.
    expected_start = np.zeros(n, dtype=np.int64)
    for s in range(len(shards)):
        mask = shard == s
        expected_start[mask] = np.concatenate([[0], np.cumsum(length[mask])[:-1]]) if mask.any() else []
    if (col["row_start"] != expected_start).any():
        bad = int(episode[np.argmax(col["row_start"] != expected_start)])
        raise FormatError(f"{where}: episode {bad}: row_start is not where its rows begin in the shard parquet")

    members = {key: {name: table[video_column(key, name)].to_pylist() for name in MEMBER_COLUMN_TYPES} for key in manifest.video_keys}
    entries: list[EpisodeEntry] = []
    for i in range(n):
        s = shards[int(shard[i])]
        label = f"{where}: episode {int(episode[i])}"
        group = RowGroupRef(
            index=int(col["row_group"][i]),
            offset=int(col["row_group_offset"][i]),
            bytes=int(col["row_group_bytes"][i]),
            sha256=str(col["row_group_sha256"][i]),
        )
        if group.index < 0 or group.offset < 4 or group.bytes < 0 or group.offset + group.bytes > s.parquet_footer.offset:
            raise FormatError(
                f"{label}: row group {group.index} at [{group.offset}, {group.offset + group.bytes}) is not inside the "
                f"row-group area [4, {s.parquet_footer.offset}) of {s.name}.parquet"
            )
        if not is_sha256_hex(group.sha256):
            raise FormatError(f"{label}: row_group_sha256 is not a sha256 hex digest")
        cameras = {}
        for key in manifest.video_keys:
            fields = members[key]
            member = CameraMember(
                offset=fields["offset"][i],
                size=fields["size"][i],
                frames=fields["frames"][i],
                sha256=fields["sha256"][i],
                codec=fields["codec"][i],
            )
            if member.offset < _TAR_BLOCK or member.size < 0 or member.offset + member.size > s.tar_bytes:
                raise FormatError(
                    f"{label} camera {key}: member [{member.offset}, {member.offset + member.size}) lies outside "
                    f"{s.name}.tar ({s.tar_bytes} bytes)"
                )
            limit = int(length[i])
            if not (min(1, limit) <= member.frames <= limit):
                raise FormatError(f"{label} camera {key}: {member.frames} frames for an episode of {limit} rows")
            if member.codec not in VIDEO_CODECS or not is_sha256_hex(member.sha256):
                raise FormatError(f"{label} camera {key}: codec {member.codec!r} / sha256 {member.sha256!r} are not valid")
            cameras[key] = member
        if not all(isinstance(t, str) for t in tasks[i] or []):
            raise FormatError(f"{label}: tasks must be strings")
        entries.append(
            EpisodeEntry(
                episode_index=int(episode[i]),
                shard=s.index,
                length=int(length[i]),
                dataset_from_index=int(col["dataset_from_index"][i]),
                row_start=int(col["row_start"][i]),
                row_group=group,
                tasks=tuple(tasks[i] or ()),
                cameras=cameras,
            )
        )
    _check_members_disjoint(entries, manifest, where)
    return entries


def _check_members_disjoint(entries: list[EpisodeEntry], manifest: Manifest, where: str) -> None:
    """Members of a shard never overlap (a reader trusts each range to be its own member)."""
    by_shard: dict[int, list[tuple[int, int, int]]] = {}
    for entry in entries:
        for member in entry.cameras.values():
            by_shard.setdefault(entry.shard, []).append((member.offset, member.offset + member.size, entry.episode_index))
    for shard, ranges in by_shard.items():
        ranges.sort()
        for (_, end, first), (start, _, second) in zip(ranges, ranges[1:]):
            if start < end:
                raise FormatError(f"{where}: members of episodes {first} and {second} overlap in {manifest.shards[shard].name}.tar")


__all__ = [
    "EPISODE_COLUMNS",
    "MEMBER_COLUMN_TYPES",
    "SAMPLE_COLUMNS",
    "CameraMember",
    "EpisodeEntry",
    "RowGroupRef",
    "episodes_index_schema",
    "parse_episodes_index",
    "samples_index_schema",
    "check_strings",
    "check_task_lists",
]
