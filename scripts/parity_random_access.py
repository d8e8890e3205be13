"""Opt-in parity of the map-style face (``make parity``, issue 66): ``PackedLeRobotDataset`` and
the registry reader against LeRobot 0.6.1 itself.

Runs in ``.venv-parity`` (Python 3.12, ``lerobot[dataset]==0.6.1``), never in CI. On a dataset
written by LeRobot's own writer (two cameras, 7 episodes of different lengths), packed in copy
mode, every position is compared with ``LeRobotDataset[i]`` for:

1. ``single`` and ``windows`` (pads at both ends), ``return_uint8`` both ways;
2. ``image_transforms`` (a deterministic transform, given to both);
3. an episode selection given out of order (LeRobot's relative positions, absolute ``index``,
   ``absolute_to_relative_idx``, ``episodes``, ``num_episodes``);
4. a mixture of two LeRobot-written datasets against each dataset's own ``LeRobotDataset``;
5. the registry reader, built exactly as LeRobot main's ``make_dataset_reader`` builds one, with
   the ``LeRobotDatasetMetadata`` LeRobot 0.6.1 reads from the pack's own ``meta/`` (LeRobot 0.6.1
   has no registry: the module is driven as the PRs state; ``get_item``/``get_items``);
6. LeRobot's own ``EpisodeAwareSampler`` (``drop_n_last_frames``, shuffle, the selection) built
   over our dataset yields the indices it yields over LeRobot's, and LeRobot's DataLoader set-up
   (spawn, 2 persistent workers) gives the same batches from both.

Exits non-zero at the first difference, naming the position and key.
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

from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata
from lerobot.datasets.sampler import EpisodeAwareSampler
from parity_check import assert_same

from lerobot_shards import PackedLeRobotDataset, pack_dataset
from lerobot_shards.testing import identity_frame

LENGTHS = (7, 1, 19, 3, 12, 2, 9)
WINDOW = {"action": [-0.1, 0.0, 1 / 30, 0.2], "observation.images.cam": [-1 / 30, 0.0], "observation.state": [-2 / 30, 0.0]}


def write(root: Path, seed: int) -> None:
    """A LeRobot-written dataset: two cameras (one portrait), state, action, two tasks."""
    features = {
        "observation.state": {"dtype": "float32", "shape": (4,), "names": None},
        "action": {"dtype": "float32", "shape": (3,), "names": None},
        "observation.images.cam": {"dtype": "video", "shape": (48, 64, 3), "names": ["height", "width", "channels"]},
        "observation.images.wrist": {"dtype": "video", "shape": (64, 32, 3), "names": ["height", "width", "channels"]},
    }
    ds = LeRobotDataset.create(f"local/random-{seed}", fps=30, features=features, root=root, use_videos=True)
    rng = np.random.default_rng(seed)
    for episode, length in enumerate(LENGTHS):
        for j in range(length):
            ds.add_frame(
                {
                    "observation.state": rng.normal(size=4).astype(np.float32),
                    "action": rng.normal(size=3).astype(np.float32),
                    "observation.images.cam": identity_frame(episode + seed, j, 48, 64),
                    "observation.images.wrist": identity_frame(episode, j + seed, 64, 32),
                    "task": ["wave", "grasp"][episode % 2],
                }
            )
        ds.save_episode()
    ds.finalize()


def darken(frames: torch.Tensor) -> torch.Tensor:
    """A transform both sides apply: deterministic, dtype-preserving (uint8 stays uint8)."""
    return frames // 2 if frames.dtype == torch.uint8 else frames * 0.5


def compare_all(lerobot, ours, name: str, batch: int = 8) -> int:
    if len(ours) != len(lerobot):
        raise AssertionError(f"{name}: {len(ours)} positions, LeRobot {len(lerobot)}")
    order = np.random.default_rng(1).permutation(len(ours)).tolist()
    for start in range(0, len(order), batch):
        positions = order[start : start + batch]
        for position, sample in zip(positions, ours.__getitems__(positions)):
            assert_same(lerobot[position], sample, f"{name} ds[{position}]")
    return len(order)


def faces(source: Path, pack: Path) -> dict[str, int]:
    counts = {}
    for name, kwargs in {
        "single-float32": {},
        "single-uint8": {"return_uint8": True},
        "windows-float32": {"delta_timestamps": WINDOW},
        "windows-uint8": {"delta_timestamps": WINDOW, "return_uint8": True},
        "image-transforms-uint8": {"delta_timestamps": WINDOW, "return_uint8": True, "image_transforms": darken},
        "image-transforms-float32": {"image_transforms": darken},
    }.items():
        lerobot = LeRobotDataset("local/random", root=source, **kwargs)
        counts[name] = compare_all(lerobot, PackedLeRobotDataset(str(pack), **kwargs), name)
    selection = [5, 0, 2, 6]
    lerobot = LeRobotDataset("local/random", root=source, episodes=selection, delta_timestamps=WINDOW)
    ours = PackedLeRobotDataset(str(pack), episodes=selection, delta_timestamps=WINDOW)
    if ours.episodes != lerobot.episodes or ours.num_episodes != lerobot.num_episodes or ours.num_frames != lerobot.num_frames:
        raise AssertionError(
            f"selection: episodes {ours.episodes}/{lerobot.episodes}, frames {ours.num_frames}/{lerobot.num_frames}"
        )
    theirs_map = lerobot.absolute_to_relative_idx
    if dict(ours.absolute_to_relative_idx.items()) != theirs_map:
        raise AssertionError("selection: absolute_to_relative_idx differs")
    counts["selection"] = compare_all(lerobot, ours, "selection")
    return counts


def mixture(work: Path, sources: list[Path], packs: list[Path]) -> int:
    ours = PackedLeRobotDataset([str(p) for p in packs], names=["a", "b"], delta_timestamps=WINDOW, return_uint8=True)
    offset, compared = 0, 0
    for d, source in enumerate(sources):
        lerobot = LeRobotDataset("local/random", root=source, delta_timestamps=WINDOW, return_uint8=True)
        for local in range(len(lerobot)):
            sample = ours[offset + local]
            if int(sample.pop("dataset_index")) != d or sample.pop("dataset_name") != "ab"[d]:
                raise AssertionError(f"mixture[{offset + local}]: not dataset {d}")
            # Datasets of one layout: every mask says present (a mixture's samples always carry them).
            masks = {k: sample.pop(k) for k in [k for k in sample if k.endswith("_mask")]}
            if not all(bool(m.all()) for m in masks.values()):
                raise AssertionError(f"mixture[{offset + local}]: a mask says absent in datasets of one layout: {masks}")
            assert_same(lerobot[local], sample, f"mixture[{offset + local}] = dataset {d}[{local}]")
            compared += 1
        offset += len(lerobot)
    if compared != len(ours):
        raise AssertionError(f"mixture: {compared} compared of {len(ours)}")
    return compared


def registry(source: Path, pack: Path) -> int:
    """LeRobot main's ``make_dataset_reader(meta.storage_format, **kwargs)`` for our format, with
    the metadata LeRobot reads from the pack's own ``meta/``."""
    import importlib
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="lerobot.dataset_readers") if e.name == "lerobot_shards"]
    module = importlib.import_module(entry.module)
    meta = LeRobotDatasetMetadata("local/random", root=pack)
    compared = 0
    for episodes in (None, [6, 1, 4]):
        reader = module.DATASET_READER(
            meta=meta,
            root=str(pack),
            episodes=episodes,
            delta_timestamps=WINDOW,
            image_transforms=None,
            tolerance_s=1e-4,
            revision=None,
            return_uint8=True,
            depth_output_unit="mm",
            token=None,
        )
        lerobot = LeRobotDataset("local/random", root=source, episodes=episodes, delta_timestamps=WINDOW, return_uint8=True)
        if (reader.num_frames, reader.num_episodes) != (lerobot.num_frames, lerobot.num_episodes):
            raise AssertionError(f"registry episodes={episodes}: totals differ")
        positions = list(range(reader.num_frames))
        for position, item in zip(positions, reader.get_items(positions)):
            assert_same(lerobot[position], item, f"registry episodes={episodes} get_items[{position}]")
            compared += 1
        assert_same(lerobot[0], reader.get_item(0), f"registry episodes={episodes} get_item(0)")
    return compared


