"""Session fixtures: one generated LeRobot v3 source and its packs, built once per test session.

Import them in a test module with ``from tests.packed_fixtures import *  # noqa: F401,F403``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from packer.pack import pack_dataset
from packer.synthetic import rollover_spec, write_sample_dataset

# Windows precomputed at pack time (LeRobot delta_timestamps, seconds at 30 fps).
PACK_WINDOWS = {
    "chunk": {"action": [i / 30 for i in range(8)]},
    "obs": {"observation.state": [-2 / 30, -1 / 30, 0.0], "observation.images.top": [-1 / 30, 0.0]},
}
# Small enough that the 9 rollover episodes spread over several shards.
SHARD_SIZE_MB = 0.03

__all__ = ["PACK_WINDOWS", "SHARD_SIZE_MB", "sample_source", "packed_copy", "packed_hevc", "packed_h264"]


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory) -> Path:
    """rollover_spec(): 9 episodes (lengths 1..40), two cameras, several data/video files."""
    root = tmp_path_factory.mktemp("source") / "lerobot"
    write_sample_dataset(root, rollover_spec())
    return root


@pytest.fixture(scope="session")
def packed_copy(sample_source, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("packed") / "copy"
    pack_dataset(str(sample_source), str(dst), video="copy", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    return dst


@pytest.fixture(scope="session")
def packed_hevc(sample_source, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("packed") / "hevc"
    pack_dataset(str(sample_source), str(dst), video="hevc", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    return dst


@pytest.fixture(scope="session")
def packed_h264(sample_source, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("packed") / "h264"
    pack_dataset(str(sample_source), str(dst), video="h264", shard_size_mb=SHARD_SIZE_MB)
    return dst
