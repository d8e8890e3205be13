"""Resume contracts, checked against a model of the DataLoader's round robin."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch.utils.data

from lerobot_shards.reader.plan import PlanError, ResumedStreams, assign_resumed_streams, worker_progress
from tests.work_counter import lines_executed


def loader_batches(counts, batch_size, drop_last=False) -> list[tuple[int, int, int]]:
    """Batches of a DataLoader over per-worker streams, as (worker, start, stop), in order.

    The model of PyTorch's multi-worker IterableDataset loading: each worker batches its
    own stream; the loader takes batches round-robin over workers 0..k-1 and skips
    workers that have run out.
    """
    batches = []
    for w, n in enumerate(counts):
        stops = range(batch_size, n + batch_size, batch_size)
        mine = [(w, s - batch_size, min(s, n)) for s in stops]
        if drop_last:
            mine = [b for b in mine if b[2] - b[1] == batch_size]
        batches.append(mine)
    out, at = [], [0] * len(counts)
    while True:
        progressed = False
        for w in range(len(counts)):
            if at[w] < len(batches[w]):
                out.append(batches[w][at[w]])
                at[w] += 1
                progressed = True
        if not progressed:
            return out


class _PerWorkerStreams(torch.utils.data.IterableDataset):
    """Worker w yields (w, 0), (w, 1), ... (w, counts[w] - 1)."""

    def __init__(self, counts):
        self.counts = counts

    def __iter__(self):
        w = torch.utils.data.get_worker_info().id
        return iter([(w, i) for i in range(self.counts[w])])


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize(("counts", "batch_size"), [([5, 0, 7, 2], 2), ([1, 9, 4], 3)])
def test_loader_model_matches_torch_dataloader(counts, batch_size):
    loader = torch.utils.data.DataLoader(_PerWorkerStreams(counts), batch_size=batch_size, num_workers=len(counts))
    got = [(int(w[0]), int(i[0]), int(i[-1]) + 1) for w, i in loader]
    assert got == loader_batches(counts, batch_size)


def progress_by_brute_force(counts, batch_size, n_batches, drop_last=False):
    """(samples consumed, delivered, rotation) after the first ``n_batches`` batches."""
    order = loader_batches(counts, batch_size, drop_last)
    delivered = np.zeros(len(counts), dtype=np.int64)
    for w, _, b in order[:n_batches]:
        delivered[w] = b
    pending = order[n_batches:]
    active = len({w for w, _, _ in pending})
    rotation = [w for w, _, _ in pending[:active]]
    return sum(b - a for _, a, b in order[:n_batches]), delivered, rotation


def random_cases(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        k = int(rng.integers(1, 7))
        counts = rng.integers(0, 30, k)
        counts[rng.random(k) < 0.2] = 0  # idle workers
        yield counts, int(rng.integers(1, 8)), bool(rng.random() < 0.25)


@pytest.mark.parametrize(("counts", "batch_size", "drop_last"), list(random_cases(150)))
def test_progress_matches_the_loader_model(counts, batch_size, drop_last):
    order = loader_batches(counts, batch_size, drop_last)
    boundaries = set()
    for n_batches in range(len(order) + 1):  # includes 0 and the end of the epoch
        consumed, delivered, rotation = progress_by_brute_force(counts, batch_size, n_batches, drop_last)
        boundaries.add(consumed)
        got = worker_progress(counts, batch_size=batch_size, samples_consumed=consumed, drop_last=drop_last)
        np.testing.assert_array_equal(got.delivered, delivered)
        assert got.rotation == rotation, (n_batches, consumed)
    total = max(boundaries)
    for consumed in set(range(total + 1)) - boundaries:
        with pytest.raises(PlanError, match=rf"samples_consumed={consumed} does not end a batch"):
            worker_progress(counts, batch_size=batch_size, samples_consumed=consumed, drop_last=drop_last)
    with pytest.raises(PlanError, match=rf"samples_consumed={total + 1} exceeds the {total} samples"):
        worker_progress(counts, batch_size=batch_size, samples_consumed=total + 1, drop_last=drop_last)


def test_boundary_error_names_the_neighbouring_batch_edges():
    # Workers of 5 and 3, batch 2: batches end at 2, 4, 6, 7 (w0's last), 8.
    with pytest.raises(PlanError, match=r"samples_consumed=5 does not end a batch: .* end at 4 and 6"):
        worker_progress(np.array([5, 3]), batch_size=2, samples_consumed=5)


def test_progress_of_an_empty_loader():
    got = worker_progress(np.array([0, 0]), batch_size=4, samples_consumed=0)
    assert got.delivered.tolist() == [0, 0] and got.rotation == []


def test_progress_is_constant_time_in_samples():
    counts = np.full(8, 1_250_000) + np.arange(8)
    _, lines_small = lines_executed(worker_progress, counts, batch_size=1, samples_consumed=8_000)
    got, lines = lines_executed(worker_progress, counts, batch_size=1, samples_consumed=10_000_000)
    print(f"worker_progress, batch 1, 8 workers: {lines} Python lines at 1e7 samples, {lines_small} at 8e3")
    assert lines <= lines_small + 50  # phases, not batches: the same work at any offset
    assert got.delivered.sum() == 10_000_000
    assert got.delivered.tolist() == [1_250_000] * 8
    assert got.rotation == list(range(1, 8))


def rank_samples(batch_size, streams: list[list[tuple[int, int, int]]]):
    """Samples a rank's trainer receives when its workers serve ``streams`` (segments)."""
    out = []
    lengths = [sum(b - a for _, a, b in segs) for segs in streams]
    for w, lo, hi in loader_batches(lengths, batch_size):
        flat = [(src, i) for src, a, b in streams[w] for i in range(a, b)]
        out.extend(flat[lo:hi])
    return out


