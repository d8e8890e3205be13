"""What the first batch of an epoch pays before any sample (issue 69), counted, never timed.

Contracts: ``BatchLoader`` starts its workers without a full garbage collection of the training
process (it cost 0.15-0.4 s per epoch with torch loaded), yet a decoder the training process
left in a reference cycle is never freed in a worker (where dav1d's threads do not exist and
``avcodec_free_context`` waits forever): the workers fork from a frozen heap. A caller's own
``gc.freeze`` is kept.
"""

from __future__ import annotations

import gc
from pathlib import Path

import av
import pytest
import torch

from lerobot_shards import BatchLoader, PackedDataset, PackedLeRobotDataset
from tests.packed_fixtures import *

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore:This DataLoader will create")]


class _Collections:
    def __init__(self, monkeypatch):
        self.full = 0
        real = gc.collect

        def counting(generation: int = 2) -> int:
            self.full += generation == 2
            return real(generation)

        monkeypatch.setattr(gc, "collect", counting)


def _decoder_in_a_cycle(video: Path) -> None:
    """A PyAV decoder that has decoded (its threads started), left unreachable in a cycle."""
    container = av.open(str(video))
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    for _ in zip(range(3), container.decode(stream)):
        pass
    holder: dict = {"container": container}
    holder["self"] = holder


def _collect_in_worker(_worker: int) -> None:
    gc.collect()  # a worker's first collection: it must not free what the parent left


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", ["stream", "map"])
def test_workers_start_without_a_full_collection_and_never_free_an_inherited_decoder(
    sample_source, packed_copy, monkeypatch, kind
):
    video = next(sample_source.glob("videos/**/*.mp4"))
    counted = _Collections(monkeypatch)
    gc.disable()  # the cycle stays uncollected until the workers fork (as between two automatic collections)
    try:
        _decoder_in_a_cycle(video)
        if kind == "stream":
            ds = PackedDataset(str(packed_copy), return_uint8=True)
            loader = BatchLoader(ds, batch_size=8, num_workers=2, worker_init_fn=_collect_in_worker)
        else:
            ds = PackedLeRobotDataset(str(packed_copy), return_uint8=True)
            loader = BatchLoader(ds, batch_size=8, shuffle=True, num_workers=2, worker_init_fn=_collect_in_worker)
        total = sum(len(batch["index"]) for batch in loader)
    finally:
        gc.enable()
    assert total == 141
    assert counted.full == 0 and gc.get_freeze_count() == 0  # nothing collected in full, nothing left frozen
    assert gc.collect() > 0  # the parent's cycle is collected here, as before


def test_a_callers_freeze_is_kept(packed_copy, monkeypatch):
    counted = _Collections(monkeypatch)
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        loader = BatchLoader(PackedDataset(str(packed_copy), return_uint8=True), batch_size=64, num_workers=1)
        batches = sum(1 for _ in loader)
        assert batches == 3 and gc.get_freeze_count() > frozen // 2 and counted.full == 1  # still frozen
    finally:
        gc.unfreeze()
    assert isinstance(torch.zeros(1), torch.Tensor)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("threads", [1, 4])
def test_an_epoch_forks_once_per_worker_and_opens_each_decoder_once(packed_copy, monkeypatch, threads):
    """What an epoch's start pays, counted: one fork per worker, no full collection, and one
    decoder per camera of each admitted episode, never reopened, whether samples are built one
    at a time or side by side (4 threads over 2 cameras: two samples at once)."""
    import os

    counted, forks = _Collections(monkeypatch), []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    ds = PackedDataset(str(packed_copy), return_uint8=True, decode_threads=threads, episode_pool_size=3)
    loader = BatchLoader(ds, batch_size=8, num_workers=2)
    total = sum(len(batch["index"]) for batch in loader)
    stats = ds.stats()
    cameras = len(ds.camera_keys)
    assert total == stats["samples"] == 141
    assert len(forks) == 2 and counted.full == 0
    assert stats["decoder_misses"] == stats["episodes_admitted"] * cameras  # each opened once per admission
    assert stats["decoder_hits"] + stats["decoder_misses"] == total * cameras
