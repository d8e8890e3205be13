"""The epoch's first batch built in the training process (``BatchLoader(first_batch_here=True)``,
issue 69): the training process waits for the first batch anyway, so it builds it while no
worker runs, ends every thread it started, then starts the workers one batch on.

Contracts: the batches are those of the workers alone (the DataLoader's), for any worker count,
with drop_last, on a fresh epoch and after a resume, also on another worker count; the first
batch is built before any fork and no reader thread is alive at a fork; where worker 0 yields
less than a whole batch, the workers build everything.
"""

from __future__ import annotations

import os
import threading

import pytest
import torch

from lerobot_shards import BatchLoader, PackedDataset
from lerobot_shards.reader import FIRST_BATCH_HERE_MAX_PIXELS, first_batch_here_by_shape
from tests.packed_fixtures import *

pytestmark = [pytest.mark.system, pytest.mark.filterwarnings("ignore:This DataLoader will create")]

CAMERA = "observation.images.top"


def _dataset(packed_copy) -> PackedDataset:
    return PackedDataset(str(packed_copy), shuffle=True, seed=3, return_uint8=True)


def _batches(loader: BatchLoader, limit: int | None = None) -> list[tuple[list[int], torch.Tensor]]:
    out = []
    for batch in loader:
        out.append((batch["index"].tolist(), batch[CAMERA].clone()))
        if limit is not None and len(out) == limit:
            break
    return out


def _assert_same(got, expected) -> None:
    assert [indices for indices, _ in got] == [indices for indices, _ in expected]
    for (_, a), (_, b) in zip(got, expected):
        assert torch.equal(a, b)


class _Forks:
    """Per fork in this process: the reader threads alive and the samples already counted."""

    def __init__(self, monkeypatch, ds: PackedDataset):
        self.seen: list[tuple[list[str], int]] = []
        real = os.fork

        def fork() -> int:
            alive = [t.name for t in threading.enumerate() if t.name.startswith("lerobot-shards")]
            record = (alive, int(ds.stats()["samples"]))
            pid = real()
            if pid:
                self.seen.append(record)
            return pid

        monkeypatch.setattr(os, "fork", fork)


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("workers", "batch_size", "drop_last"), [(1, 8, False), (2, 8, False), (3, 16, True), (3, 64, False)])
def test_the_batches_are_the_workers_alone(packed_copy, monkeypatch, workers, batch_size, drop_last):
    expected = _batches(
        BatchLoader(
            _dataset(packed_copy), batch_size=batch_size, num_workers=workers, drop_last=drop_last, first_batch_here=False
        )
    )
    ds = _dataset(packed_copy)
    forks = _Forks(monkeypatch, ds)
    got = _batches(BatchLoader(ds, batch_size=batch_size, num_workers=workers, drop_last=drop_last))
    _assert_same(got, expected)
    assert len(forks.seen) == workers  # one fork per worker, as before
    assert all(alive == [] for alive, _ in forks.seen), forks.seen  # no reader thread of the first batch outlives it
    worker0_whole = int(ds.worker_counts(workers)[0]) >= batch_size
    # At the first fork no worker runs yet: what is counted was built here. (At a later fork an
    # already started worker may have published its first samples: not a count of this process.)
    assert forks.seen[0][1] == (batch_size if worker0_whole else 0)
    assert (batch_size, workers) != (64, 3) or not worker0_whole  # the last case has worker 0 short of a batch


@pytest.mark.timeout(600)
@pytest.mark.parametrize("workers_after", [2, 3])
def test_a_resume_continues_the_same_batches(packed_copy, workers_after):
    def run(here: bool):
        first = BatchLoader(_dataset(packed_copy), batch_size=8, num_workers=2, first_batch_here=here)
        first.set_epoch(1)
        head = _batches(first, limit=5)
        state = first.state_dict()
        then = BatchLoader(_dataset(packed_copy), batch_size=8, num_workers=workers_after, first_batch_here=here)
        then.load_state_dict(state)
        then.set_epoch(1)
        return head, _batches(then), state

    head, tail, state = run(True)
    plain_head, plain_tail, plain_state = run(False)
    assert state == plain_state and state["samples_consumed"] == 40
    _assert_same(head, plain_head)
    _assert_same(tail, plain_tail)
    seen = [i for indices, _ in head + tail for i in indices]
    assert len(seen) == len(set(seen)) == 141  # every anchor once over the resume