def segments(resumed: ResumedStreams, consumer: int) -> list[tuple[int, int, int]]:
    return list(zip(*(a.tolist() for a in resumed.segments_of(consumer))))


@pytest.mark.parametrize("seed", range(40))
def test_same_shape_resume_reproduces_the_uninterrupted_run(seed):
    rng = np.random.default_rng(seed)
    world_size, workers, batch_size = int(rng.integers(1, 4)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    per_rank = int(rng.integers(0, 60))
    base, extra = divmod(per_rank, workers)
    counts = np.tile(base + (np.arange(workers) < extra), world_size)  # as plan_epoch splits
    for rank in range(world_size):
        ids = range(rank * workers, (rank + 1) * workers)
        full = rank_samples(batch_size, [[(c, 0, int(counts[c]))] for c in ids])
        edges = np.cumsum([0] + [b - a for _, a, b in loader_batches(counts[list(ids)], batch_size)])
        for consumed in edges.tolist():
            resumed = assign_resumed_streams(
                counts,
                old_world_size=world_size,
                batch_size=batch_size,
                samples_consumed=consumed,
                new_world_size=world_size,
                new_workers_per_rank=workers,
            )
            assert resumed.exact and resumed.dropped == 0
            streams = [segments(resumed, c) for c in ids]
            assert full[:consumed] + rank_samples(batch_size, streams) == full


def old_prefix(counts, world_size, batch_size, consumed) -> set[tuple[int, int]]:
    """(old consumer, draw) pairs every rank consumed before the interruption."""
    workers = len(counts) // world_size
    seen = set()
    for rank in range(world_size):
        ids = list(range(rank * workers, (rank + 1) * workers))
        samples = rank_samples(batch_size, [[(c, 0, int(counts[c]))] for c in ids])
        seen |= set(samples[:consumed])
    return seen


def check_resplit(resumed: ResumedStreams, remaining: set[tuple[int, int]]):
    got = Counter(
        (src, i) for c in range(len(resumed.consumer_counts)) for src, a, b in segments(resumed, c) for i in range(a, b)
    )
    assert max(got.values(), default=1) == 1, "a draw is served twice"
    assert set(got) <= remaining
    assert len(remaining) - len(got) == resumed.dropped
    sizes = resumed.consumer_counts.reshape(resumed.world_size, resumed.workers_per_rank)  # (ranks, workers)
    assert (sizes.sum(axis=1) == sizes.sum(axis=1)[0]).all()
    assert (sizes.max(axis=1) - sizes.min(axis=1) <= 1).all()


@pytest.mark.parametrize("seed", range(40))
def test_changed_shape_resplits_the_rest_exactly_once(seed):
    rng = np.random.default_rng(100 + seed)
    old_ws, old_w, batch_size = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    new_ws, new_w = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    if (new_ws, new_w) == (old_ws, old_w):
        new_w += 1
    base, extra = divmod(int(rng.integers(0, 50)), old_w)
    counts = np.tile(base + (np.arange(old_w) < extra), old_ws)
    edges = np.cumsum([0] + [b - a for _, a, b in loader_batches(counts[:old_w], batch_size)])
    consumed = int(rng.choice(edges))
    resumed = assign_resumed_streams(
        counts,
        old_world_size=old_ws,
        batch_size=batch_size,
        samples_consumed=consumed,
        new_world_size=new_ws,
        new_workers_per_rank=new_w,
    )
    assert not resumed.exact and resumed.dropped < new_ws
    everything = {(c, i) for c in range(len(counts)) for i in range(counts[c])}
    check_resplit(resumed, everything - old_prefix(counts, old_ws, batch_size, consumed))


def test_two_resumes_compose_back_to_the_original_streams():
    counts = np.tile([13, 12, 12], 2)  # 2 ranks x 3 workers
    first = assign_resumed_streams(
        counts, old_world_size=2, batch_size=2, samples_consumed=10, new_world_size=3, new_workers_per_rank=2
    )
    remaining = {(c, i) for c in range(6) for i in range(counts[c])} - old_prefix(counts, 2, 2, 10)
    check_resplit(first, remaining)
    assert first.dropped == 0  # 2 x 27 remaining over 3 ranks
    # The resumed job (3 ranks x 2 workers) consumes 6 more samples per rank, then moves again.
    second = assign_resumed_streams(
        first.consumer_counts,
        old_world_size=3,
        batch_size=2,
        samples_consumed=6,
        new_world_size=1,
        new_workers_per_rank=4,
    )
    composed = second.through(first)
    served_by_first = set()
    for rank in range(3):
        streams = [segments(first, c) for c in range(rank * 2, rank * 2 + 2)]
        served_by_first |= set(rank_samples(2, streams)[:6])
    check_resplit(composed, remaining - served_by_first)
    assert composed.dropped == first.dropped + second.dropped


def test_whole_epoch_consumed_leaves_nothing():
    counts = np.array([4, 3, 4, 3])
    resumed = assign_resumed_streams(
        counts, old_world_size=2, batch_size=3, samples_consumed=7, new_world_size=2, new_workers_per_rank=2
    )
    assert resumed.consumer_counts.tolist() == [0, 0, 0, 0] and len(resumed.segment_source) == 0


@pytest.mark.parametrize(
    ("counts", "kwargs", "match"),
    [
        (
            np.array([3, 3, 3]),
            {"old_world_size": 2},
            r"old_consumer_counts has 3 entries; expected a positive multiple of old_world_size=2",
        ),
        (np.array([3, 4]), {"old_world_size": 2}, r"old per-rank totals must be equal, got \[3, 4\]"),
        (np.array([3, 3]), {"samples_consumed": 4}, r"samples_consumed=4 exceeds the 3 samples"),
        (np.array([3, 3]), {"new_workers_per_rank": 0}, r"new_workers_per_rank must be an int >= 1, got 0"),
        (np.array([3, -3]), {}, r"old_consumer_counts must be >= 0"),
    ],
)
def test_bad_resume_inputs_are_rejected(counts, kwargs, match):
    args = dict(old_world_size=2, batch_size=1, samples_consumed=0, new_world_size=2, new_workers_per_rank=1) | kwargs
    with pytest.raises(PlanError, match=match):
        assign_resumed_streams(counts, **args)


def test_bad_progress_inputs_are_rejected():
    with pytest.raises(PlanError, match=r"batch_size must be an int >= 1, got 0"):
        worker_progress(np.array([3]), batch_size=0, samples_consumed=0)
    with pytest.raises(PlanError, match=r"samples_consumed must be an int >= 0, got -1"):
        worker_progress(np.array([3]), batch_size=1, samples_consumed=-1)
