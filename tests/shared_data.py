"""Where the shared real datasets are (``../shared/datasets`` beside the checkout).

A clone elsewhere (``git clone . /tmp/fresh``) finds them through ``LEROBOT_SHARDS_SHARED_DATASETS``
or the workspace's own copy; without them a test that needs real footage is skipped, saying where
it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def shared_dataset(name: str) -> Path:
    """The shared dataset ``name`` (a LeRobot v3 root), or skip the test naming where it looked."""
    candidates = [Path(p) for p in [os.environ.get("LEROBOT_SHARDS_SHARED_DATASETS")] if p]
    candidates += [ROOT.parent / "shared" / "datasets", Path("/work/shared/datasets")]
    for root in candidates:
        if (root / name / "meta" / "info.json").is_file():
            return root / name
    pytest.skip(f"real dataset {name} not found in {[str(c) for c in candidates]}: set LEROBOT_SHARDS_SHARED_DATASETS")