def test_a_worker_init_fn_keeps_every_batch_in_the_workers(packed_copy, monkeypatch):
    ds = _dataset(packed_copy)
    forks = _Forks(monkeypatch, ds)
    batches = _batches(BatchLoader(ds, batch_size=8, num_workers=1, worker_init_fn=lambda _worker: None))
    assert sum(len(indices) for indices, _ in batches) == 141
    assert [samples for _, samples in forks.seen] == [0]  # nothing built before the fork


def test_the_default_builds_it_here_for_one_camera_batches_not_for_four():
    """``first_batch_here=None`` by the pixels a batch decodes (measured, BENCHMARKS): one
    480x640 camera in batches of 16, single frames or two-frame windows, yes; four, no."""
    camera = 480 * 640
    assert first_batch_here_by_shape(16, camera) and first_batch_here_by_shape(16, 2 * camera)
    assert not first_batch_here_by_shape(16, 4 * camera) and not first_batch_here_by_shape(64, camera)
    assert FIRST_BATCH_HERE_MAX_PIXELS == 16 * 2 * camera


def test_a_sample_counts_every_cameras_window(packed_copy):
    """The pixels the rule reads: each camera's height x width x frames of its window."""
    plain = _dataset(packed_copy)
    windowed = PackedDataset(str(packed_copy), delta_timestamps={CAMERA: [-1 / 30, 0.0]}, return_uint8=True)
    sizes = plain.catalog.datasets[0].frame_sizes
    one = {key: h * w for key, (h, w) in sizes.items()}
    assert len(one) == 2 and plain._frame_pixels_per_sample() == sum(one.values())
    assert windowed._frame_pixels_per_sample() == sum(one.values()) + one[CAMERA]


def test_false_and_a_large_batch_leave_it_to_the_workers(packed_copy, monkeypatch):
    ds = _dataset(packed_copy)
    forks = _Forks(monkeypatch, ds)
    _batches(BatchLoader(ds, batch_size=8, num_workers=1, first_batch_here=False))
    monkeypatch.setattr("lerobot_shards.reader.loader.FIRST_BATCH_HERE_MAX_PIXELS", 8 * ds._frame_pixels_per_sample() - 1)
    _batches(BatchLoader(ds, batch_size=8, num_workers=1))  # one pixel over the rule: the workers build it
    assert [samples for _, samples in forks.seen] == [0, 141]  # at each fork, only earlier epochs' samples


@pytest.mark.timeout(600)
def test_the_workers_read_no_episode_the_first_batch_read(packed_copy):
    """The first batch's episodes are handed to the worker forked after it (a fork copies them,
    rows and members: ``reader.fetch.handover``), so the epoch reads every byte it did without
    the first batch built here, once; the worker opens its own decoders on them, once each."""

    def stats(here: bool) -> dict:
        ds = PackedDataset(str(packed_copy), shuffle=True, seed=3, return_uint8=True, episode_pool_size=2)
        assert sum(len(b["index"]) for b in BatchLoader(ds, batch_size=8, num_workers=1, first_batch_here=here)) == 141
        return ds.stats()

    here, workers_only = stats(True), stats(False)
    assert here["bytes_fetched"] == workers_only["bytes_fetched"]  # read again, they would be counted twice
    cameras = 2
    assert here["decoder_misses"] == here["episodes_admitted"] * cameras
    assert here["episodes_admitted"] > workers_only["episodes_admitted"]  # the first batch's, admitted twice


def test_nothing_handed_over_stays_in_the_training_process(packed_copy):
    from lerobot_shards.reader.fetch import handover

    loader = BatchLoader(_dataset(packed_copy), batch_size=8, num_workers=1)
    batches = iter(loader)
    next(batches)
    assert handover.withdraw() == 0  # withdrawn once the worker forked
    batches.close()
