"""A faithful LeRobot v3.0 dataset writer for tests, the demo and benchmarks.

It writes what LeRobot 0.6.1's own writer writes (``meta/info.json``, episodes metadata,
``meta/tasks.parquet``, ``meta/stats.json``, data parquet with one row group per episode,
and per-camera mp4 files in which each episode is encoded separately with libsvtav1 and
then concatenated by stream copy), including file rollover: data files and each camera's
video files roll over independently by size, so an episode's data file index and video
file index differ. Every frame carries its ``(episode, frame)`` identity
(``lerobot_shards.testing.frame_identity``) so tests can check which frame a decoder returned.

The layouts real datasets use besides LeRobot's default are a ``CameraSpec`` or a
``SampleSpec`` field away: cameras in h264/hevc (10-bit, 4:4:4, with B-frames), image
features (PNG in the data parquet, ``use_videos=False``), depth maps as video (LeRobot's depth
encoder: 12-bit quantized codes, lossless HEVC) or as 16-bit TIFF pictures, datasets without
video (``"video_path": null``), episodes metadata without ``tasks`` (what LeRobot's image to
video converter writes) and LeRobot's language columns.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.packer.source.video import video_duration_s
from lerobot_shards.testing.frame_identity import identity_frame
from lerobot_shards.testing.stats import aggregate_episode_stats, feature_stats
from lerobot_shards.testing.video import concatenate_by_stream_copy, encode_episode_video

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


CAMERA_KINDS = ("video", "image", "depth_video", "depth_image")
# LeRobot 0.6.1's depth quantizer defaults (lerobot/configs/video.py), in metres.
DEPTH_MIN_M, DEPTH_MAX_M, DEPTH_SHIFT_M, DEPTH_QMAX = 0.01, 10.0, 3.5, 4095


@dataclass(frozen=True)
class CameraSpec:
    """One camera: feature key, frame size in pixels and how LeRobot stores it.

    ``kind``: ``video`` (an mp4 per camera, ``codec`` in ``pix_fmt``; ``bframes`` B-frames
    between references for h264/hevc, real with a long ``gop``), ``image`` (PNG pictures in
    the data parquet), ``depth_video`` (a depth map in millimetres, quantized to 12-bit codes as
    LeRobot's depth encoder does, lossless HEVC ``gray12le``) or ``depth_image`` (the depth map
    as 16-bit TIFF pictures in the data parquet). ``gop``: keyframe interval (the spec's when None).
    """

    key: str
    height: int
    width: int
    kind: str = "video"
    codec: str = "av1"
    pix_fmt: str = "yuv420p"
    gop: int | None = None
    bframes: int = 0

    def __post_init__(self) -> None:
        if self.kind not in CAMERA_KINDS:
            raise ArgumentError(f"camera kind {self.kind!r} is not one of {CAMERA_KINDS}")

    @property
    def is_video(self) -> bool:
        return self.kind in ("video", "depth_video")

    @property
    def is_depth(self) -> bool:
        return self.kind.startswith("depth")


@dataclass(frozen=True)
class SampleSpec:
    """What to generate. Small file sizes force data and video file rollover.

    ``lengths`` fixes episode lengths; otherwise they are drawn from
    ``[min_length, max_length]`` with ``seed``. File sizes are in MB like LeRobot's
    ``data_files_size_in_mb``/``video_files_size_in_mb`` (floats allowed, to roll over
    on tiny datasets).
    """

    episodes: int = 6
    fps: float = 30
    # The cameras' own rate when it is not ``fps`` exactly: an NTSC camera under fps 29.97 is
    # encoded at 30000/1001 (time base 1001/30000), its rows at k / 29.97 s, as LeRobot records it.
    video_rate: Fraction | None = None
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
    # Episodes metadata without a ``tasks`` column (LeRobot's convert_image_to_video_dataset).
    episode_tasks_column: bool = True
    # LeRobot's language columns (``language_persistent``/``language_events``), as its
    # annotation pipeline writes them.
    language: bool = False

    def episode_lengths(self) -> list[int]:
        if self.lengths is not None:
            if len(self.lengths) != self.episodes:
                raise ArgumentError(f"lengths has {len(self.lengths)} entries for {self.episodes} episodes")
            if min(self.lengths) < 1:
                raise ArgumentError(f"episode lengths must be >= 1, got {self.lengths}")
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
        channels = 1 if camera.is_depth else 3
        feature = {
            "dtype": "video" if camera.is_video else "image",
            "shape": [camera.height, camera.width, channels],
            "names": ["height", "width", "channels"],
        }
        if camera.is_video:
            feature["info"] = {
                "video.height": camera.height,
                "video.width": camera.width,
                "video.codec": "hevc" if camera.is_depth else camera.codec,
                "video.pix_fmt": "gray12le" if camera.is_depth else camera.pix_fmt,
                "video.fps": spec.fps,
                "video.channels": channels,
                "has_audio": False,
                "video.g": camera.gop or spec.gop,
                "video.crf": spec.crf,
                "video.preset": spec.preset,
                "video.fast_decode": 0,
                "video.video_backend": "pyav",
                "video.extra_options": {"x265-params": "lossless=1"} if camera.is_depth else {},
                "is_depth_map": camera.is_depth,
            }
            if camera.is_depth:  # LeRobot records the unit and the quantizer beside the marker
                feature["info"] = {
                    "is_depth_map": True,
                    "depth_unit": "mm",
                    **feature["info"],
                    "video.depth_min": DEPTH_MIN_M,
                    "video.depth_max": DEPTH_MAX_M,
                    "video.shift": DEPTH_SHIFT_M,
                    "video.use_log": True,
                }
        elif camera.is_depth:
            feature["info"] = {"is_depth_map": True, "depth_unit": "mm"}
        features[camera.key] = feature
    # LeRobot appends its default features after the user's.
    for name, dtype in (
        ("timestamp", "float32"),
        ("frame_index", "int64"),
        ("episode_index", "int64"),
        ("index", "int64"),
        ("task_index", "int64"),
    ):
        features[name] = {"dtype": dtype, "shape": [1], "names": None}
    if spec.language:
        for name in ("language_persistent", "language_events"):
            features[name] = {"dtype": "language", "shape": [1], "names": None}
    return features


def _arrow_type(feature: dict) -> pa.DataType:
    dtype = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}[feature["dtype"]]
    shape = feature["shape"]
    if list(shape) == [1]:
        return dtype
    if len(shape) == 1:
        return pa.list_(dtype, shape[0])
    raise ArgumentError(f"the sample writer supports scalar and 1-D features, got shape {shape}")


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
        if feature["dtype"] in ("image", "language"):
            if feature["dtype"] == "image":
                described[name] = {"_type": "Image"}
            continue
        value = {"dtype": feature["dtype"], "_type": "Value"}
        if list(feature["shape"]) == [1]:
            described[name] = value
        else:
            described[name] = {"feature": value, "length": feature["shape"][0], "_type": "List"}
    return json.dumps({"info": {"features": described}, "fingerprint": fingerprint}).encode()


_IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])


def _to_arrow(columns: dict[str, Any], features: dict) -> pa.Table:
    arrays, fields = [], []
    for name, values in columns.items():
        if features[name]["dtype"] in ("image", "language"):
            # Pictures ({bytes, path} structs) and language lists are built as Arrow already.
            arrays.append(values)
            fields.append(pa.field(name, values.type))
            continue
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


def depth_map_mm(episode_index: int, frame_index: int, height: int, width: int) -> np.ndarray:
    """A smooth, moving depth map in millimetres (uint16, 0.2 to ~3 m) that differs per episode
    and frame, for depth cameras."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    depth = 200 + 9 * xx + 7 * yy + 40 * np.sin(0.3 * frame_index + xx / 11.0) + 150 * (episode_index % 7) + 3 * frame_index
    return depth.astype(np.uint16)


def quantize_depth_mm(depth: np.ndarray) -> np.ndarray:
    """LeRobot 0.6.1's ``quantize_depth`` of a millimetre map with its default (log) settings:
    12-bit codes, what its depth encoder stores in the video."""
    depth_f = depth.astype(np.float32)
    minimum, maximum, shift = (np.float32(v * 1000.0) for v in (DEPTH_MIN_M, DEPTH_MAX_M, DEPTH_SHIFT_M))
    log_min, log_max = math.log(float(minimum + shift)), math.log(float(maximum + shift))
    norm = (np.log(depth_f + shift) - log_min) / (log_max - log_min)
    return np.rint(norm * DEPTH_QMAX).clip(0, DEPTH_QMAX).astype(np.uint16)


def _camera_frames(camera: CameraSpec, episode_index: int, length: int, camera_index: int) -> np.ndarray:
    """An episode's frames of a camera: RGB (T, H, W, 3) uint8 carrying their identity, or a
    depth map (T, H, W) uint16 in millimetres."""
    if camera.is_depth:
        return np.stack([depth_map_mm(episode_index, j, camera.height, camera.width) for j in range(length)])
    return np.stack([identity_frame(episode_index, j, camera.height, camera.width, camera_index) for j in range(length)])


def _depth_codes(frames: np.ndarray) -> np.ndarray:
    return np.stack([quantize_depth_mm(frame) for frame in frames])


def _picture_column(frames: np.ndarray, camera: CameraSpec) -> pa.Array:
    """Pictures as LeRobot stores an image feature: ``{bytes, path}`` per frame, PNG for colour,
    TIFF for a 16-bit depth map."""
    from PIL import Image

    cells = []
    for j, frame in enumerate(frames):
        buffer = io.BytesIO()
        if camera.is_depth:
            Image.fromarray(frame).save(buffer, format="TIFF")
            name = f"frame-{j:06d}.tiff"
        else:
            Image.fromarray(frame).save(buffer, format="PNG", compress_level=1)
            name = f"frame-{j:06d}.png"
        cells.append({"bytes": buffer.getvalue(), "path": name})
    return pa.array(cells, type=_IMAGE_TYPE)


# The types pyarrow infers for LeRobot's annotation writer's rows (it passes no schema).
_TOOL_CALL = pa.struct(
    [("type", pa.string()), ("function", pa.struct([("name", pa.string()), ("arguments", pa.struct([("text", pa.string())]))]))]
)
LANGUAGE_TYPES = {
    "language_persistent": pa.list_(
        pa.struct(
            [
                ("role", pa.string()),
                ("content", pa.string()),
                ("style", pa.string()),
                ("timestamp", pa.float64()),
                ("camera", pa.null()),
                ("tool_calls", pa.null()),
            ]
        )
    ),
    "language_events": pa.list_(
        pa.struct(
            [
                ("role", pa.string()),
                ("content", pa.null()),
                ("style", pa.null()),
                ("camera", pa.null()),
                ("tool_calls", pa.list_(_TOOL_CALL)),
            ]
        )
    ),
}


def _language_columns(episode_index: int, timestamps: np.ndarray, fps: float) -> dict[str, pa.Array]:
    """A plan and a subtask on every row (persistent), a spoken line on every fourth frame
    (events): what LeRobot's annotation pipeline writes."""
    persistent = [
        {
            "role": "user",
            "content": f"plan for episode {episode_index}",
            "style": "plan",
            "timestamp": 0.0,
            "camera": None,
            "tool_calls": None,
        },
        {
            "role": "assistant",
            "content": "reach the cube",
            "style": "subtask",
            "timestamp": 0.1,
            "camera": None,
            "tool_calls": None,
        },
    ]
    events = []
    for j, stamp in enumerate(timestamps.tolist()):
        said = {
            "role": "assistant",
            "content": None,
            "style": None,
            "camera": None,
            "tool_calls": [{"type": "function", "function": {"name": "say", "arguments": {"text": f"at {stamp:.4f} s"}}}],
        }
        events.append([said] if j % 4 == 1 else [])
    return {
        "language_persistent": pa.array([persistent] * len(timestamps), LANGUAGE_TYPES["language_persistent"]),
        "language_events": pa.array(events, LANGUAGE_TYPES["language_events"]),
    }


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
        ArgumentError: ``root`` is a URL, not a local folder.
        ValueError: an invalid spec (lengths, frame sizes, too many episodes for identity).
    """
    if "://" in str(root):  # pathlib would make "s3:/bucket/x" folders here, and pyarrow another thing
        raise ArgumentError(
            f"{root}: the sample writer writes a local folder; give a path (then copy it to the bucket, "
            "e.g. `aws s3 sync FOLDER s3://bucket/x`)"
        )
    root = Path(root)
    if (root / "meta" / "info.json").exists():
        raise FileExistsError(f"{root} already holds a dataset (meta/info.json exists)")
    spec.episode_lengths()  # a bad spec is refused before anything is written
    existed = set(root.iterdir()) if root.is_dir() else None
    root.mkdir(parents=True, exist_ok=True)
    try:
        workdir = Path(tempfile.mkdtemp(prefix="lerobot-sample-", dir=root))
    except OSError as err:  # named by the folder asked for, not by the working folder inside it
        raise OSError(err.errno, err.strerror, str(root)) from None
    try:
        return _write_sample_dataset(root, spec, progress, workdir)
    except BaseException:
        # A failed write leaves nothing a later step would read as a dataset: what this call
        # made goes (the folder itself when it made it).
        for path in [root] if existed is None else [p for p in root.iterdir() if p not in existed]:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _write_sample_dataset(
    root: Path, spec: SampleSpec, progress: Callable[[int, int], None] | None, workdir: Path
) -> SampleReport:
    lengths = spec.episode_lengths()
    features = _features(spec)
    tabular = {k: v for k, v in features.items() if v["dtype"] not in ("video", "image", "language")}
    rows_of = [k for k, v in features.items() if v["dtype"] != "video"]  # the data parquet's columns

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
    video_state: dict[str, dict[str, Any]] = {
        c.key: {"loc": (0, 0), "pending": [], "bytes": 0, "duration": 0.0, "files": 0} for c in spec.cameras if c.is_video
    }

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
        pictures = {c.key: _camera_frames(c, episode_index, length, camera_index) for camera_index, c in enumerate(spec.cameras)}
        for camera in spec.cameras:
            if not camera.is_video:
                columns[camera.key] = _picture_column(pictures[camera.key], camera)
        if spec.language:
            columns.update(_language_columns(episode_index, columns["timestamp"], spec.fps))
        table = _to_arrow({k: columns[k] for k in rows_of}, features)

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

        for camera in spec.cameras:
            frames = pictures[camera.key]
            # Depth statistics are in the stored unit (millimetres), colour ones in [0, 1].
            stats[camera.key] = feature_stats(
                frames[..., None] if frames.ndim == 3 else frames, image=True, scale=1.0 if camera.is_depth else 255.0
            )
            if not camera.is_video:
                continue
            ep_path = workdir / f"{camera.key}-{episode_index:06d}.mp4"
            encode_episode_video(
                _depth_codes(frames) if camera.is_depth else frames,
                ep_path,
                spec.video_rate or spec.fps,
                crf=spec.crf,
                gop=camera.gop or spec.gop,
                preset=spec.preset,
                codec="hevc" if camera.is_depth else camera.codec,
                pix_fmt="gray12le" if camera.is_depth else camera.pix_fmt,
                bframes=camera.bframes,
            )
            size = ep_path.stat().st_size
            duration = video_duration_s(ep_path)
            state = video_state[camera.key]
            if state["pending"] and (state["bytes"] + size) / 1e6 >= spec.video_files_size_in_mb:
                flush_video(camera.key)
                chunk_index, file_index = state["loc"]
                state["loc"] = _next_file(chunk_index, file_index, spec.chunks_size)
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
    for key in video_state:
        flush_video(key)

    # --- metadata -------------------------------------------------------------------------
    episodes_path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    episodes_path.parent.mkdir(parents=True, exist_ok=True)
    if not spec.episode_tasks_column:
        for row in episode_rows:
            del row["tasks"]
    episodes_table = pa.Table.from_pylist(episode_rows)
    with pq.ParquetWriter(episodes_path, episodes_table.schema, compression="snappy", use_dictionary=True) as writer:
        for start in range(0, len(episode_rows), EPISODES_METADATA_BUFFER):
            writer.write_table(episodes_table.slice(start, EPISODES_METADATA_BUFFER))

    tasks_df = pd.DataFrame(
        {"task_index": np.arange(len(task_strings), dtype=np.int64)}, index=pd.Index(task_strings, name="task")
    )
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
        "video_path": VIDEO_PATH if video_state else None,
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
        video_files={key: state["files"] for key, state in video_state.items()},
        bytes=total_bytes,
    )


def rollover_spec(**overrides) -> SampleSpec:
    """A small spec that exercises everything packers get wrong: several data and video
    files per camera rolling over independently, chunk rollover, two cameras of different
    sizes, 1- and 2-frame episodes, several tasks (some episodes with two)."""
    base: dict[str, Any] = dict(
        episodes=9,
        lengths=(12, 1, 30, 2, 17, 25, 9, 40, 5),
        data_files_size_in_mb=0.004,
        video_files_size_in_mb=0.012,
        chunks_size=2,
    )
    base.update(overrides)
    return SampleSpec(**base)
