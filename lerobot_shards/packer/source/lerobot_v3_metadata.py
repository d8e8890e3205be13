"""LeRobot v3.0's metadata: ``meta/info.json``, ``meta/episodes/chunk-*/file-*.parquet`` (one
record per episode: its length, global index range, tasks, and where its rows and videos lie),
``meta/tasks.parquet``; which metadata files a v3 dataset has (and the most bytes each may hold,
what staging fetches and a pack copies).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import INFO_PATH, META_DIR, STATS_PATH, TASKS_PATH
from lerobot_shards.core.format.lerobot_info import LeRobotInfo
from lerobot_shards.core.format.lerobot_reading import LeRobotTasks, read_tasks
from lerobot_shards.core.format.limits import (
    MAX_DATASET_EPISODES,
    MAX_EPISODE_TASKS,
    MAX_INDEX_FILE_BYTES,
    MAX_RECORD_BYTES,
    MAX_STATS_BYTES,
    MAX_TASK_BYTES,
    MAX_TASKS,
)
from lerobot_shards.core.format.parquet import read_parquet_schema
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.files import SourceRoot, read_regular, read_source_file, read_source_table, source_error
from lerobot_shards.packer.source.info import parse_info
from lerobot_shards.packer.source.records import EpisodeRecord

REQUIRED_EPISODE_COLUMNS = (
    "episode_index",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
)
EPISODES_GLOB = "chunk-*/file-*.parquet"
_EPISODES_METADATA = re.compile(r"meta/episodes/chunk-\d+/file-\d+\.parquet")
# The metadata files LeRobot v3 reads, and the most bytes each may hold (what reading it allows:
# info.json and stats.json are parsed whole, the parquet files read whole within the index bound).
_METADATA_BOUNDS = {INFO_PATH: MAX_RECORD_BYTES, STATS_PATH: MAX_STATS_BYTES, TASKS_PATH: MAX_INDEX_FILE_BYTES}


def metadata_bound(rel: str) -> int | None:
    """The most bytes a LeRobot v3 metadata file at ``rel`` may hold, or None when LeRobot does
    not read such a file (``meta/info.json``, ``meta/stats.json``, ``meta/tasks.parquet`` and
    ``meta/episodes/chunk-*/file-*.parquet`` are all it reads)."""
    if rel in _METADATA_BOUNDS:
        return _METADATA_BOUNDS[rel]
    return MAX_INDEX_FILE_BYTES if _EPISODES_METADATA.fullmatch(rel) else None


@dataclass(frozen=True)
class V3Metadata:
    """A v3 root's metadata, parsed (every later decision reads these typed values).

    Attributes:
        info: ``meta/info.json``.
        records: each episode's row of ``meta/episodes`` (where its rows and videos lie).
        episodes: each episode's ``EpisodeRecord``.
        tasks: ``meta/tasks.parquet`` as LeRobot reads it.
    """

    info: LeRobotInfo
    records: dict[int, dict]
    episodes: dict[int, EpisodeRecord]
    tasks: LeRobotTasks

    @classmethod
    def read(cls, root: SourceRoot) -> V3Metadata:
        """Raises: SourceError: a missing or malformed metadata file (names it and why)."""
        info_path = root.file(INFO_PATH, what="metadata", missing=f"is {root.root} a LeRobot dataset root?")
        info = parse_info(read_regular(info_path, MAX_RECORD_BYTES, "info.json"), where=str(info_path))
        records = _read_episodes(root, info.features.video_keys)
        episodes = {
            e: EpisodeRecord(
                length=int(row["length"]),
                dataset_from_index=int(row["dataset_from_index"]),
                dataset_to_index=int(row["dataset_to_index"]),
                tasks=tuple(row["tasks"]) if row["tasks"] is not None else None,
            )
            for e, row in records.items()
        }
        return cls(info, records, episodes, _read_tasks(root))


def _read_episodes(root: SourceRoot, video_keys: list[str]) -> dict[int, dict]:
    files = sorted((root.root / META_DIR / "episodes").glob(EPISODES_GLOB))
    if not files:
        raise SourceError(f"{root.root / 'meta' / 'episodes'}: no episodes metadata parquet found")
    rows: dict[int, dict] = {}
    for path in files:
        path = root.file(path.relative_to(root.root).as_posix(), what="episodes metadata")
        data = read_source_file(path, "episodes metadata")
        try:
            names = read_parquet_schema(data, where=str(path)).names
        except FormatError as err:
            raise source_error(err, path, "episodes metadata") from None
        # Every column's pages are checked (stats/* lists included); only these are decoded.
        wanted = [c for c in names if not c.startswith("stats/")]
        table = read_source_table(
            data,
            path,
            "episodes metadata",
            columns=wanted,
            max_rows=MAX_DATASET_EPISODES,
            values_per_row={"tasks": MAX_EPISODE_TASKS},
        )
        missing = [c for c in REQUIRED_EPISODE_COLUMNS if c not in table.column_names]
        missing += [
            f"videos/{k}/{f}"
            for k in video_keys
            for f in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
            if f"videos/{k}/{f}" not in table.column_names
        ]
        if missing:
            raise SourceError(f"{path}: episodes metadata lacks columns {missing}")
        for row in table.to_pylist():
            # LeRobot's own converters (convert_image_to_video_dataset) write episodes metadata
            # without ``tasks``, and LeRobot reads such datasets (a sample's task comes from its
            # row's task_index): the episode's tasks are then taken from its rows.
            row.setdefault("tasks", None)
            _check_episode_row(row, video_keys, path)
            rows[int(row["episode_index"])] = row
    return dict(sorted(rows.items()))


def _read_tasks(root: SourceRoot) -> LeRobotTasks:
    """``meta/tasks.parquet`` through the model of LeRobot's reading (``read_tasks``): the file
    every pack copies, and the same parse a reader of the pack applies to it."""
    path = root.file(TASKS_PATH, what="tasks")
    if not path.is_file():
        raise SourceError(f"{path}: missing")
    try:
        return read_tasks(read_source_file(path, "tasks"), where=str(path), max_rows=MAX_TASKS, max_task_bytes=MAX_TASK_BYTES)
    except FormatError as err:
        raise source_error(err, path, "tasks") from None


def _is_finite_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_episode_row(row: dict, video_keys: list[str], path: Path) -> None:
    """Indices that become file names and frame ranges must be what they claim to be."""
    where = f"{path}: episode {str(row.get('episode_index'))[:40]}"
    for column in REQUIRED_EPISODE_COLUMNS:
        _non_negative_int(row, column, where)
    for key in video_keys:
        for column in (f"videos/{key}/chunk_index", f"videos/{key}/file_index"):
            _non_negative_int(row, column, where)
        start, stop = row.get(f"videos/{key}/from_timestamp"), row.get(f"videos/{key}/to_timestamp")
        if not (_is_finite_number(start) and _is_finite_number(stop) and 0 <= start <= stop):
            raise SourceError(
                f"{where}: videos/{key}/from_timestamp and to_timestamp must be finite seconds with "
                f"0 <= from <= to, found {str(start)[:40]}, {str(stop)[:40]}"
            )
    if row["dataset_to_index"] - row["dataset_from_index"] != row["length"]:
        raise SourceError(
            f"{where}: dataset_from_index {row['dataset_from_index']} to dataset_to_index "
            f"{row['dataset_to_index']} is not its length {row['length']}"
        )
    check_tasks_of(row.get("tasks"), where)


def _non_negative_int(row: dict, column: str, where: str) -> None:
    value = row.get(column)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SourceError(f"{where}: {column} must be a non-negative integer, found {str(value)[:40]!r}")


def check_tasks_of(tasks: object, where: str) -> None:
    """An episode's listed tasks: absent (None: taken from its rows), or a list of strings each
    within ``MAX_TASK_BYTES``.

    Raises:
        SourceError: anything else (names ``where``).
    """
    if tasks is None:
        return
    if not isinstance(tasks, list) or not all(isinstance(task, str) for task in tasks):
        raise SourceError(f"{where}: tasks must be a list of strings")
    if any(len(task.encode()) > MAX_TASK_BYTES for task in tasks):
        raise SourceError(f"{where}: a task string longer than {MAX_TASK_BYTES:,} bytes")


__all__ = ["EPISODES_GLOB", "REQUIRED_EPISODE_COLUMNS", "V3Metadata", "check_tasks_of", "metadata_bound"]
