"""LeRobot v2.1's metadata, parsed (``meta/info.json``, ``episodes.jsonl``, ``tasks.jsonl``,
``episodes_stats.jsonl``), and the v3 ``meta/`` LeRobot 0.6.1's converter makes of it
(``convert_dataset_v21_to_v30``: ``convert_info``, ``convert_tasks``,
``convert_episodes_metadata``), which is what a pack of a v2.1 root keeps.
"""

from __future__ import annotations

import copy
import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import INFO_PATH, STATS_PATH, TASKS_PATH
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.lerobot_info import LeRobotInfo, parse_lerobot_v21_info
from lerobot_shards.core.format.lerobot_stats import aggregate_stats, stats_as_json
from lerobot_shards.core.format.limits import (
    MAX_DATASET_EPISODES,
    MAX_INDEX_FILE_BYTES,
    MAX_JSON_DEPTH,
    MAX_RECORD_BYTES,
    MAX_STATS_BYTES,
    MAX_TASK_BYTES,
    MAX_TASKS,
)
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.files import SourceRoot, read_regular
from lerobot_shards.packer.source.lerobot_v3_metadata import check_tasks_of
from lerobot_shards.packer.source.records import EpisodeRecord, MetadataFile

EPISODES_JSONL = "meta/episodes.jsonl"
TASKS_JSONL = "meta/tasks.jsonl"
EPISODES_STATS_JSONL = "meta/episodes_stats.jsonl"
# What v2.1 holds (a stats.json only in datasets converted from v2.0), and the most bytes of each.
_BOUNDS = {
    INFO_PATH: MAX_RECORD_BYTES,
    EPISODES_JSONL: MAX_INDEX_FILE_BYTES,
    TASKS_JSONL: MAX_INDEX_FILE_BYTES,
    EPISODES_STATS_JSONL: MAX_INDEX_FILE_BYTES,
    STATS_PATH: MAX_STATS_BYTES,
}
# LeRobot 0.6.1's converter (convert_info): its templates and default file sizes.
V30_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
V30_VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
V30_EPISODES_FILE = "meta/episodes/chunk-000/file-000.parquet"


def metadata_bound(rel: str) -> int | None:
    """The most bytes a v2.1 metadata file at ``rel`` may hold, or None for a file v2.1 has not."""
    return _BOUNDS.get(rel)


def read_jsonl(data: bytes, *, where: str, max_rows: int) -> list[dict]:
    """A JSON-lines file: one JSON object a non-empty line, at most ``max_rows`` of them.

    Raises:
        SourceError: a line that is not a JSON object, or more lines than allowed.
    """
    out = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        if len(out) >= max_rows:
            raise SourceError(f"{where}: more than {max_rows:,} records")
        try:
            value = load_json(
                line, where=f"{where}: line {number}", max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH, allow_nan=True
            )
        except FormatError as err:
            raise SourceError(str(err)) from None
        if not isinstance(value, dict):
            raise SourceError(f"{where}: line {number} is a JSON {type(value).__name__}, not an object")
        out.append(value)
    return out


def _int_field(record: dict, name: str, where: str) -> int:
    value = record.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise SourceError(f"{where}: {name} must be a non-negative integer, found {str(value)[:40]!r}")
    return value


