"""World: plain arithmetic, and ``detect`` as the one reader of the environment."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lerobot_shards.reader.plan import PlanError, World
from lerobot_shards.reader.runtime import detect_world


def test_consumer_numbering_is_rank_major():
    ids = [World(rank=r, world_size=3, worker=w, num_workers=4).consumer for r in range(3) for w in range(4)]
    assert ids == list(range(12))
    world = World(rank=2, world_size=3, worker=1, num_workers=4)
    assert (world.workers_per_rank, world.consumer, world.num_consumers) == (4, 9, 12)


def test_num_workers_zero_is_one_consumer_per_rank():
    world = World(rank=1, world_size=2, worker=0, num_workers=0)
    assert (world.workers_per_rank, world.consumer, world.num_consumers) == (1, 1, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rank": 0, "world_size": 0}, r"world_size must be >= 1, got 0"),
        ({"rank": 2, "world_size": 2}, r"rank must be in \[0, 2\) for world_size=2, got 2"),
        ({"rank": -1, "world_size": 2}, r"rank must be in \[0, 2\)"),
        ({"rank": 0, "world_size": 1, "num_workers": -1}, r"num_workers must be >= 0 \(0 = main process\), got -1"),
        ({"rank": 0, "world_size": 1, "worker": 1, "num_workers": 0}, r"worker must be in \[0, 1\) for num_workers=0"),
        ({"rank": 0, "world_size": 1, "worker": 4, "num_workers": 4}, r"worker must be in \[0, 4\)"),
        ({"rank": True, "world_size": 2}, r"rank must be an int, got True \(bool\)"),
        ({"rank": 0, "world_size": 2.0}, r"world_size must be an int, got 2.0 \(float\)"),
    ],
)
def test_invalid_world_is_rejected(kwargs, match):
    with pytest.raises(PlanError, match=match):
        World(**kwargs)


@pytest.fixture
def no_torch_env(monkeypatch):
    """A process outside torchrun and outside any DataLoader worker."""
    import torch.distributed as dist
    import torch.utils.data

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: None)
    return monkeypatch


def test_detect_defaults_to_single_process(no_torch_env):
    assert detect_world() == World(rank=0, world_size=1, worker=0, num_workers=0)


def test_detect_reads_torchrun_env(no_torch_env):
    no_torch_env.setenv("RANK", "3")
    no_torch_env.setenv("WORLD_SIZE", "4")
    assert detect_world() == World(rank=3, world_size=4)


def test_explicit_args_beat_env(no_torch_env):
    no_torch_env.setenv("RANK", "3")
    no_torch_env.setenv("WORLD_SIZE", "4")
    assert detect_world(rank=1, world_size=2) == World(rank=1, world_size=2)
    # Each value resolves on its own: rank explicit, world_size from the env.
    assert detect_world(rank=0) == World(rank=0, world_size=4)


def test_initialized_process_group_beats_env(no_torch_env):
    import torch.distributed as dist

    no_torch_env.setenv("RANK", "0")
    no_torch_env.setenv("WORLD_SIZE", "1")
    no_torch_env.setattr(dist, "is_available", lambda: True)
    no_torch_env.setattr(dist, "is_initialized", lambda: True)
    no_torch_env.setattr(dist, "get_rank", lambda: 5)
    no_torch_env.setattr(dist, "get_world_size", lambda: 8)
    assert detect_world() == World(rank=5, world_size=8)


def test_detect_reads_dataloader_worker(no_torch_env):
    import torch.utils.data

    no_torch_env.setattr(torch.utils.data, "get_worker_info", lambda: SimpleNamespace(id=2, num_workers=3))
    no_torch_env.setenv("RANK", "1")
    no_torch_env.setenv("WORLD_SIZE", "2")
    world = detect_world()
    assert world == World(rank=1, world_size=2, worker=2, num_workers=3)
    assert world.consumer == 5


def test_detect_rejects_garbage_env(no_torch_env):
    no_torch_env.setenv("RANK", "zero")
    with pytest.raises(PlanError, match=r"environment variable RANK='zero' is not an integer"):
        detect_world()


def test_detect_rejects_inconsistent_env(no_torch_env):
    no_torch_env.setenv("RANK", "3")
    no_torch_env.setenv("WORLD_SIZE", "2")
    with pytest.raises(PlanError, match=r"rank must be in \[0, 2\) for world_size=2, got 3"):
        detect_world()
