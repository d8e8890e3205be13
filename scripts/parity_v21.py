"""Opt-in parity of LeRobot v2.1 sources (``make parity``, issue 67): a v2.1 dataset packed
directly reads as LeRobot 0.6.1 reads its own converter's output of the same dataset.

Runs in ``.venv-parity`` (Python 3.12, ``lerobot[dataset]==0.6.1``), never in CI. Each layout is
recorded by LeRobot 0.3.3's own v2.1 writer (``scripts/parity_writer_033.py`` in
``.venv-lerobot033``), copied, and the copy converted by LeRobot 0.6.1's converter
(``python -m lerobot.scripts.convert_dataset_v21_to_v30 --root COPY --push-to-hub=false``). The
v2.1 original is packed in copy mode (each episode's mp4 stream-copied, nothing concatenated),
and every position of ``PackedLeRobotDataset`` is compared with ``LeRobotDataset[i]`` on the
converted copy: single frames and windows (pads at both ends), ``meta.stats`` (aggregated from
``episodes_stats.jsonl`` as the converter does), ``meta.total_episodes``/``total_frames`` and
the task strings. Layouts: 1 and 3 cameras, an image feature beside a camera, 30 and 15 fps, an
episode selection (``--episodes``), and the v2.1 quirk the converter cannot take (no
``episodes_stats.jsonl``: the pack says so and keeps no statistics; its samples are unchanged).

Exits non-zero at the first difference, naming the layout, position and key. Arguments, when
given, name the layouts to run (``episode-selection``, ``no-episode-stats``, ...).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lerobot.datasets.lerobot_dataset import LeRobotDataset
from parity_random_access import compare_all

from lerobot_shards import PackedLeRobotDataset, pack_dataset

WRITER = ROOT / ".venv-lerobot033" / "bin" / "python"
TOP, WRIST, SIDE, STILL = (f"observation.images.{n}" for n in ("top", "wrist", "side", "still"))

# name: (writer spec, episodes to pack or None, delta_timestamps in frames of the layout's fps)
LAYOUTS = {
    "1-camera-30fps": ({"fps": 30, "lengths": [9, 1, 14, 4], "cameras": {TOP: [48, 64]}, "seed": 0}, None),
    "3-cameras-15fps": (
        {"fps": 15, "lengths": [6, 11, 3], "cameras": {TOP: [48, 64], WRIST: [32, 32], SIDE: [64, 48]}, "seed": 1},
        None,
    ),
    "image-and-camera": (
        {"fps": 30, "lengths": [5, 8, 2], "cameras": {TOP: [48, 64]}, "images": {STILL: [24, 32]}, "seed": 2},
        None,
    ),
    "episode-selection": ({"fps": 30, "lengths": [7, 3, 12, 5, 9], "cameras": {TOP: [48, 64]}, "seed": 3}, [3, 0, 4]),
}


def window(spec: dict) -> dict[str, list[float]]:
    fps = spec["fps"]
    keys = {"action": [-2, 0, 1, 3], "observation.state": [-1, 0]}
    for key in spec.get("cameras", {}):
        keys[key] = [-1, 0, 2]
    return {key: [offset / fps for offset in offsets] for key, offsets in keys.items()}


def record(root: Path, spec: dict) -> None:
    subprocess.run(
        [str(WRITER), str(ROOT / "scripts" / "parity_writer_033.py"), str(root), json.dumps(spec)],
        check=True,
        capture_output=True,
    )


def convert(v21: Path, converted: Path) -> None:
    """LeRobot 0.6.1's converter on a copy (it moves the original aside, so never on ``v21``)."""
    shutil.copytree(v21, converted)
    command = [
        sys.executable,
        "-m",
        "lerobot.scripts.convert_dataset_v21_to_v30",
        "--repo-id",
        "parity/v21",
        "--root",
        str(converted),
        "--push-to-hub=false",
    ]
    done = subprocess.run(command, capture_output=True, text=True, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    if done.returncode != 0:
        raise RuntimeError(f"LeRobot's converter failed on {converted}: {done.stderr[-800:]}")


def same_meta(lerobot: LeRobotDataset, ours: PackedLeRobotDataset, name: str) -> None:
    """``meta`` of the pack against LeRobot's of the converted copy: totals (of the episodes the
    pack holds: a selection packs only those), fps, tasks and the statistics (the converter's,
    of every episode, whatever was selected)."""
    theirs, mine = lerobot.meta, ours.meta
    totals = (lerobot.num_episodes, lerobot.num_frames, theirs.fps)
    if totals != (mine.total_episodes, mine.total_frames, mine.fps):
        raise AssertionError(f"{name}: totals/fps {totals} != {mine.total_episodes, mine.total_frames, mine.fps}")
    if list(theirs.tasks.index) != [mine.task_names[i] for i in sorted(mine.task_names)]:
        raise AssertionError(f"{name}: tasks {list(theirs.tasks.index)} != {mine.task_names}")
    if set(theirs.stats) != set(mine.stats):
        raise AssertionError(f"{name}: stats keys differ: {set(theirs.stats) ^ set(mine.stats)}")
    for key, stats in theirs.stats.items():
        for stat, value in stats.items():
            if not np.array_equal(np.asarray(value), np.asarray(mine.stats[key][stat])):
                raise AssertionError(f"{name}: stats {key}/{stat} differ: {value} != {mine.stats[key][stat]}")


def layout(work: Path, name: str, spec: dict, episodes: list[int] | None) -> int:
    v21, converted, pack = work / f"{name}.v21", work / f"{name}.v30", work / f"{name}.packed"
    record(v21, spec)
    convert(v21, converted)
    pack_dataset(str(v21), str(pack), video="copy", episodes=episodes)
    compared = 0
    for face, kwargs in {"single": {}, "windows": {"delta_timestamps": window(spec)}, "uint8": {"return_uint8": True}}.items():
        lerobot = LeRobotDataset("parity/v21", root=converted, episodes=episodes, **kwargs)
        ours = PackedLeRobotDataset(str(pack), episodes=episodes, **kwargs)
        compared += compare_all(lerobot, ours, f"{name} {face}")
        if face == "single":
            same_meta(lerobot, ours, name)
    return compared


def without_episode_stats(work: Path) -> int:
    """No ``episodes_stats.jsonl``: the converter stops; the pack is made, says why its
    statistics are empty, and its samples are those of the dataset with the file."""
    name, (spec, _) = "1-camera-30fps", LAYOUTS["1-camera-30fps"]
    bare = work / "no-episode-stats.v21"
    shutil.copytree(work / f"{name}.v21", bare)
    (bare / "meta" / "episodes_stats.jsonl").unlink()
    try:
        convert(bare, work / "no-episode-stats.v30")
    except RuntimeError:
        pass
    else:
        raise AssertionError("LeRobot's converter took a v2.1 dataset without episodes_stats.jsonl: the quirk is gone")
    from lerobot_shards import check_dataset

    said = "\n".join(f.message for f in check_dataset(str(bare)).findings)
    if "episodes_stats.jsonl: missing" not in said:
        raise AssertionError(f"check does not say the statistics are missing: {said}")
    pack = work / "no-episode-stats.packed"
    pack_dataset(str(bare), str(pack), video="copy")
    ours = PackedLeRobotDataset(str(pack), delta_timestamps=window(spec))
    if ours.meta.stats:
        raise AssertionError(f"statistics from nowhere: {list(ours.meta.stats)}")
    return compare_all(
        LeRobotDataset("parity/v21", root=work / f"{name}.v30", delta_timestamps=window(spec)), ours, "no-episode-stats"
    )


def main() -> None:
    if not WRITER.exists():
        raise SystemExit(f"{WRITER} is missing: run scripts/parity_setup.sh (it installs LeRobot 0.3.3 beside 0.6.1)")
    work = Path(tempfile.mkdtemp(prefix="parity-v21-"))
    try:
        only = sys.argv[1:]  # layout names to run (default: all)
        for name, (spec, episodes) in LAYOUTS.items():
            if only and name not in only and not (name == "1-camera-30fps" and "no-episode-stats" in only):
                continue
            count = layout(work, name, spec, episodes)
            print(f"[parity] v2.1 {name}: {count} positions == LeRobot 0.6.1 on its converter's output", flush=True)
        print(
            f"[parity] v2.1 without episodes_stats.jsonl: converter refuses, pack says so, {without_episode_stats(work)} positions equal"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