@dataclass(frozen=True)
class V21Metadata:
    """A v2.1 root's metadata, parsed (see the module docstring).

    Attributes:
        info: ``meta/info.json`` (v2.1 templates); ``chunks_size`` its episodes per chunk.
        episodes: each episode's record, ``dataset_from_index`` the running row count over the
            episodes in index order (the converter's).
        tasks: ``{task_index: task}`` of ``meta/tasks.jsonl``.
        episode_stats: each episode's statistics (``episodes_stats.jsonl``), None without it.
        stats: a leftover ``meta/stats.json`` (datasets converted from v2.0), None without one.
    """

    root: str
    info: LeRobotInfo
    chunks_size: int
    episodes: dict[int, EpisodeRecord]
    tasks: dict[int, str]
    episode_stats: dict[int, dict] | None
    stats: dict | None

    @classmethod
    def read(cls, root: SourceRoot) -> V21Metadata:
        """Raises: SourceError: a missing or malformed metadata file (names it and why)."""
        info_path = root.file(INFO_PATH, what="metadata", missing=f"is {root.root} a LeRobot dataset root?")
        try:
            info = parse_lerobot_v21_info(read_regular(info_path, MAX_RECORD_BYTES, "info.json"), where=str(info_path))
        except FormatError as err:
            raise SourceError(str(err)) from None
        return cls(
            root=str(root.root),
            info=info,
            chunks_size=int(info.raw["chunks_size"]),
            episodes=_episodes(root),
            tasks=_tasks(root),
            episode_stats=_episode_stats(root),
            stats=_leftover_stats(root),
        )

    # -- the v3 meta/ a pack keeps ------------------------------------------------------------
    def converted_info(self) -> dict[str, Any]:
        """``info.json`` as LeRobot's converter writes it (``convert_info``): version ``v3.0``, v3
        templates and file sizes, ``total_chunks``/``total_videos`` gone, each non-video feature
        with the ``fps`` (kept as the dataset says: the converter's ``int(fps)`` would make an
        NTSC rate another one)."""
        info = copy.deepcopy(self.info.raw)
        info["codebase_version"] = "v3.0"
        info.pop("total_chunks", None)
        info.pop("total_videos", None)
        info["data_files_size_in_mb"], info["video_files_size_in_mb"] = 100, 200
        info["data_path"] = V30_DATA_PATH
        info["video_path"] = V30_VIDEO_PATH if info.get("video_path") is not None else None
        info["fps"] = int(self.info.fps) if float(self.info.fps).is_integer() else self.info.fps
        for feature in info["features"].values():
            if isinstance(feature, dict) and feature.get("dtype") != "video":
                feature["fps"] = info["fps"]
        return info

    def pack_files(self) -> list[MetadataFile]:
        """The v3 ``meta/`` files, made as the converter makes them: ``info.json`` (rewritten by
        the packer as the pack's own), ``tasks.parquet``, ``stats.json`` (aggregated from the
        per-episode statistics; a leftover ``stats.json`` where there are none; none without
        either) and the episodes table."""
        files = [
            MetadataFile(INFO_PATH, MAX_RECORD_BYTES, data=json.dumps(self.converted_info(), indent=4).encode()),
            MetadataFile(V30_EPISODES_FILE, MAX_INDEX_FILE_BYTES, data=self._episodes_parquet()),
        ]
        stats = self._pack_stats()
        if stats is not None:
            files.append(MetadataFile(STATS_PATH, MAX_STATS_BYTES, data=json.dumps(stats, indent=4).encode()))
        files.append(MetadataFile(TASKS_PATH, MAX_INDEX_FILE_BYTES, data=self._tasks_parquet()))
        return sorted(files, key=lambda f: f.rel)

    def _pack_stats(self) -> dict | None:
        if self.episode_stats is None:
            return self.stats
        try:
            parts = [_as_arrays(stats) for _, stats in sorted(self.episode_stats.items())]
            return stats_as_json(aggregate_stats(parts))
        except (FormatError, ValueError, TypeError) as err:
            raise SourceError(
                f"{self.root}/{EPISODES_STATS_JSONL}: statistics LeRobot's converter cannot aggregate: {err}"
            ) from None

    def _tasks_parquet(self) -> bytes:
        """``tasks.parquet`` as the converter writes it (``convert_tasks``): indexed by the task
        string, a ``task_index`` column, in ``task_index`` order."""
        import pandas as pd

        ordered = sorted(self.tasks.items())
        frame = pd.DataFrame({"task_index": [i for i, _ in ordered]}, index=pd.Index([t for _, t in ordered], name="task"))
        buffer = io.BytesIO()
        frame.to_parquet(buffer)
        return buffer.getvalue()

    def _episodes_parquet(self) -> bytes:
        """The episodes table the converter writes (without its ``stats/*`` columns, which
        LeRobot drops when it loads them): every episode's record, its rows and videos as if
        concatenated into one file each (``from_timestamp`` the running ``length / fps``)."""
        import pyarrow.parquet as pq

        ordered = sorted(self.episodes.items())
        starts = np.cumsum([0.0] + [r.length / self.info.fps for _, r in ordered])
        columns: dict[str, Any] = {
            "episode_index": pa.array([e for e, _ in ordered], pa.int64()),
            "data/chunk_index": pa.array([0] * len(ordered), pa.int64()),
            "data/file_index": pa.array([0] * len(ordered), pa.int64()),
            "dataset_from_index": pa.array([r.dataset_from_index for _, r in ordered], pa.int64()),
            "dataset_to_index": pa.array([r.dataset_to_index for _, r in ordered], pa.int64()),
        }
        for key in self.info.features.video_keys:
            columns[f"videos/{key}/chunk_index"] = pa.array([0] * len(ordered), pa.int64())
            columns[f"videos/{key}/file_index"] = pa.array([0] * len(ordered), pa.int64())
            columns[f"videos/{key}/from_timestamp"] = pa.array(starts[:-1].tolist(), pa.float64())
            columns[f"videos/{key}/to_timestamp"] = pa.array(starts[1:].tolist(), pa.float64())
        columns["tasks"] = pa.array([list(r.tasks or ()) for _, r in ordered], pa.list_(pa.string()))
        columns["length"] = pa.array([r.length for _, r in ordered], pa.int64())
        columns["meta/episodes/chunk_index"] = pa.array([0] * len(ordered), pa.int64())
        columns["meta/episodes/file_index"] = pa.array([0] * len(ordered), pa.int64())
        buffer = io.BytesIO()
        pq.write_table(pa.table(columns), buffer)
        return buffer.getvalue()

    # -- where LeRobot reads it otherwise -------------------------------------------------------
    def notes(self) -> list[str]:
        """Where LeRobot's converter (and so LeRobot) reads this dataset otherwise than a pack,
        or cannot: no per-episode statistics, episodes or tasks not numbered ``0..n-1``, an fps
        that is not a whole number."""
        notes = []
        if self.episode_stats is None:
            kept = "its meta/stats.json (from v2.0)" if self.stats is not None else "none (ds.meta.stats is empty)"
            notes.append(
                f"{self.root}/{EPISODES_STATS_JSONL}: missing, which LeRobot's converter needs (it stops there); "
                f"the pack's statistics are {kept}"
            )
        if list(self.episodes) != list(range(len(self.episodes))):
            notes.append(
                f"{self.root}/{EPISODES_JSONL}: episode indices are not 0..{len(self.episodes) - 1}; LeRobot's converter "
                "refuses such a dataset (it numbers episodes by position); the pack keeps their indices"
            )
        if sorted(self.tasks) != list(range(len(self.tasks))):
            notes.append(
                f"{self.root}/{TASKS_JSONL}: task indices are not 0..{len(self.tasks) - 1}; LeRobot looks a task up by "
                "its position in the converted tasks file, so its samples name other tasks than the pack's"
            )
        if not float(self.info.fps).is_integer():
            notes.append(
                f"{self.root}/{INFO_PATH}: fps {self.info.fps} is not a whole number; LeRobot's converter writes "
                f"int(fps) = {int(self.info.fps)}, the pack keeps {self.info.fps}"
            )
        return notes


