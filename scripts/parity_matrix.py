"""Opt-in parity matrix (``make parity``): every LeRobot layout we know of, written by LeRobot
0.6.1's *own* writer and dataset tools, packed and read back, sample by sample against
``LeRobotDataset``.

Runs in ``.venv-parity`` (Python 3.12, ``lerobot[dataset]==0.6.1``), never in CI. For each layout:
1. the dataset is written with ``LeRobotDataset.create/add_frame/save_episode`` (encoder
   settings, image features, depth, resumed recording, streaming encoding...) or made from one
   by LeRobot's tools (delete, split, merge, add/remove features, modify tasks, re-encode,
   convert images to video, language annotation);
2. it is packed in copy mode and, where it has video, re-encoded (``--video hevc``);
3. every anchor is compared with ``LeRobotDataset`` in three configs: ``single`` (no window,
   uint8 frames), ``windowed`` (a window on every camera, the action and the state; uint8)
   and ``float`` (the same windows, float32 frames); and in ``random``, ``PackedLeRobotDataset``
   position for position (every other episode selected, the windows, uint8, shuffled batches
   through ``__getitems__``). Copy packs must be equal value for value,
   dtype for dtype, shape for shape; re-encoded packs the same for everything but colour video
   frames, which must be within ``MIN_PSNR_DB`` of LeRobot's (the minimum is reported); so are
   the episodes copy mode re-encoded (a source episode that does not start on a keyframe). 8-bit
   pictures read with ``return_uint8`` come as uint8 (LeRobot gives float32 whatever it is
   asked): they must equal LeRobot's after ``/ 255``, what ``to_device`` and LeRobot's trainer
   do. A sample where LeRobot itself raises (its torchcodec timestamp check on some B-frame
   sources) is counted and not compared.

LeRobot's writer cannot itself write some combinations (a 1-frame episode in h264/hevc or with
2-D features: its concatenation or stats fail), so those layouts use episodes of 3 frames or more;
``one-frame-episodes`` covers 1-frame episodes in its default AV1.

Prints one row per layout, pack and config; exits non-zero if any sample differs or a pack
fails. ``--json PATH`` writes the table (docs/BENCHMARKS.md "LeRobot parity matrix" shows it).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lerobot.configs.video import DepthEncoderConfig, RGBEncoderConfig
from lerobot.datasets import dataset_tools
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from lerobot_shards import PackedDataset, PackedLeRobotDataset
from lerobot_shards.testing import identity_frame

MIN_PSNR_DB = 35.0
STATE, ACTION = "observation.state", "action"


# -- writing datasets with LeRobot ------------------------------------------------------------
def _vid(h: int, w: int) -> dict:
    return {"dtype": "video", "shape": (h, w, 3), "names": ["height", "width", "channels"]}


def _img(h: int, w: int, c: int = 3) -> dict:
    return {"dtype": "image", "shape": (h, w, c), "names": ["height", "width", "channels"]}


def _depth(dtype: str, h: int, w: int) -> dict:
    return {"dtype": dtype, "shape": (h, w, 1), "names": ["height", "width", "channels"], "info": {"is_depth_map": True}}


BASE = {STATE: {"dtype": "float32", "shape": (6,), "names": None}, ACTION: {"dtype": "float32", "shape": (4,), "names": None}}


def _frame_value(key: str, feature: dict, episode: int, j: int, camera: int, rng: np.random.Generator):
    dtype, shape = feature["dtype"], tuple(feature["shape"])
    if dtype in ("video", "image"):
        h, w, c = shape
        if (feature.get("info") or {}).get("is_depth_map") or (c == 1 and feature.get("_uint16")):
            yy, xx = np.mgrid[0:h, 0:w]
            depth = 400 + 30 * xx + 20 * yy + 15 * j + 100 * episode  # millimetres, smooth and moving
            return depth.astype(np.uint16)[..., None]
        frame = identity_frame(episode, j, h, w, camera)
        return frame if c == 3 else frame[..., :1]
    if dtype == "string":
        return f"note {episode}-{j}"
    if dtype == "bool":
        return np.array([j % 3 == 0], dtype=bool).reshape(shape)
    values = rng.normal(size=shape) * 10
    return values.astype(dtype)


def record(
    root: Path,
    features: dict,
    *,
    lengths=(9, 3, 14, 5, 11),
    fps: float = 30,
    use_videos: bool = True,
    tasks=None,
    task_of=None,
    start_episode: int = 0,
    existing: LeRobotDataset | None = None,
    **create,
) -> LeRobotDataset:
    """Record ``lengths`` episodes with LeRobot's writer (or append to ``existing``)."""
    clean = {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")} for k, v in features.items()}
    ds = (
        existing
        if existing is not None
        else LeRobotDataset.create(f"parity/{root.name}", fps=fps, features=clean, root=root, use_videos=use_videos, **create)
    )
    rng = np.random.default_rng(len(lengths) + int(fps))
    tasks = tasks or ["pick the cube", "place it"]
    cameras = [k for k, f in features.items() if f["dtype"] in ("video", "image")]
    for offset, length in enumerate(lengths):
        episode = start_episode + offset
        for j in range(length):
            frame = {k: _frame_value(k, f, episode, j, cameras.index(k) if k in cameras else 0, rng) for k, f in features.items()}
            task = task_of(episode, j) if task_of else tasks[episode % len(tasks)]
            ds.add_frame({**frame, "task": task})
        ds.save_episode()
    ds.finalize()
    return ds


def layouts() -> dict:
    """name -> function(root) writing that layout with LeRobot."""
    two_cams = {**BASE, "observation.images.top": _vid(48, 64), "observation.images.side": _vid(64, 48)}
    one_cam = {**BASE, "observation.images.top": _vid(48, 64)}

    def tools_source(tmp: Path) -> LeRobotDataset:
        record(tmp / "tools-src", two_cams, lengths=(7, 12, 5, 9, 3, 10))
        return LeRobotDataset("parity/tools-src", root=tmp / "tools-src")  # as a user loads it to edit

    def edited(root: Path, edit) -> None:
        with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
            result = edit(Path(tmp), tools_source(Path(tmp)))
            if isinstance(result, dict):
                result = next(iter(result.values()))
            shutil.copytree(result.root, root)

    def resumed(root: Path) -> None:
        record(root, one_cam, lengths=(6, 8))
        for start, lengths in ((2, (5,)), (3, (7, 4))):
            ds = LeRobotDataset.resume(f"parity/{root.name}", root=root)
            record(root, one_cam, lengths=lengths, start_episode=start, existing=ds)

    def tiny_files(root: Path) -> None:
        ds = LeRobotDataset.create(f"parity/{root.name}", fps=30, features=two_cams, root=root, use_videos=True)
        ds.meta.update_chunk_settings(chunks_size=2, data_files_size_in_mb=0.001, video_files_size_in_mb=0.001)
        record(root, two_cams, existing=ds)

    def language(root: Path) -> None:
        import pyarrow.parquet as pq
        from lerobot.annotations.steerable_pipeline.writer import LanguageColumnsWriter, _normalize_event_row, speech_atom
        from lerobot.datasets.io_utils import write_table_one_row_group_per_episode
        from lerobot.datasets.language import language_feature_info

        record(root, one_cam)
        for path in sorted((root / "data").glob("*/*.parquet")):
            table = pq.read_table(path)
            episodes, stamps = table["episode_index"].to_pylist(), table["timestamp"].to_pylist()
            persistent = [
                [
                    {
                        "role": "user",
                        "content": f"plan of episode {e}",
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
                for e in episodes
            ]
            events = [
                [_normalize_event_row(speech_atom(t, f"at {t:.3f} s in {e}"))] if round(t * 30) % 4 == 1 else []
                for e, t in zip(episodes, stamps)
            ]
            new = LanguageColumnsWriter()._materialize_table(table, persistent, events, drop_old=True)
            write_table_one_row_group_per_episode(new, path)
        info = json.loads((root / "meta/info.json").read_text())
        info["features"].update(language_feature_info())
        (root / "meta/info.json").write_text(json.dumps(info, indent=4))

    def converted(root: Path) -> None:
        with tempfile.TemporaryDirectory(dir=root.parent) as tmp:
            source = record(Path(tmp) / "images", {**BASE, "observation.images.top": _img(48, 64)}, use_videos=False)
            dataset_tools.convert_image_to_video_dataset(source, output_dir=root, repo_id=f"parity/{root.name}", num_workers=1)

    def hub_edit(edit, **recorded):
        """A dataset LeRobot's writer made, then changed as Hub repos carry it (issue 54)."""

        def write(root: Path) -> None:
            record(root, one_cam, **recorded)
            edit(root)

        return write

    smooth = lambda i: {"task_of": lambda e, j: ["go left", "go right"][(j // 4) % 2]}  # noqa: E731
    unicode_tasks = [f"tâche {i}: 拾取 cube n°{i} 🤖" for i in range(40)]
    return {
        "av1-default": lambda r: record(r, two_cams),
        "h264": lambda r: record(r, one_cam, rgb_encoder=RGBEncoderConfig(vcodec="h264", g=2)),
        "h264-10bit": lambda r: record(r, one_cam, rgb_encoder=RGBEncoderConfig(vcodec="h264", pix_fmt="yuv420p10le", g=2)),
        "h264-bframes-long-gop": lambda r: record(
            r, one_cam, lengths=(40, 33, 25), rgb_encoder=RGBEncoderConfig(vcodec="h264", g=30, crf=23)
        ),
        "hevc-no-bframes": lambda r: record(
            r, one_cam, rgb_encoder=RGBEncoderConfig(vcodec="hevc", g=2, extra_options={"x265-params": "bframes=0"})
        ),
        "hevc-444-bframes": lambda r: record(
            r, one_cam, lengths=(20, 15, 9), rgb_encoder=RGBEncoderConfig(vcodec="hevc", pix_fmt="yuv444p", g=8)
        ),
        "av1-10bit": lambda r: record(r, one_cam, rgb_encoder=RGBEncoderConfig(pix_fmt="yuv420p10le")),
        "odd-and-portrait": lambda r: record(
            r, {**BASE, "observation.images.odd": _vid(97, 131), "observation.images.portrait": _vid(96, 48)}
        ),
        "fps10": lambda r: record(r, one_cam, fps=10, lengths=(12, 30, 7)),
        "fps50": lambda r: record(r, one_cam, fps=50, lengths=(60, 45, 80)),
        "dtypes": lambda r: record(
            r,
            {
                **one_cam,
                "count": {"dtype": "int64", "shape": (3,), "names": None},
                "flag": {"dtype": "bool", "shape": (1,), "names": None},
                "pose": {"dtype": "float32", "shape": (2, 3), "names": None},
                "note": {"dtype": "string", "shape": (1,), "names": None},
            },
        ),
        "unicode-tasks": lambda r: record(r, one_cam, lengths=(40, 40), task_of=lambda e, j: unicode_tasks[(e * 40 + j) % 40]),
        "one-frame-episodes": lambda r: record(r, one_cam, lengths=(1, 1, 3, 1)),
        "tiny-files": tiny_files,
        "resumed-twice": resumed,
        "streaming-encoding": lambda r: record(r, two_cams, streaming_encoding=True),
        "tasks-in-episode": lambda r: record(r, one_cam, **smooth(0)),
        "images-only": lambda r: record(r, {**BASE, "observation.images.top": _img(48, 64)}, use_videos=False),
        "video-and-image": lambda r: record(
            r, {**BASE, "observation.images.top": _vid(48, 64), "observation.images.wrist": _img(32, 40)}
        ),
        "depth-video": lambda r: record(r, {**one_cam, "observation.depth": _depth("video", 48, 64)}),
        "depth-video-linear-m": lambda r: record(
            r,
            {**one_cam, "observation.depth": _depth("video", 48, 64)},
            depth_encoder=DepthEncoderConfig(use_log=False, depth_min=0.2, depth_max=4.0),
        ),
        "depth-image": lambda r: record(r, {**BASE, "observation.depth": _depth("image", 48, 64)}, use_videos=False),
        "gray16-image": lambda r: record(
            r, {**BASE, "observation.images.ir": {**_img(48, 64, 1), "_uint16": True}}, use_videos=False
        ),
        "one-episode-per-file": lambda r: record(r, two_cams, video_files_size_in_mb=0.0001, data_files_size_in_mb=0.0001),
        "edit-delete-episodes": lambda r: edited(r, lambda t, d: dataset_tools.delete_episodes(d, [1, 3], output_dir=t / "out")),
        "edit-split": lambda r: edited(
            r, lambda t, d: dataset_tools.split_dataset(d, {"train": [0, 2, 5], "val": [1, 3, 4]}, output_dir=t / "out")
        ),
        "edit-merge": lambda r: edited(
            r,
            lambda t, d: dataset_tools.merge_datasets(
                [d, record(t / "second", two_cams, lengths=(4, 6))], output_repo_id="parity/merged", output_dir=t / "out"
            ),
        ),
        "edit-add-remove-features": lambda r: edited(
            r,
            lambda t, d: dataset_tools.modify_features(
                d,
                add_features={
                    "reward": (
                        np.arange(d.meta.total_frames, dtype=np.float32).reshape(-1, 1),
                        {"dtype": "float32", "shape": (1,), "names": None},
                    )
                },
                remove_features=["observation.images.side"],
                output_dir=t / "out",
            ),
        ),
        "edit-modify-tasks": lambda r: edited(
            r, lambda t, d: dataset_tools.modify_tasks(d, episode_tasks={0: "first", 2: "third"})
        ),
        "edit-reencode": lambda r: edited(
            r, lambda t, d: dataset_tools.reencode_dataset(d, rgb_encoder=RGBEncoderConfig(vcodec="h264", g=4), num_workers=1)
        ),
        "convert-images-to-video": converted,
        "language-annotations": language,
        # Issue 54: datasets as the Hub holds them, which LeRobot 0.6.1 reads.
        "lerobot-0.4-tasks-file": hub_edit(tasks_as_lerobot_04),
        "lerobot-0.4.4-writer": written_by_lerobot_044,
        "version-3.0-without-v": hub_edit(lambda r: edit_info(r, codebase_version="3.0")),
        "fps-as-float": hub_edit(lambda r: edit_info(r, fps=30.0)),
        "declared-types-cast": hub_edit(stored_as_other_types),
        "swapped-timestamps": hub_edit(swap_timestamps),
        "camera-at-60-under-30": hub_edit(rows_at_half_rate, fps=60, lengths=(18, 10, 24)),
        "mpeg4-camera": hub_edit(lambda r: reencode_videos(r, "mpeg4")),
        # LeRobot 0.6.1's writer cannot encode at 29.97 (its encoder wants an int rate): the
        # dataset is written at 30 and re-timed as an NTSC recording converted to v3 carries it.
        "ntsc-29.97": hub_edit(as_ntsc, lengths=(40, 25, 33)),
    }


# -- what Hub repos carry: edits of a dataset LeRobot wrote (issue 54) ------------------------
# Packs that copy mode must refuse, with the words that name the fix: the re-encodes pack them.
COPY_REFUSED = {"mpeg4-camera": "Pack with --video h264"}


def written_by_lerobot_044(root: Path) -> None:
    """A dataset recorded by LeRobot 0.4.4's own writer (``scripts/parity_writer_044.py`` in
    ``.venv-lerobot044``, which ``scripts/parity_setup.sh`` makes), read here by LeRobot 0.6.1."""
    python = ROOT / ".venv-lerobot044" / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"{python} is missing: run `bash scripts/parity_setup.sh` (it installs LeRobot 0.4.4 beside 0.6.1)")
    done = subprocess.run(
        [str(python), str(ROOT / "scripts" / "parity_writer_044.py"), str(root)], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode or "recorded with lerobot 0.4.4" not in done.stdout:
        raise RuntimeError(f"LeRobot 0.4.4's writer failed ({done.returncode}): {(done.stderr or done.stdout)[-600:]}")


def edit_info(root: Path, **fields) -> None:
    path = root / "meta/info.json"
    info = json.loads(path.read_text())
    info.update(fields)
    path.write_text(json.dumps(info, indent=4))


def _data_files(root: Path) -> list[Path]:
    return sorted((root / "data").glob("*/*.parquet"))


def _put(table, name: str, values):
    return table.set_column(table.schema.get_field_index(name), name, values)


def tasks_as_lerobot_04(root: Path) -> None:
    """meta/tasks.parquet as LeRobot 0.4.0-0.4.4 wrote it: a DataFrame with an unnamed index
    (columns task_index and __index_level_0__)."""
    import pandas as pd

    tasks = pd.read_parquet(root / "meta/tasks.parquet")
    pd.DataFrame({"task_index": tasks["task_index"].to_numpy()}, index=list(tasks.index)).to_parquet(root / "meta/tasks.parquet")


def stored_as_other_types(root: Path) -> None:
    """A recording script's column types: the action as float64 lists, timestamps as float64
    (LeRobot casts both to their declared float32 when it loads the data)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for path in _data_files(root):
        table = pq.read_table(path)
        table = _put(table, ACTION, table[ACTION].cast(pa.list_(pa.float64())))
        table = _put(table, "timestamp", table["timestamp"].cast(pa.float64()))
        pq.write_table(table.replace_schema_metadata(None), path)


def swap_timestamps(root: Path) -> None:
    """Rows 1 and 2 of episode 0 with each other's timestamps: LeRobot gives each the other's frame."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = _data_files(root)[0]
    table = pq.read_table(path)
    stamps = table["timestamp"].to_pylist()
    stamps[1], stamps[2] = stamps[2], stamps[1]
    pq.write_table(_put(table, "timestamp", pa.array(stamps, table["timestamp"].type)), path)


def rows_at_half_rate(root: Path) -> None:
    """A camera recorded at its native 60 fps under a 30 fps dataset: every other row of a 60 fps
    recording dropped, the rest re-timed at 1/30 s; videos and their windows untouched."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    lengths: dict[int, int] = {}
    tables = {}
    for path in _data_files(root):
        table = pq.read_table(path)
        table = table.filter(pc.equal(pc.bit_wise_and(table["frame_index"], 1), 0))
        frames = pc.divide(table["frame_index"], 2)
        table = _put(table, "frame_index", frames)
        table = _put(table, "timestamp", pc.divide(frames.cast(pa.float64()), 30.0).cast(table["timestamp"].type))
        for e in table["episode_index"].to_pylist():
            lengths[e] = lengths.get(e, 0) + 1
        tables[path] = table
    starts, at = {}, 0
    for e in sorted(lengths):
        starts[e], at = at, at + lengths[e]
    for path, table in tables.items():
        index = [starts[e] + f for e, f in zip(table["episode_index"].to_pylist(), table["frame_index"].to_pylist())]
        pq.write_table(_put(table, "index", pa.array(index, pa.int64())), path)
    for path in sorted((root / "meta/episodes").glob("*/*.parquet")):
        table = pq.read_table(path)
        es = table["episode_index"].to_pylist()
        table = _put(table, "length", pa.array([lengths[e] for e in es], pa.int64()))
        table = _put(table, "dataset_from_index", pa.array([starts[e] for e in es], pa.int64()))
        table = _put(table, "dataset_to_index", pa.array([starts[e] + lengths[e] for e in es], pa.int64()))
        pq.write_table(table, path)
    edit_info(root, fps=30, total_frames=sum(lengths.values()))


def as_ntsc(root: Path) -> None:
    """An NTSC recording: fps 29.97 in info.json, rows at k / 29.97 s, videos at 30000/1001
    (time base 1001/30000) with each episode's window in the video's own time."""
    from fractions import Fraction

    import pyarrow as pa
    import pyarrow.parquet as pq

    rate = Fraction(30000, 1001)
    reencode_videos(root, "libsvtav1", rate=rate)
    for path in _data_files(root):
        table = pq.read_table(path)
        stamps = pa.array([f / 29.97 for f in table["frame_index"].to_pylist()], pa.float32())
        pq.write_table(_put(table, "timestamp", stamps), path)
    for path in sorted((root / "meta/episodes").glob("*/*.parquet")):
        table = pq.read_table(path)
        keys = [c.split("/")[1] for c in table.column_names if c.startswith("videos/") and c.endswith("/from_timestamp")]
        for key in keys:
            files = list(zip(table[f"videos/{key}/chunk_index"].to_pylist(), table[f"videos/{key}/file_index"].to_pylist()))
            frames_before: dict = {}
            starts, ends = [], []
            for file, length in zip(files, table["length"].to_pylist()):
                first = frames_before.get(file, 0)
                starts.append(float(first / rate))
                ends.append(float((first + length) / rate))
                frames_before[file] = first + length
            table = _put(table, f"videos/{key}/from_timestamp", pa.array(starts, pa.float64()))
            table = _put(table, f"videos/{key}/to_timestamp", pa.array(ends, pa.float64()))
        pq.write_table(table, path)
    info = json.loads((root / "meta/info.json").read_text())
    info["fps"] = 29.97
    for feature in info["features"].values():
        if feature["dtype"] == "video":
            feature.setdefault("info", {})["video.fps"] = 29.97
    (root / "meta/info.json").write_text(json.dumps(info, indent=4))


def reencode_videos(root: Path, codec: str, *, rate=None) -> None:
    """Every mp4 rewritten in ``codec`` frame for frame (OpenCV's mp4v writer is MPEG-4 Part 2),
    at its own rate or ``rate``."""
    from fractions import Fraction

    import av

    for path in sorted(root.glob("videos/*/*/*.mp4")):
        with av.open(str(path)) as container:
            rate = rate or container.streams.video[0].average_rate
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        staged = path.with_suffix(".new.mp4")
        with av.open(str(staged), "w") as out:
            stream = out.add_stream(codec, rate=rate)
            stream.height, stream.width = frames[0].shape[:2]
            stream.pix_fmt = "yuv420p"
            stream.codec_context.time_base = 1 / Fraction(rate)
            stream.options = {"qscale": "2"}
            for pts, pixels in enumerate(frames):
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
                frame.pts = pts
                out.mux(stream.encode(frame))
            out.mux(stream.encode())
        staged.replace(path)


# -- comparing --------------------------------------------------------------------------------
def psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    if a.is_floating_point() and a.max() <= 1.0:
        a, b = a * 255, b * 255
    mse = float(((a - b) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def compare(expected: dict, actual: dict, *, lossy_keys: set[str], pictures: set[str], where: str) -> float:
    """Raise AssertionError at the first difference; returns the lowest PSNR of ``lossy_keys``."""
    if set(expected) != set(actual):
        raise AssertionError(
            f"{where}: keys differ: only LeRobot {sorted(set(expected) - set(actual))}, "
            f"only ours {sorted(set(actual) - set(expected))}"
        )
    lowest = math.inf
    for key, value in expected.items():
        other = actual[key]
        if key in pictures and isinstance(other, torch.Tensor) and other.dtype == torch.uint8 and value.dtype == torch.float32:
            other = other.to(torch.float32).div(255)  # our uint8 pictures; LeRobot returns them float32 always
        if isinstance(value, torch.Tensor):
            if not isinstance(other, torch.Tensor) or value.shape != other.shape or value.dtype != other.dtype:
                found = (tuple(other.shape), other.dtype) if isinstance(other, torch.Tensor) else type(other).__name__
                raise AssertionError(f"{where}: {key}: LeRobot {tuple(value.shape)} {value.dtype}, ours {found}")
            if key in lossy_keys:
                lowest = min(lowest, psnr(value, other))
            elif not torch.equal(value, other):
                diff = (value.double() - other.double()).abs().max().item()
                raise AssertionError(f"{where}: {key}: values differ (max abs diff {diff})")
        elif value != other:
            raise AssertionError(f"{where}: {key}: LeRobot {str(value)[:200]!r} != ours {str(other)[:200]!r}")
    return lowest


def windows(features: dict, fps: int) -> dict:
    cams = [k for k, f in features.items() if f["dtype"] in ("video", "image")]
    delta = {k: [-1 / fps, 0.0] for k in cams}
    delta[ACTION] = [i / fps for i in range(4)]
    if STATE in features:
        delta[STATE] = [i / fps for i in (-10, -5, 0)]
    return delta


def check(source: Path, pack: Path, mode: str) -> list[dict]:
    meta = json.loads((source / "meta/info.json").read_text())
    fps = meta["fps"]
    rgb_videos = {
        k for k, f in meta["features"].items() if f["dtype"] == "video" and not (f.get("info") or {}).get("is_depth_map")
    }
    pictures = {k for k, f in meta["features"].items() if f["dtype"] == "image"}
    reencoded = set(json.loads((pack / "manifest.json").read_text())["extra"]["reencoded_episodes"])
    rows = []
    for config, delta, uint8 in (
        ("single", None, True),
        ("windowed", windows(meta["features"], fps), True),
        ("float", windows(meta["features"], fps), False),
    ):
        lerobot = LeRobotDataset(f"parity/{source.name}", root=source, delta_timestamps=delta, return_uint8=uint8)
        ours = PackedDataset(str(pack), shuffle=False, delta_timestamps=delta, return_uint8=uint8)
        compared = lerobot_errors = 0
        lowest = math.inf
        for sample in ours:
            index = int(sample["index"])
            try:
                expected = lerobot[index]
            except Exception:
                lerobot_errors += 1
                continue
            lossy = rgb_videos if int(sample["episode_index"]) in reencoded else set()
            lowest = min(
                lowest,
                compare(expected, sample, lossy_keys=lossy, pictures=pictures, where=f"{pack.name} {config} index {index}"),
            )
            compared += 1
        if compared + lerobot_errors != len(lerobot):
            raise AssertionError(f"{pack.name} {config}: {compared + lerobot_errors} samples, LeRobot has {len(lerobot)}")
        rows.append(_row(config, compared, lerobot_errors, lowest))
    rows.append(check_random_access(source, pack, meta, rgb_videos, pictures, reencoded))
    return rows


def _row(config: str, compared: int, lerobot_errors: int, lowest: float) -> dict:
    if lowest < MIN_PSNR_DB:
        raise AssertionError(f"{config}: a re-encoded frame at {lowest:.1f} dB (< {MIN_PSNR_DB})")
    return {
        "config": config,
        "compared": compared,
        "differing": 0,
        "lerobot_errors": lerobot_errors,
        "min_psnr_db": None if math.isinf(lowest) else round(lowest, 2),
    }


def check_random_access(source: Path, pack: Path, meta: dict, rgb_videos: set, pictures: set, reencoded: set) -> dict:
    """``PackedLeRobotDataset`` against ``LeRobotDataset`` position for position (issue 66): every
    other episode selected (LeRobot's relative positions, absolute ``index``), windows, uint8,
    read in shuffled batches of 16 through ``__getitems__``."""
    episodes = list(range(0, int(meta["total_episodes"]), 2))
    delta = windows(meta["features"], meta["fps"])
    lerobot = LeRobotDataset(f"parity/{source.name}", root=source, episodes=episodes, delta_timestamps=delta, return_uint8=True)
    ours = PackedLeRobotDataset(str(pack), episodes=episodes, delta_timestamps=delta, return_uint8=True)
    if len(ours) != len(lerobot) or ours.num_episodes != lerobot.num_episodes:
        raise AssertionError(f"{pack.name} random: {len(ours)} frames of {ours.num_episodes} episodes, LeRobot {len(lerobot)}")
    order = np.random.default_rng(0).permutation(len(ours)).tolist()
    compared = lerobot_errors = 0
    lowest = math.inf
    for start in range(0, len(order), 16):
        batch = order[start : start + 16]
        for position, sample in zip(batch, ours.__getitems__(batch)):
            try:
                expected = lerobot[position]
            except Exception:
                lerobot_errors += 1
                continue
            lossy = rgb_videos if int(sample["episode_index"]) in reencoded else set()
            where = f"{pack.name} random ds[{position}]"
            lowest = min(lowest, compare(expected, sample, lossy_keys=lossy, pictures=pictures, where=where))
            compared += 1
    return _row("random", compared, lerobot_errors, lowest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="layout names to run (default: all)")
    parser.add_argument("--json", type=Path, help="write the table here")
    parser.add_argument("--keep", type=Path, help="keep datasets and packs under this folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="parity-matrix-")) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    table, failures = [], []
    for name, write in layouts().items():
        if args.only and name not in args.only:
            continue
        source = work / name
        started = time.perf_counter()
        try:
            if not source.exists():
                partial = work / f"{name}.writing"  # renamed when complete: a failed write is redone
                shutil.rmtree(partial, ignore_errors=True)
                write(partial)
                partial.rename(source)
            info = json.loads((source / "meta/info.json").read_text())
            has_video = any(f["dtype"] == "video" for f in info["features"].values())
            for mode in ("copy", "hevc") if has_video else ("copy",):
                pack = work / f"{name}.{mode}"
                shutil.rmtree(pack, ignore_errors=True)
                # The CLI in its own process, as a user runs it (a crash of one layout ends only it).
                done = subprocess.run(
                    [sys.executable, "-m", "lerobot_shards.cli", "pack", str(source), str(pack), "--video", mode],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                )
                if mode == "copy" and name in COPY_REFUSED:
                    said = done.stdout + done.stderr
                    if done.returncode != 1 or COPY_REFUSED[name] not in said or "Traceback" in said:
                        raise RuntimeError(f"copy mode was to be refused with {COPY_REFUSED[name]!r}: {said[-600:]}")
                    print(f"{name:26s} copy  refused as expected: {COPY_REFUSED[name]}", flush=True)
                    continue
                if done.returncode:
                    raise RuntimeError(f"pack --video {mode} exited {done.returncode}: {(done.stderr or done.stdout)[-600:]}")
                manifest = json.loads((pack / "manifest.json").read_text())
                for row in check(source, pack, mode):
                    row.update(
                        layout=name,
                        pack=mode,
                        reencoded=len(manifest["extra"]["reencoded_episodes"]),
                        episodes=manifest["totals"]["episodes"],
                    )
                    table.append(row)
                    print(
                        f"{name:26s} {mode:5s} {row['config']:9s} compared {row['compared']:4d} differing 0 "
                        f"lerobot-errors {row['lerobot_errors']:3d}"
                        + (f" min {row['min_psnr_db']} dB" if row["min_psnr_db"] is not None else ""),
                        flush=True,
                    )
        except Exception as err:
            failures.append((name, err))
            print(f"{name:26s} FAILED: {type(err).__name__}: {str(err)[:400]}", flush=True)
            traceback.print_exc(limit=4)
        print(f"{'':26s} ({time.perf_counter() - started:.1f} s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rows": table, "failures": [[n, str(e)] for n, e in failures]}, indent=1))
    if failures:
        print(f"\n{len(failures)} layouts failed: {[n for n, _ in failures]}")
        return 1
    print(f"\nparity matrix: {len(table)} rows, {sum(r['compared'] for r in table)} samples compared, 0 differing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
