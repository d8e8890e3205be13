"""A faithful LeRobot v3.0 dataset writer for tests, the demo and benchmarks.

It writes what LeRobot 0.6.1's own writer writes (``meta/info.json``, episodes metadata,
``meta/tasks.parquet``, ``meta/stats.json``, data parquet with one row group per episode,
and per-camera mp4 files in which each episode is encoded separately with libsvtav1 and
then concatenated by stream copy), including file rollover: data files and each camera's
video files roll over independently by size, so an episode's data file index and video
file index differ. Every frame carries its ``(episode, frame)`` identity
(``packer.synthetic.frame_identity``) so tests can check which frame a decoder returned.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from packer.source.video import video_duration_s
from packer.synthetic.frame_identity import identity_frame
from packer.synthetic.stats import aggregate_episode_stats, feature_stats
from packer.synthetic.video import concatenate_by_stream_copy, encode_episode_video

# SVT-AV1 prints its banner straight to stderr for every encoder; 1 = errors only.
os.environ.setdefault("SVT_LOG", "1")

CODEBASE_VERSION = "v3.0"
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE_PATTERN + ".parquet"
# LeRobot buffers episode metadata and flushes every 10 episodes: one row group per flush.
EPISODES_METADATA_BUFFER = 10

DEFAULT_TASKS = ("pick up the red cube", "push the block to the goal", "open the top drawer")


@dataclass(frozen=True)
class CameraSpec:
    """One camera stream: feature key and frame size in pixels."""

    key: str
    height: int
    width: int


@dataclass(frozen=True)
class SampleSpec:
    """What to generate. Small file sizes force data and video file rollover.

    ``lengths`` fixes episode lengths; otherwise they are drawn from
    ``[min_length, max_length]`` with ``seed``. File sizes are in MB like LeRobot's
    ``data_files_size_in_mb``/``video_files_size_in_mb`` (floats allowed, to roll over
    on tiny datasets).
    """

    episodes: int = 6
    fps: int = 30
    lengths: tuple[int, ...] | None = None
    min_length: int = 8
    max_length: int = 40
    cameras: tuple[CameraSpec, ...] = (
        CameraSpec("observation.images.top", 48, 64),
        CameraSpec("observation.images.wrist", 32, 32),
    )
    state_dim: int = 6
    action_dim: int = 6
    tasks: tuple[str, ...] = DEFAULT_TASKS
    chunks_size: int = 1000
    data_files_size_in_mb: float = 100
    video_files_size_in_mb: float = 200
    robot_type: str = "synthetic_arm"
    seed: int = 0
    crf: int = 30
    gop: int = 2
    preset: int = 12
    extra_info: dict = field(default_factory=dict)

    def episode_lengths(self) -> list[int]:
        if self.lengths is not None:
            if len(self.lengths) != self.episodes:
                raise ValueError(f"lengths has {len(self.lengths)} entries for {self.episodes} episodes")
            if min(self.lengths) < 1:
                raise ValueError(f"episode lengths must be >= 1, got {self.lengths}")
            return list(self.lengths)
        rng = np.random.default_rng([self.seed, 1])
        return [int(x) for x in rng.integers(self.min_length, self.max_length + 1, size=self.episodes)]


@dataclass
class SampleReport:
    """What ``write_sample_dataset`` wrote."""

    root: Path
    episodes: int
    frames: int
    data_files: int
    video_files: dict[str, int]
    bytes: int


def _next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    file_index += 1
    if file_index >= chunks_size:
        return chunk_index + 1, 0
    return chunk_index, file_index


def _features(spec: SampleSpec) -> dict:
    features: dict[str, dict] = {}
    features["observation.state"] = {
        "dtype": "float32",
        "shape": [spec.state_dim],
        "names": [f"joint_{i}" for i in range(spec.state_dim)],
    }
    features["action"] = {
        "dtype": "float32",
        "shape": [spec.action_dim],
        "names": [f"joint_{i}" for i in range(spec.action_dim)],
    }
    features["next.reward"] = {"dtype": "float32", "shape": [1], "names": None}
    features["next.done"] = {"dtype": "bool", "shape": [1], "names": None}
    for camera in spec.cameras:
        features[camera.key] = {
            "dtype": "video",
            "shape": [camera.height, camera.width, 3],
            "names": ["height", "width", "channels"],
            "info": {
                "video.height": camera.height,
                "video.width": camera.width,
                "video.codec": "av1",
                "video.pix_fmt": "yuv420p",
                "video.fps": spec.fps,
                "video.channels": 3,
                "has_audio": False,
                "video.g": spec.gop,
                "video.crf": spec.crf,
                "video.preset": spec.preset,
                "video.fast_decode": 0,
                "video.video_backend": "pyav",
                "video.extra_options": {},
                "is_depth_map": False,
            },
        }
    # LeRobot appends its default features after the user's.
    for name, dtype in (
        ("timestamp", "float32"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    ):
        features[name] = {"dtype": dtype, "shape": [1], "names": None}
    return features


def _arrow_type(feature: dict) -> pa.DataType:
    dtype = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}[
        feature["dtype"]
    ]
    shape = feature["shape"]
    if list(shape) == [1]:
        return dtype
    if len(shape) == 1:
        return pa.list_(dtype, shape[0])
    raise ValueError(f"the sample writer supports scalar and 1-D features, got shape {shape}")


def _episode_tasks(spec: SampleSpec, episode_index: int, length: int) -> tuple[list[str], np.ndarray]:
    """Tasks of an episode and the task string index of each frame (some episodes have two)."""
    first = spec.tasks[episode_index % len(spec.tasks)]
    if episode_index % 4 == 3 and length >= 4 and len(spec.tasks) > 1:
        second = spec.tasks[(episode_index + 1) % len(spec.tasks)]
        per_frame = np.array([0] * (length // 2) + [1] * (length - length // 2))
        return [first, second], per_frame
    return [first], np.zeros(length, dtype=np.int64)


def _episode_columns(
    spec: SampleSpec, episode_index: int, length: int, global_start: int, task_ids: np.ndarray
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([spec.seed, 2, episode_index])
    frame_index = np.arange(length, dtype=np.int64)
    state = rng.normal(size=(length, spec.state_dim)).astype(np.float32)
    # Identity in the first two state dims lets tests check tabular windows exactly.
    state[:, 0] = episode_index
    if spec.state_dim > 1:
        state[:, 1] = frame_index
    action = rng.normal(size=(length, spec.action_dim)).astype(np.float32)
    action[:, 0] = episode_index * 1000 + frame_index
    done = np.zeros(length, dtype=bool)
    done[-1] = True
    return {
        "observation.state": state,
        "action": action,
        "next.reward": rng.random(length).astype(np.float32),
        "next.done": done,
        "timestamp": (frame_index / spec.fps).astype(np.float32),
        "frame_index": frame_index,
        "episode_index": np.full(length, episode_index, dtype=np.int64),
        "index": np.arange(global_start, global_start + length, dtype=np.int64),
        "task_index": task_ids.astype(np.int64),
    }


def _hf_features_metadata(columns: list[str], features: dict, fingerprint: str) -> bytes:
    """The ``huggingface`` schema metadata that ``datasets`` attaches to LeRobot's data parquet."""
    described = {}
    for name in columns:
        feature = features[name]
        value = {"dtype": feature["dtype"], "_type": "Value"}
        if list(feature["shape"]) == [1]:
            described[name] = value
        else:
            described[name] = {"feature": value, "length": feature["shape"][0], "_type": "List"}
    return json.dumps({"info": {"features": described}, "fingerprint": fingerprint}).encode()


