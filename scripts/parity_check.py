"""Opt-in parity harness (``make parity``): LeRobot 0.6.1 itself is the oracle.

Runs in ``.venv-parity`` (Python 3.12, ``lerobot[dataset]==0.6.1``), never in CI. Checks:
1. our test oracle (``tests/lerobot_reference.py``) equals ``LeRobotDataset`` on a dataset
   written by our generator, sample for sample, with and without windows;
2. ``PackedDataset`` over a copy-mode pack equals ``LeRobotDataset`` on a dataset
   written by *LeRobot's own writer* (``LeRobotDataset.create`` / ``add_frame`` /
   ``save_episode``), and on the generator's dataset, for every anchor;
3. ``PackedDataset.meta`` equals ``LeRobotDatasetMetadata`` built from the same pack (its
   ``meta/`` is the source's): fps, features, stats, keys, shapes, totals, tasks, robot type;
4. LeRobot's ACT policy trains on the LeRobot-written pack through ``scripts/train_lerobot_policy.py``
   (``make_policy(cfg, ds_meta=ds.meta)``): every loss finite, and falling over 40 steps.
Exits non-zero on the first mismatch, naming the index and key.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from lerobot.datasets.lerobot_dataset import LeRobotDataset

from lerobot_shards import PackedDataset, pack_dataset
from lerobot_shards.testing import rollover_spec, write_sample_dataset
from tests.lerobot_reference import reference_item

WINDOWS = [
    None,
    {"action": [-0.1, 0.0, 0.1, 0.2], "observation.images.top": [-1 / 30, 0.0, 1 / 30]},
    {"observation.state": [i / 30 for i in range(-120, 121, 40)], "observation.images.wrist": [0.0]},
]


def assert_same(expected: dict, actual: dict, where: str) -> None:
    if set(expected) != set(actual):
        raise AssertionError(
            f"{where}: keys differ: only LeRobot {set(expected) - set(actual)}, only ours {set(actual) - set(expected)}"
        )
    for key, value in expected.items():
        other = actual[key]
        if isinstance(value, str):
            if value != other:
                raise AssertionError(f"{where}: {key}: {value!r} != {other!r}")
            continue
        if value.shape != other.shape or value.dtype != other.dtype:
            raise AssertionError(
                f"{where}: {key}: shape/dtype {tuple(value.shape)} {value.dtype} != {tuple(other.shape)} {other.dtype}"
            )
        if not torch.equal(value, other):
            diff = (value.double() - other.double()).abs().max().item()
            raise AssertionError(f"{where}: {key}: values differ (max abs diff {diff})")


def write_with_lerobot(root: Path) -> None:
    """A small dataset written by LeRobot's own writer (AV1 video, several episodes)."""
    features = {
        "observation.state": {"dtype": "float32", "shape": (4,), "names": None},
        "action": {"dtype": "float32", "shape": (3,), "names": None},
        "observation.images.cam": {"dtype": "video", "shape": (48, 64, 3), "names": ["height", "width", "channels"]},
    }
    ds = LeRobotDataset.create("local/parity", fps=30, features=features, root=root, use_videos=True)
    rng = np.random.default_rng(0)
    from lerobot_shards.testing import identity_frame

    for episode, length in enumerate([5, 1, 23, 2, 11]):
        for j in range(length):
            ds.add_frame(
                {
                    "observation.state": rng.normal(size=4).astype(np.float32),
                    "action": rng.normal(size=3).astype(np.float32),
                    "observation.images.cam": identity_frame(episode, j, 48, 64),
                    "task": ["wave", "grasp"][episode % 2],
                }
            )
        ds.save_episode()
    ds.finalize()


def compare_reader(source: Path, packed: Path, name: str) -> int:
    checked = 0
    for window in WINDOWS:
        if window is not None:
            window = {k: v for k, v in window.items() if k in LeRobotDataset("local/x", root=source).meta.features}
        lerobot = LeRobotDataset("local/x", root=source, delta_timestamps=window or None)
        ours = PackedDataset(str(packed), delta_timestamps=window or None, shuffle=False)
        by_index = {int(sample["index"]): sample for sample in ours}
        for i in range(len(lerobot)):
            expected = lerobot[i]
            assert_same(expected, by_index[int(expected["index"])], f"{name} window={window} index={int(expected['index'])}")
            checked += 1
    return checked


def compare_meta(packed: Path, name: str) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata

    theirs = LeRobotDatasetMetadata("local/x", root=packed)
    mine = PackedDataset(str(packed)).meta
    for field in (
        "fps",
        "features",
        "robot_type",
        "total_episodes",
        "total_frames",
        "camera_keys",
        "video_keys",
        "image_keys",
        "shapes",
        "names",
    ):
        if getattr(theirs, field) != getattr(mine, field):
            raise AssertionError(f"{name}: meta.{field} differs: {getattr(theirs, field)!r} != {getattr(mine, field)!r}")
    if not theirs.tasks.equals(mine.tasks):
        raise AssertionError(f"{name}: meta.tasks differs:\n{theirs.tasks}\n{mine.tasks}")
    if set(theirs.stats) != set(mine.stats):
        raise AssertionError(f"{name}: meta.stats features differ")
    for feature, stats in theirs.stats.items():
        for statistic, value in stats.items():
            if not np.array_equal(value, mine.stats[feature][statistic]) or value.shape != mine.stats[feature][statistic].shape:
                raise AssertionError(f"{name}: meta.stats[{feature!r}][{statistic!r}] differs")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="lerobot-parity-"))
    try:
        generated = work / "generated"
        write_sample_dataset(generated, rollover_spec())
        oracle_checked = 0
        for window in WINDOWS:
            lerobot = LeRobotDataset("local/generated", root=generated, delta_timestamps=window)
            for i in range(len(lerobot)):
                expected = lerobot[i]
                actual = reference_item(generated, int(expected["index"]), window)
                assert_same(expected, actual, f"oracle window={window} index={i}")
                oracle_checked += 1
        print(f"[parity] test oracle == LeRobotDataset on {oracle_checked} samples")

        written = work / "lerobot-written"
        write_with_lerobot(written)
        written_checked = 0
        for window in (None, {"action": [-0.1, 0.0, 0.1], "observation.images.cam": [0.0, 1 / 30]}):
            lerobot = LeRobotDataset("local/written", root=written, delta_timestamps=window)
            for i in range(len(lerobot)):
                expected = lerobot[i]
                assert_same(
                    expected,
                    reference_item(written, int(expected["index"]), window),
                    f"oracle on LeRobot-written window={window} index={i}",
                )
                written_checked += 1
        print(f"[parity] test oracle == LeRobotDataset on {written_checked} samples of a LeRobot-written dataset")
        total = 0
        for source, name in ((written, "lerobot-writer"), (generated, "generator")):
            packed = work / f"{name}-packed"
            pack_dataset(str(source), str(packed), video="copy")
            total += compare_reader(source, packed, name)
            compare_meta(packed, name)
        print(f"[parity] PackedDataset == LeRobotDataset on {total} samples (copy mode, bit-exact)")
        print("[parity] PackedDataset.meta == LeRobotDatasetMetadata on both packs")
        from train_lerobot_policy import main as train_policy

        code = train_policy(
            ["--data", str(work / "lerobot-writer-packed"), "--steps", "40", "--batch-size", "4", "--require-fall"]
        )
        if code != 0:
            raise AssertionError(f"ACT on the packed dataset: exit {code} (1: a loss was not finite, 2: the loss did not fall)")
        print("[parity] LeRobot ACT trains on PackedDataset + BatchLoader: losses finite and falling")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
