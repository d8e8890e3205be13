"""LeRobot v2.1 datasets for tests, made from the v3 writer's (``write_sample_dataset``): what
LeRobot 0.3.x writes, laid out per episode (``make parity`` writes them with LeRobot 0.3.3's own
writer instead). The v3 dataset and its v2.1 form hold the same rows and the same frames, so
what LeRobot reads of one (through its converter, for v2.1) is what it reads of the other.

Layout (LeRobot 0.3.3's): ``meta/info.json`` (``codebase_version: v2.1``, templates per episode,
``chunks_size``), ``meta/episodes.jsonl``, ``meta/tasks.jsonl``, ``meta/episodes_stats.jsonl``,
``data/chunk-000/episode_000000.parquet`` and ``videos/chunk-000/<camera>/episode_000000.mp4``:
each episode's rows and each camera's packets cut out of the v3 files by stream copy, its
timestamps starting at 0.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.packer.shard.members import cut_episode
from lerobot_shards.packer.source.lerobot import LeRobotSource
from lerobot_shards.testing.dataset import SampleSpec, write_sample_dataset

V21_DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
V21_VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"


def write_sample_dataset_v21(root: str | Path, spec: SampleSpec = SampleSpec(), *, episodes_stats: bool = True) -> Path:
    """Write a LeRobot v2.1 dataset to ``root`` (see the module docstring); without
    ``episodes_stats`` its ``meta/episodes_stats.jsonl`` is left out (a quirk LeRobot's
    converter stops at). Returns ``root``.

    Raises:
        FileExistsError: ``root`` already holds a dataset.
    """
    root = Path(root)
    if (root / "meta").exists():
        raise FileExistsError(f"{root} already holds a dataset (meta/ exists)")
    work = Path(tempfile.mkdtemp(prefix="lerobot-v21-"))
    try:
        write_sample_dataset(work / "v3", spec)
        to_v21(work / "v3", root, episodes_stats=episodes_stats)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return root


def to_v21(v3_root: Path, root: Path, *, episodes_stats: bool = True) -> None:
    """A v3 dataset laid out as v2.1 at ``root``: its rows and frames unchanged."""
    source = LeRobotSource(v3_root)
    (root / "meta").mkdir(parents=True)
    _write_info(source, root)
    lines, stats = [], []
    episodes_table = _episodes_table(v3_root)
    for episode in source.episode_indices:
        _write_rows(source, episode, root)
        for key in source.video_keys:
            _write_video(source, episode, key, root)
        record = source.episodes[episode]
        lines.append({"episode_index": episode, "tasks": list(record.tasks or ()), "length": record.length})
        stats.append({"episode_index": episode, "stats": _episode_stats(episodes_table, episode)})
    _write_jsonl(root / "meta" / "episodes.jsonl", lines)
    _write_jsonl(root / "meta" / "tasks.jsonl", [{"task_index": i, "task": t} for i, t in sorted(source.tasks.names.items())])
    if episodes_stats:
        _write_jsonl(root / "meta" / "episodes_stats.jsonl", stats)


def _write_info(source: LeRobotSource, root: Path) -> None:
    info = dict(source.info.raw)
    info["codebase_version"] = "v2.1"
    for key in ("data_files_size_in_mb", "video_files_size_in_mb"):
        info.pop(key, None)
    info["total_chunks"] = 1
    info["total_videos"] = len(source.episodes) * len(source.video_keys)
    info["chunks_size"] = 1000
    info["data_path"] = V21_DATA_PATH
    info["video_path"] = V21_VIDEO_PATH if source.video_keys else None
    info["features"] = {k: {n: v for n, v in f.items() if n != "fps"} for k, f in info["features"].items()}
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))


def _write_rows(source: LeRobotSource, episode: int, root: Path) -> None:
    table = source.episode_rows(episode)
    path = root / V21_DATA_PATH.format(episode_chunk=0, episode_index=episode)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _write_video(source: LeRobotSource, episode: int, key: str, root: Path) -> None:
    video, _ = cut_episode(source.video_location(episode, key), max_frames=source.episodes[episode].length)
    assert video is not None and not video.preroll, "the v3 writer starts every episode on a keyframe"
    path = root / V21_VIDEO_PATH.format(episode_chunk=0, video_key=key, episode_index=episode)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(video.data)


def _episodes_table(v3_root: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(path) for path in sorted((v3_root / "meta" / "episodes").glob("*/*.parquet"))])


def _episode_stats(table: pa.Table, episode: int) -> dict:
    """One episode's statistics from the v3 episodes table's ``stats/<feature>/<stat>`` columns."""
    row = next(r for r in table.to_pylist() if r["episode_index"] == episode)
    stats: dict = {}
    for column, value in row.items():
        if column.startswith("stats/") and value is not None:
            _, feature, name = column.split("/", 2)
            stats.setdefault(feature, {})[name] = value
    return stats


def _write_jsonl(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


__all__ = ["V21_DATA_PATH", "V21_VIDEO_PATH", "to_v21", "write_sample_dataset_v21"]
