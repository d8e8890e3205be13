"""Record a small dataset with LeRobot 0.4.4's own writer (issue 54): the releases 0.4.0-0.4.4
wrote every v3 dataset of Oct 2025 - Feb 2026, with a ``meta/tasks.parquet`` of an unnamed pandas
index. Run by ``scripts/parity_matrix.py`` in ``.venv-lerobot044`` (LeRobot 0.4.4 installed
without its dependencies, which it borrows from ``.venv-parity`` through a ``.pth``:
``scripts/parity_setup.sh``).

    .venv-lerobot044/bin/python scripts/parity_writer_044.py ROOT
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from lerobot.datasets.lerobot_dataset import LeRobotDataset

FEATURES = {
    "observation.state": {"dtype": "float32", "shape": (6,), "names": None},
    "action": {"dtype": "float32", "shape": (4,), "names": None},
    "observation.images.top": {"dtype": "video", "shape": (48, 64, 3), "names": ["height", "width", "channels"]},
}


def main() -> None:
    root = Path(sys.argv[1])
    ds = LeRobotDataset.create("parity/lerobot-044", fps=30, features=FEATURES, root=root, use_videos=True)
    rng = np.random.default_rng(44)
    tasks = ["pick the cube", "place it", "push the block"]
    for episode, length in enumerate((9, 3, 14, 5, 11)):
        for j in range(length):
            level = (episode * 37 + j * 11) % 256
            image = np.full((48, 64, 3), level, np.uint8)
            image[:, : (j * 5) % 64] = 255 - level
            ds.add_frame(
                {
                    "observation.state": rng.standard_normal(6).astype(np.float32),
                    "action": rng.standard_normal(4).astype(np.float32),
                    "observation.images.top": image,
                    "task": tasks[episode % len(tasks)],
                }
            )
        ds.save_episode()
    ds.finalize()
    import lerobot

    print(f"recorded with lerobot {getattr(lerobot, '__version__', '?')} at {root}")


if __name__ == "__main__":
    main()