def _episodes(root: SourceRoot) -> dict[int, EpisodeRecord]:
    """``episodes.jsonl``: each episode's length and tasks; its global index range the running
    row count over the episodes in index order (as the converter numbers them)."""
    path = root.file(EPISODES_JSONL, what="episodes metadata", missing="a v2.1 dataset lists its episodes there")
    lines = read_jsonl(read_regular(path, MAX_INDEX_FILE_BYTES, "episodes.jsonl"), where=str(path), max_rows=MAX_DATASET_EPISODES)
    found: dict[int, tuple[int, tuple[str, ...] | None]] = {}
    for number, line in enumerate(lines, start=1):
        where = f"{path}: line {number}"
        episode = _int_field(line, "episode_index", where)
        length = _int_field(line, "length", where)
        tasks = line.get("tasks")
        check_tasks_of(tasks, where)
        if episode in found:
            raise SourceError(f"{where}: episode {episode} is listed twice")
        found[episode] = (length, tuple(tasks) if tasks is not None else None)
    records, start = {}, 0
    for episode, (length, tasks) in sorted(found.items()):
        records[episode] = EpisodeRecord(length, start, start + length, tasks)
        start += length
    if not records:
        raise SourceError(f"{path}: lists no episode")
    return records


def _tasks(root: SourceRoot) -> dict[int, str]:
    path = root.file(TASKS_JSONL, what="tasks", missing="a v2.1 dataset lists its tasks there")
    tasks: dict[int, str] = {}
    for number, line in enumerate(
        read_jsonl(read_regular(path, MAX_INDEX_FILE_BYTES, "tasks.jsonl"), where=str(path), max_rows=MAX_TASKS), 1
    ):
        where = f"{path}: line {number}"
        index, task = _int_field(line, "task_index", where), line.get("task")
        if not isinstance(task, str) or len(task.encode()) > MAX_TASK_BYTES:
            raise SourceError(f"{where}: task must be a string of at most {MAX_TASK_BYTES:,} bytes")
        if index in tasks:
            raise SourceError(f"{where}: task_index {index} is listed twice")
        tasks[index] = task
    return tasks


def _episode_stats(root: SourceRoot) -> dict[int, dict] | None:
    path = root.file(EPISODES_STATS_JSONL, what="episode statistics")
    if not path.is_file():
        return None
    stats: dict[int, dict] = {}
    lines = read_jsonl(
        read_regular(path, MAX_INDEX_FILE_BYTES, "episodes_stats.jsonl"), where=str(path), max_rows=MAX_DATASET_EPISODES
    )
    for number, line in enumerate(lines, start=1):
        where = f"{path}: line {number}"
        episode, value = _int_field(line, "episode_index", where), line.get("stats")
        if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
            raise SourceError(f"{where}: stats must be an object of features, each an object of statistics")
        stats[episode] = value
    return stats


def _leftover_stats(root: SourceRoot) -> dict | None:
    value = root.stats_json()
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SourceError(f"{root.root / STATS_PATH}: must hold a JSON object, found {type(value).__name__}")
    return value


def _as_arrays(stats: dict) -> dict[str, dict[str, np.ndarray]]:
    """One episode's statistics as LeRobot loads them (``cast_stats_to_numpy``): arrays."""
    return {key: {name: np.asarray(value, dtype=np.float64) for name, value in feature.items()} for key, feature in stats.items()}


__all__ = ["EPISODES_JSONL", "EPISODES_STATS_JSONL", "TASKS_JSONL", "V21Metadata", "metadata_bound", "read_jsonl"]
