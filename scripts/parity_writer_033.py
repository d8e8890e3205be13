"""Record a LeRobot v2.1 dataset with LeRobot 0.3.3's own writer (issue 67): the last releases
that wrote v2.1 (per-episode parquet and mp4, ``meta/episodes.jsonl``, ``tasks.jsonl``,
``episodes_stats.jsonl``), as much of the Hub's community data still is. Run by
``scripts/parity_v21.py`` in ``.venv-lerobot033`` (LeRobot 0.3.3 installed without its
dependencies, which it borrows from ``.venv-parity`` through a ``.pth``: ``scripts/parity_setup.sh``).

    .venv-lerobot033/bin/python scripts/parity_writer_033.py ROOT SPEC_JSON

SPEC_JSON: ``{"fps": 30, "lengths": [9, 3, 14], "cameras": {"observation.images.top": [48, 64]},
"images": {"observation.images.still": [24, 32]}, "seed": 0}``; frames carry their identity
(``lerobot_shards.testing.identity_frame``), three tasks, one or two per episode.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the testing helpers, from this checkout (the borrowed .pth does not map it)

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

from lerobot_shards.testing import identity_frame

TASKS = ["pick the cube", "place it", "push the block"]


def main() -> None:
    root, spec = Path(sys.argv[1]), json.loads(sys.argv[2])
    features = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": None},
        "action": {"dtype": "float32", "shape": (4,), "names": None},
    }
    for key, (height, width) in spec.get("cameras", {}).items():
        features[key] = {"dtype": "video", "shape": (height, width, 3), "names": ["height", "width", "channels"]}
    for key, (height, width) in spec.get("images", {}).items():
        features[key] = {"dtype": "image", "shape": (height, width, 3), "names": ["height", "width", "channels"]}
    seed = int(spec.get("seed", 0))
    ds = LeRobotDataset.create(
        f"parity/v21-{seed}", fps=int(spec["fps"]), features=features, root=root, use_videos=bool(spec.get("cameras"))
    )
    rng = np.random.default_rng(seed)
    for episode, length in enumerate(spec["lengths"]):
        for j in range(length):
            frame = {"observation.state": rng.normal(size=6).astype(np.float32), "action": rng.normal(size=4).astype(np.float32)}
            for n, (key, (height, width)) in enumerate({**spec.get("cameras", {}), **spec.get("images", {})}.items()):
                frame[key] = identity_frame(episode + 10 * n + seed, j, height, width)
            # A second task from the middle of every third episode: episodes.jsonl lists both.
            task = TASKS[(episode + (j > length // 2 and episode % 3 == 2)) % len(TASKS)]
            ds.add_frame(frame, task=task)
        ds.save_episode()
    print(f"[parity] LeRobot 0.3.3 wrote {root} (v2.1, {len(spec['lengths'])} episodes)", flush=True)


if __name__ == "__main__":
    main()
