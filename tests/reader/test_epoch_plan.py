"""Epoch plan contracts: exactly-once coverage, equal ranks, balanced workers, determinism."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from lerobot_shards.reader.plan import EpochPlan, PlanError, plan_epoch, split_stream
from tests.work_counter import lines_executed


def expand(plan: EpochPlan, consumer: int) -> list[tuple[int, int]]:
    """A consumer's anchors as (episode, anchor position) pairs, in plan order."""
    episode, start, stop = plan.pieces_of(consumer)
    return [(int(e), p) for e, a, b in zip(episode, start, stop) for p in range(a, b)]


def naive_plan(counts, order, world_size, workers) -> list[list[tuple[int, int]]]:
    """The plan as the docstring states it, with the stream materialized."""
    stream = [(int(e), p) for e in order for p in range(int(counts[e]))]
    per_rank = len(stream) // world_size
    out = []
    for r in range(world_size):
        rank_part = stream[r * per_rank : (r + 1) * per_rank]
        base, extra = divmod(per_rank, workers)
        at = 0
        for w in range(workers):
            n = base + (w < extra)
            out.append(rank_part[at : at + n])
            at += n
    return out


def uneven_counts(seed: int, n: int = 37) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 25, n)
    counts[rng.choice(n, n // 4, replace=False)] = 0  # filtered-out episodes
    return counts


@pytest.mark.parametrize("world_size", [1, 2, 3, 5])
@pytest.mark.parametrize("workers", [1, 2, 3, 4])
@pytest.mark.parametrize("shuffle", [True, False])
def test_plan_covers_every_anchor_once_and_balances(world_size, workers, shuffle):
    counts = uneven_counts(world_size * 10 + workers)
    plan = plan_epoch(counts, seed=7, epoch=3, world_size=world_size, workers_per_rank=workers, shuffle=shuffle)
    per_consumer = [expand(plan, c) for c in range(plan.num_consumers)]

    everything = Counter(pair for anchors in per_consumer for pair in anchors)
    assert max(everything.values(), default=1) == 1, "an anchor is planned twice"
    full = {(e, p) for e in range(len(counts)) for p in range(counts[e])}
    assert set(everything) <= full
    assert len(full) - len(everything) == plan.dropped < world_size
    assert plan.num_anchors == counts.sum()

    sizes = np.array([len(a) for a in per_consumer]).reshape(world_size, workers)  # (ranks, workers)
    np.testing.assert_array_equal(sizes.ravel(), plan.consumer_counts)
    assert (sizes.sum(axis=1) == plan.per_rank_count).all(), "ranks must get equal counts"
    assert (sizes.max(axis=1) - sizes.min(axis=1) <= 1).all(), "workers of a rank differ by more than 1"
    assert (np.diff(sizes, axis=1) <= 0).all(), "earlier workers take the extra anchor"
    # Dropped anchors are the tail of the stream: the last episodes in plan order.
    assert naive_plan(counts, plan.episode_order, world_size, workers) == per_consumer


def test_pieces_are_nonempty_and_few():
    counts = uneven_counts(1, 200)
    plan = plan_epoch(counts, seed=1, epoch=0, world_size=3, workers_per_rank=4, shuffle=True)
    assert (plan.piece_stop > plan.piece_start).all()
    # Each consumer boundary splits at most one episode.
    assert plan.num_pieces <= np.count_nonzero(counts) + plan.num_consumers - 1
    assert plan.consumer_ptr[0] == 0 and plan.consumer_ptr[-1] == plan.num_pieces
    assert not plan.piece_start.flags.writeable


@pytest.mark.parametrize("seed", range(20))
def test_matches_naive_plan_on_random_small_inputs(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 6, rng.integers(0, 12))
    world_size, workers = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    plan = plan_epoch(counts, seed=seed, epoch=seed % 3, world_size=world_size, workers_per_rank=workers, shuffle=True)
    expected = naive_plan(counts, plan.episode_order, world_size, workers)
    assert [expand(plan, c) for c in range(plan.num_consumers)] == expected


def test_more_consumers_than_anchors():
    counts = np.array([0, 2, 0, 1])
    plan = plan_epoch(counts, seed=0, epoch=0, world_size=2, workers_per_rank=4, shuffle=True)
    assert plan.per_rank_count == 1 and plan.dropped == 1
    assert sorted(plan.consumer_counts.tolist()) == [0] * 6 + [1] * 2
    plan = plan_epoch(counts, seed=0, epoch=0, world_size=5, workers_per_rank=3, shuffle=True)
    assert plan.per_rank_count == 0 and plan.dropped == 3 and plan.num_pieces == 0
    for c in range(plan.num_consumers):
        assert all(len(a) == 0 for a in plan.pieces_of(c))


@pytest.mark.parametrize("counts", [np.zeros(0, dtype=np.int64), np.zeros(5, dtype=np.int64)])
def test_no_anchors_gives_an_empty_plan(counts):
    plan = plan_epoch(counts, seed=0, epoch=0, world_size=2, workers_per_rank=2, shuffle=True)
    assert plan.num_anchors == plan.dropped == plan.per_rank_count == plan.num_pieces == 0
    np.testing.assert_array_equal(plan.consumer_ptr, [0] * 5)


def test_deterministic_per_seed_and_epoch():
    counts = uneven_counts(3, 500)
    kw = dict(world_size=2, workers_per_rank=3, shuffle=True)
    a = plan_epoch(counts, seed=11, epoch=4, **kw)
    b = plan_epoch(counts.copy(), seed=11, epoch=4, **kw)
    for field in ("episode_order", "consumer_ptr", "piece_episode", "piece_start", "piece_stop"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.episode_order, plan_epoch(counts, seed=11, epoch=5, **kw).episode_order)
    assert not np.array_equal(a.episode_order, plan_epoch(counts, seed=12, epoch=4, **kw).episode_order)
    np.testing.assert_array_equal(np.sort(a.episode_order), np.arange(500))


def test_dropped_anchors_change_with_the_epoch():
    counts = np.full(50, 3)  # 150 anchors over 4 ranks: 2 dropped per epoch
    dropped = set()
    for epoch in range(10):
        plan = plan_epoch(counts, seed=0, epoch=epoch, world_size=4, workers_per_rank=1, shuffle=True)
        kept = {pair for c in range(4) for pair in expand(plan, c)}
        dropped |= {(e, p) for e in range(50) for p in range(3)} - kept
    assert len(dropped) > 2


def test_no_shuffle_keeps_index_order():
    counts = np.array([3, 0, 2, 4])
    plan = plan_epoch(counts, seed=5, epoch=9, world_size=1, workers_per_rank=2, shuffle=False)
    np.testing.assert_array_equal(plan.episode_order, [0, 1, 2, 3])
    assert expand(plan, 0) == [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1)]
    assert expand(plan, 1) == [(3, 0), (3, 1), (3, 2), (3, 3)]


def test_million_episodes_plan_is_vectorized_and_episode_sized():
    # Counted, not timed: planning 10^6 episodes runs the same Python lines as 10^3 (all the
    # work is in numpy) and builds nothing anchor-sized (2e8 anchors here).
    small = np.random.default_rng(0).integers(0, 400, 1_000)
    counts = np.random.default_rng(0).integers(0, 400, 1_000_000)
    kwargs = dict(seed=0, epoch=1, world_size=16, workers_per_rank=8, shuffle=True)
    # A process's first plan runs a few more lines (modules numpy imports on first use): alone,
    # or first in its xdist worker, this test compared 231 lines with 222. That once is not the cost.
    plan_epoch(small, **kwargs)
    _, lines_small = lines_executed(plan_epoch, small, **kwargs)
    plan, lines = lines_executed(plan_epoch, counts, **kwargs)
    print(f"plan_epoch: {lines} Python lines for 1e6 episodes, {lines_small} for 1e3")
    assert lines == lines_small
    assert plan.consumer_counts.sum() + plan.dropped == counts.sum()
    arrays = [v for v in vars(plan).values() if isinstance(v, np.ndarray)]
    assert max(len(a) for a in arrays) <= len(counts) + plan.num_consumers + 1


def test_split_stream_offsets_point_into_items():
    split = split_stream(np.array([5, 0, 7]), world_size=2, workers_per_rank=2)
    # 12 units, 6 per rank, workers get 3 each: [0,3) [3,5)+[0,1) [1,4) [4,7).
    np.testing.assert_array_equal(split.piece_item, [0, 0, 2, 2, 2])
    np.testing.assert_array_equal(split.piece_offset, [0, 3, 0, 1, 4])
    np.testing.assert_array_equal(split.piece_length, [3, 2, 1, 3, 3])
    np.testing.assert_array_equal(split.consumer_ptr, [0, 1, 3, 4, 5])


@pytest.mark.parametrize(
    ("counts", "kwargs", "match"),
    [
        (np.array([1, -2]), {}, r"anchor_counts must be >= 0, got -2 at index 1"),
        (np.array([[1, 2]]), {}, r"anchor_counts must be 1-D, got shape \(1, 2\)"),
        (np.array([1.5]), {}, r"anchor_counts must hold integers, got dtype float64"),
        (np.array([1]), {"seed": -1}, r"seed must be a non-negative int, got -1"),
        (np.array([1]), {"epoch": 1.0}, r"epoch must be a non-negative int, got 1.0"),
        (np.array([1]), {"world_size": 0}, r"world_size must be an int >= 1, got 0"),
        (np.array([1]), {"workers_per_rank": 0}, r"workers_per_rank must be an int >= 1, got 0"),
    ],
)
def test_bad_inputs_are_rejected(counts, kwargs, match):
    args = dict(seed=0, epoch=0, world_size=1, workers_per_rank=1, shuffle=True) | kwargs
    with pytest.raises(PlanError, match=match):
        plan_epoch(counts, **args)


def test_pieces_of_rejects_unknown_consumer():
    plan = plan_epoch(np.array([3]), seed=0, epoch=0, world_size=2, workers_per_rank=2, shuffle=False)
    with pytest.raises(PlanError, match=r"consumer must be in \[0, 4\), got 4"):
        plan.pieces_of(4)