def sampler(source: Path, pack: Path) -> int:
    """LeRobot's EpisodeAwareSampler over both datasets (as lerobot-train builds it), then LeRobot's
    DataLoader set-up over both."""
    selection = [6, 0, 4, 2]
    lerobot = LeRobotDataset("local/random", root=source, episodes=selection, delta_timestamps=WINDOW, return_uint8=True)
    ours = PackedLeRobotDataset(str(pack), episodes=selection, delta_timestamps=WINDOW, return_uint8=True)

    def sampler_of(dataset) -> EpisodeAwareSampler:
        return EpisodeAwareSampler(
            dataset.meta.episodes["dataset_from_index"],
            dataset.meta.episodes["dataset_to_index"],
            episode_indices_to_use=dataset.episodes,
            drop_n_last_frames=2,
            shuffle=True,
            seed=3,
            absolute_to_relative_idx=dataset.absolute_to_relative_idx,
        )

    theirs, mine = list(sampler_of(lerobot)), list(sampler_of(ours))
    if theirs != mine:
        raise AssertionError(f"EpisodeAwareSampler yields {mine[:10]}... over ours, {theirs[:10]}... over LeRobot's")

    def batches(dataset):
        loader = torch.utils.data.DataLoader(
            dataset,
            batch_size=4,
            sampler=sampler_of(dataset),
            num_workers=2,
            persistent_workers=True,
            multiprocessing_context="spawn",
            prefetch_factor=2,
        )
        return list(loader)

    for k, (a, b) in enumerate(zip(batches(lerobot), batches(ours), strict=True)):
        strings = [key for key, value in a.items() if isinstance(value, list)]  # collated strings (task)
        if set(a) != set(b) or any(a[key] != b[key] for key in strings):
            raise AssertionError(f"DataLoader batch {k}: keys or strings differ")
        assert_same(
            {k: v for k, v in a.items() if k not in strings}, {k: v for k, v in b.items() if k not in strings}, f"batch {k}"
        )
    return len(mine)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="parity-random-"))
    try:
        sources = [work / "a", work / "b"]
        packs = [work / "a.packed", work / "b.packed"]
        for seed, (source, pack) in enumerate(zip(sources, packs)):
            write(source, seed)
            pack_dataset(str(source), str(pack), video="copy")
        for name, count in faces(sources[0], packs[0]).items():
            print(f"[parity] PackedLeRobotDataset {name}: {count} positions == LeRobotDataset[i]", flush=True)
        print(f"[parity] mixture of 2: {mixture(work, sources, packs)} positions == each dataset's LeRobotDataset[i]")
        print(f"[parity] registry reader (make_dataset_reader's keywords): {registry(sources[0], packs[0])} items equal")
        print(f"[parity] EpisodeAwareSampler + LeRobot's DataLoader: {sampler(sources[0], packs[0])} indices, batches equal")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