def _to_arrow(columns: dict[str, np.ndarray], features: dict) -> pa.Table:
    arrays, fields = [], []
    for name, values in columns.items():
        arrow_type = _arrow_type(features[name])
        if pa.types.is_fixed_size_list(arrow_type):
            flat = pa.array(values.reshape(-1), type=arrow_type.value_type)
            array = pa.FixedSizeListArray.from_arrays(flat, arrow_type.list_size)
        else:
            array = pa.array(values, type=arrow_type)
        arrays.append(array)
        fields.append(pa.field(name, arrow_type))
    metadata = {b"huggingface": _hf_features_metadata(list(columns), features, "0" * 16)}
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=metadata))


def write_sample_dataset(
    root: str | Path,
    spec: SampleSpec = SampleSpec(),
    *,
    progress: Callable[[int, int], None] | None = None,
) -> SampleReport:
    """Write a LeRobot v3.0 dataset to ``root`` (created; must not already hold a dataset).

    Returns:
        A ``SampleReport`` with counts and the number of data/video files written.

    Raises:
        FileExistsError: ``root/meta/info.json`` already exists.
        ValueError: an invalid spec (lengths, frame sizes, too many episodes for identity).
    """
    root = Path(root)
    if (root / "meta" / "info.json").exists():
        raise FileExistsError(f"{root} already holds a dataset (meta/info.json exists)")
    lengths = spec.episode_lengths()
    features = _features(spec)
    tabular = {k: v for k, v in features.items() if v["dtype"] != "video"}
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="lerobot-sample-", dir=root))

    # --- data parquet: one row group per episode, files roll over by size ----------------
    data_loc = (0, 0)
    data_writer: pq.ParquetWriter | None = None
    data_file_bytes = 0
    data_file_frames = 0
    data_files = 0
    task_strings: list[str] = []
    episode_rows: list[dict] = []
    episode_stats: list[dict] = []
    # Per camera: which episodes' temp files go into the current output file.
    video_state = {c.key: {"loc": (0, 0), "pending": [], "bytes": 0, "duration": 0.0, "files": 0} for c in spec.cameras}

    def flush_video(camera_key: str) -> None:
        state = video_state[camera_key]
        if not state["pending"]:
            return
        chunk_index, file_index = state["loc"]
        out = root / VIDEO_PATH.format(video_key=camera_key, chunk_index=chunk_index, file_index=file_index)
        concatenate_by_stream_copy(state["pending"], out)
        state["pending"] = []
        state["files"] += 1

    global_index = 0
    for episode_index, length in enumerate(lengths):
        tasks, local_task = _episode_tasks(spec, episode_index, length)
        for task in tasks:
            if task not in task_strings:
                task_strings.append(task)
        task_ids = np.array([task_strings.index(tasks[i]) for i in local_task], dtype=np.int64)
        columns = _episode_columns(spec, episode_index, length, global_index, task_ids)
        table = _to_arrow({k: columns[k] for k in tabular}, features)

        # Roll over when the estimated file size would reach the limit (LeRobot's rule).
        if data_writer is not None:
            per_frame = data_file_bytes / max(data_file_frames, 1)
            if (data_file_bytes + per_frame * length) / 1e6 >= spec.data_files_size_in_mb:
                data_writer.close()
                data_writer = None
                data_loc = _next_file(*data_loc, spec.chunks_size)
        if data_writer is None:
            path = root / DATA_PATH.format(chunk_index=data_loc[0], file_index=data_loc[1])
            path.parent.mkdir(parents=True, exist_ok=True)
            data_writer = pq.ParquetWriter(path, table.schema, compression="snappy", use_dictionary=True)
            data_file_bytes = 0
            data_file_frames = 0
            data_files += 1
        data_writer.write_table(table)
        data_file_bytes += table.nbytes
        data_file_frames += length

        row: dict = {
            "episode_index": episode_index,
            "tasks": tasks,
            "length": length,
            "data/chunk_index": data_loc[0],
            "data/file_index": data_loc[1],
            "dataset_from_index": global_index,
            "dataset_to_index": global_index + length,
        }
        stats = {k: feature_stats(columns[k]) for k in tabular}

        for camera_index, camera in enumerate(spec.cameras):
            frames = np.stack(
                [identity_frame(episode_index, j, camera.height, camera.width, camera_index) for j in range(length)]
            )
            stats[camera.key] = feature_stats(frames, image=True)
            ep_path = workdir / f"{camera.key}-{episode_index:06d}.mp4"
            encode_episode_video(frames, ep_path, spec.fps, crf=spec.crf, gop=spec.gop, preset=spec.preset)
            size = ep_path.stat().st_size
            duration = video_duration_s(ep_path)
            state = video_state[camera.key]
            if state["pending"] and (state["bytes"] + size) / 1e6 >= spec.video_files_size_in_mb:
                flush_video(camera.key)
                state["loc"] = _next_file(*state["loc"], spec.chunks_size)
                state["bytes"] = 0
                state["duration"] = 0.0
            from_ts = state["duration"]
            state["pending"].append(ep_path)
            state["bytes"] += size
            state["duration"] = from_ts + duration
            row[f"videos/{camera.key}/chunk_index"] = state["loc"][0]
            row[f"videos/{camera.key}/file_index"] = state["loc"][1]
            row[f"videos/{camera.key}/from_timestamp"] = from_ts
            row[f"videos/{camera.key}/to_timestamp"] = from_ts + duration

        ordered_stats = {k: stats[k] for k in features if k in stats}
        for feature_name, values in ordered_stats.items():
            for stat_name, value in values.items():
                row[f"stats/{feature_name}/{stat_name}"] = value.tolist()
        row["meta/episodes/chunk_index"] = 0
        row["meta/episodes/file_index"] = 0
        episode_rows.append(row)
        episode_stats.append(ordered_stats)
        global_index += length
        if progress is not None:
            progress(episode_index + 1, len(lengths))

    if data_writer is not None:
        data_writer.close()
    for camera in spec.cameras:
        flush_video(camera.key)
    shutil.rmtree(workdir)

    # --- metadata -------------------------------------------------------------------------
    episodes_path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    episodes_path.parent.mkdir(parents=True, exist_ok=True)
    episodes_table = pa.Table.from_pylist(episode_rows)
    with pq.ParquetWriter(episodes_path, episodes_table.schema, compression="snappy", use_dictionary=True) as writer:
        for start in range(0, len(episode_rows), EPISODES_METADATA_BUFFER):
            writer.write_table(episodes_table.slice(start, EPISODES_METADATA_BUFFER))

    tasks_df = pd.DataFrame({"task_index": np.arange(len(task_strings), dtype=np.int64)}, index=pd.Index(task_strings, name="task"))
    tasks_df.to_parquet(root / "meta" / "tasks.parquet")

    info = {
        "codebase_version": CODEBASE_VERSION,
        "fps": spec.fps,
        "features": features,
        "total_episodes": len(lengths),
        "total_frames": int(sum(lengths)),
        "total_tasks": len(task_strings),
        "chunks_size": spec.chunks_size,
        "data_files_size_in_mb": spec.data_files_size_in_mb,
        "video_files_size_in_mb": spec.video_files_size_in_mb,
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if spec.cameras else None,
        "robot_type": spec.robot_type,
        "splits": {"train": f"0:{len(lengths)}"},
        **spec.extra_info,
    }
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    (root / "meta" / "stats.json").write_text(json.dumps(aggregate_episode_stats(episode_stats), indent=4))

    total_bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return SampleReport(
        root=root,
        episodes=len(lengths),
        frames=int(sum(lengths)),
        data_files=data_files,
        video_files={c.key: video_state[c.key]["files"] for c in spec.cameras},
        bytes=total_bytes,
    )


def rollover_spec(**overrides) -> SampleSpec:
    """A small spec that exercises everything packers get wrong: several data and video
    files per camera rolling over independently, chunk rollover, two cameras of different
    sizes, 1- and 2-frame episodes, several tasks (some episodes with two)."""
    base = dict(
        episodes=9,
        lengths=(12, 1, 30, 2, 17, 25, 9, 40, 5),
        data_files_size_in_mb=0.004,
        video_files_size_in_mb=0.012,
        chunks_size=2,
    )
    base.update(overrides)
    return SampleSpec(**base)

