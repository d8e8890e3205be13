"""Mixture planning contracts (pure numpy): exactly once over the union by default, weights
honored, sources cycle exactly once per cycle and disjointly across consumers, skip-ahead
equals sequential generation, equal per-rank counts, a bounded pool, instant resume."""

from __future__ import annotations

import numpy as np
import pytest

from reader.plan.epoch_plan import PlanError
from reader.plan.mixture_plan import (
    MixtureLayout,
    ProportionalConsumerSchedule,
    SourceLabels,
    WeightedMixturePlan,
    admission_order,
    cycle_key,
    plan_proportional,
    source_pool_sizes,
)
from tests.work_counter import lines_executed

# Three datasets: one with 0-anchor episodes, one empty, a tiny one.
COUNTS = [np.array([5, 0, 9, 3, 12]), np.array([], dtype=np.int64), np.array([7, 7, 1, 30]), np.array([2, 4])]
LAYOUT = MixtureLayout.from_anchor_counts(COUNTS)
TOTAL = 5 + 9 + 3 + 12 + 7 + 7 + 1 + 30 + 2 + 4


def _weighted(**kwargs) -> WeightedMixturePlan:
    args = {"samples_per_epoch": 3000, "seed": 7, "epoch": 1, "world_size": 2, "workers_per_rank": 2, "pool_size": 4}
    args.update(kwargs)
    weights = args.pop("weights", [3.0, 0.0, 2.0, 1.0])
    return WeightedMixturePlan.create(args.pop("layout", LAYOUT), weights, **args)


def _fields(draws) -> list[tuple]:
    return list(zip(*(f.tolist() for f in draws)))


# -- layout -------------------------------------------------------------------------------


def test_layout_maps_global_episodes_to_datasets_and_back():
    assert LAYOUT.episode_offsets.tolist() == [0, 5, 5, 9, 11]
    assert LAYOUT.dataset_anchors.tolist() == [29, 0, 45, 6] and LAYOUT.num_anchors == TOTAL
    dataset, local = LAYOUT.to_local(np.arange(11))
    # The empty dataset 1 owns no global id: 5 belongs to dataset 2.
    assert dataset.tolist() == [0] * 5 + [2] * 4 + [3] * 2
    assert local.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1]
    assert LAYOUT.to_global(dataset, local).tolist() == list(range(11))
    assert np.array_equal(LAYOUT.anchor_counts[LAYOUT.to_global(2, 3)], 30)
    with pytest.raises(PlanError, match=r"global episodes must be in \[0, 11\), got range \[0, 11\]"):
        LAYOUT.to_local([0, 11])
    with pytest.raises(PlanError, match="local episode 4 is outside dataset 2's 4 episodes"):
        LAYOUT.to_global([0, 2], [0, 4])
    with pytest.raises(PlanError, match="dataset 1: anchor counts must be a 1-D array of integers >= 0"):
        MixtureLayout.from_anchor_counts([np.array([1]), np.array([-1])])
    with pytest.raises(PlanError, match="at least one dataset"):
        MixtureLayout.from_anchor_counts([])


# -- proportional -------------------------------------------------------------------------


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_default_weights_are_exactly_once_over_the_union(world_size, workers):
    plan = plan_proportional(LAYOUT, seed=3, epoch=2, world_size=world_size, workers_per_rank=workers)
    seen, per_rank = [], np.zeros(world_size, dtype=np.int64)
    for consumer in range(world_size * workers):
        schedule = ProportionalConsumerSchedule(plan, LAYOUT, consumer, pool_size=2)
        draws = schedule.draws(0, len(schedule))
        assert (draws.anchor < LAYOUT.anchor_counts[LAYOUT.to_global(draws.dataset, draws.episode)]).all()
        assert draws.first.sum() == draws.last.sum() == len(np.unique(draws.piece))
        seen += list(zip(draws.dataset.tolist(), draws.episode.tolist(), draws.anchor.tolist()))
        per_rank[consumer // workers] += len(schedule)
    assert len(seen) == len(set(seen)) == TOTAL - plan.dropped
    assert plan.dropped < world_size and (per_rank == TOTAL // world_size).all()
    # Every dataset contributes; the union minus the dropped anchors is everything.
    every = {(d, e, a) for d, c in enumerate(COUNTS) for e, n in enumerate(c.tolist()) for a in range(n)}
    assert set(seen) <= every and len(every - set(seen)) == plan.dropped


def test_proportional_pool_is_shared_across_datasets():
    plan = plan_proportional(LAYOUT, seed=0, epoch=0, world_size=1, workers_per_rank=1)
    schedule = ProportionalConsumerSchedule(plan, LAYOUT, 0, pool_size=3)
    draws = schedule.draws(0, len(schedule))
    assert _max_open(draws).max() <= 3  # over all datasets together


# -- weighted: counts, weights, cycles ----------------------------------------------------


@pytest.mark.parametrize("world_size,workers", [(1, 1), (2, 3), (3, 2)])
def test_weighted_counts_are_equal_per_rank_and_balanced_per_worker(world_size, workers):
    plan = _weighted(samples_per_epoch=1001, world_size=world_size, workers_per_rank=workers)
    counts = plan.consumer_counts.reshape(world_size, workers)
    assert (counts.sum(axis=1) == 1001 // world_size).all() and plan.per_rank_count == 1001 // world_size
    assert (counts.max(axis=1) - counts.min(axis=1) <= 1).all()
    assert [len(plan.consumer(c)) for c in range(world_size * workers)] == plan.consumer_counts.tolist()


def test_weights_are_honored_within_statistical_bounds():
    weights = np.array([5.0, 3.0, 1.0, 1.0])
    n = 200_000
    labels = SourceLabels(weights, seed=11, epoch=0, consumer=0, block_size=4096)
    counts = np.bincount(labels.labels(0, n)[0], minlength=4)
    expected = n * weights / weights.sum()
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 21.1, (counts, chi2)  # chi-square with 3 dof: P(chi2 > 21.1) = 1e-4
    # Per consumer of a plan too, with a zero weight never drawn.
    plan = _weighted(samples_per_epoch=40_000, world_size=1, workers_per_rank=1)
    drawn = np.bincount(plan.consumer(0).draws(0, 40_000).dataset, minlength=4)
    assert drawn[1] == 0
    for d, w in ((0, 0.5), (2, 1 / 3), (3, 1 / 6)):
        z = (drawn[d] - 40_000 * w) / np.sqrt(40_000 * w * (1 - w))
        assert abs(z) < 4, (d, drawn, z)


def test_source_cycles_are_exactly_once_and_disjoint_across_consumers():
    plan = _weighted(samples_per_epoch=4 * 400, world_size=2, workers_per_rank=2)
    by_cycle: dict[tuple[int, int], dict[int, list]] = {}
    for consumer in range(4):
        draws = plan.consumer(consumer).draws(0, 400)
        for d, q, e, a in zip(draws.dataset.tolist(), draws.cycle.tolist(), draws.episode.tolist(), draws.anchor.tolist()):
            by_cycle.setdefault((d, q), {}).setdefault(consumer, []).append((e, a))
    complete = 0
    for (d, q), per_consumer in by_cycle.items():
        assert d != 1  # weight 0
        source_plan = plan.source_plan(d, q)
        for consumer, anchors in per_consumer.items():
            assert len(anchors) == len(set(anchors))  # never twice within a cycle
            share = {(e, a) for e, s, t in zip(*source_plan.pieces_of(consumer)) for a in range(s, t)}
            assert set(anchors) <= share
            complete += len(anchors) == len(share)
        flat = [x for anchors in per_consumer.values() for x in anchors]
        assert len(flat) == len(set(flat))  # consumers are disjoint within a cycle
    assert complete > 20  # the tiny dataset 3 (6 anchors) cycled many times
    assert max(q for d, q in by_cycle if d == 3) > 10
    # Cycles reshuffle: two cycles of dataset 2 order its episodes differently.
    assert not np.array_equal(plan.source_plan(2, 0).episode_order, plan.source_plan(2, 1).episode_order)


def test_weighted_pool_is_bounded_per_source():
    plan = _weighted(samples_per_epoch=3000, world_size=1, workers_per_rank=1, pool_size=6,
                     layout=MixtureLayout.from_anchor_counts([np.full(40, 25), np.full(30, 10), np.full(20, 7)]),
                     weights=[4.0, 1.0, 1.0])
    assert plan.pool_sizes.tolist() == [4, 1, 1]
    draws = plan.consumer(0).draws(0, 3000)
    for d in range(3):
        mine = draws.dataset == d
        sub = type(draws)(*(f[mine] for f in draws))
        assert 1 <= _max_open(sub).max() <= plan.pool_sizes[d]
    assert _max_open(draws).max() <= 6  # 4 + 1 + 1 = pool_size here
    order = admission_order(type(draws)(*(f[:50] for f in draws)))
    first = [(d, e) for d, e, f in zip(draws.dataset[:50].tolist(), draws.episode[:50].tolist(), draws.first[:50].tolist()) if f]
    assert order == first  # from draw 0 every piece's first draw is in range


def test_source_pool_sizes():
    assert source_pool_sizes(np.array([6.0, 1.0, 1.0, 0.0]), 8).tolist() == [6, 1, 1, 0]
    assert source_pool_sizes(np.ones(400), 8).tolist() == [1] * 400  # bound: pool_size + sources
    assert source_pool_sizes(np.array([1.0, 1.0]), 16).tolist() == [8, 8]
    with pytest.raises(PlanError, match="pool_size must be an int >= 1, got 0"):
        source_pool_sizes(np.ones(2), 0)


# -- weighted: determinism, skip-ahead, resume speed ---------------------------------------


def test_weighted_draws_are_deterministic_and_keyed():
    a = _fields(_weighted().consumer(3).draws(0, 700))
    assert a == _fields(_weighted().consumer(3).draws(0, 700))
    assert a != _fields(_weighted(seed=8).consumer(3).draws(0, 700))
    assert a != _fields(_weighted(epoch=2).consumer(3).draws(0, 700))
    assert a != _fields(_weighted().consumer(2).draws(0, 700))
    assert len({cycle_key(e, d, q) for e in range(4) for d in range(4) for q in range(50)}) == 800
    assert 0 <= cycle_key(10**6, 399, 10**9) < 2**63


@pytest.mark.parametrize("splits", [(1,), (17, 333), (4095, 4096, 4097), (1, 2, 3, 1000, 2999)])
def test_skip_ahead_equals_sequential_generation(splits):
    plan = _weighted(block_size=512, samples_per_epoch=20_000)
    sequential = plan.consumer(1).draws(0, len(plan.consumer(1)))
    edges = [0, *splits, len(plan.consumer(1))]
    pieces = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        pieces.append(_weighted(block_size=512, samples_per_epoch=20_000).consumer(1).draws(lo, hi))  # a fresh object: a resume
    joined = type(sequential)(*(np.concatenate(f) for f in zip(*pieces)))
    assert _fields(joined) == _fields(sequential)
    labels = SourceLabels(plan.weights, seed=7, epoch=1, consumer=1, block_size=512)
    assert np.array_equal(labels.counts_before(1234), np.bincount(sequential.dataset[:1234], minlength=4))


def test_resume_at_ten_million_is_arithmetic():
    layout = MixtureLayout.from_anchor_counts([np.full(5000, 200), np.full(300, 50), np.array([40, 60])])
    kwargs = {"samples_per_epoch": 10**8, "seed": 1, "epoch": 3, "world_size": 4, "workers_per_rank": 2}

    def draws_at(position: int):
        return WeightedMixturePlan.create(layout, [5.0, 3.0, 1.0], **kwargs).consumer(5).draws(position, position + 64)

    _, near = lines_executed(draws_at, 0)
    draws, far = lines_executed(draws_at, 10**7)
    # Skipping 10^7 draws costs per block of labels (65,536 draws), never per draw.
    blocks = 10**7 // 65536
    print(f"weighted draws: {near} Python lines at 0, {far} at 1e7 ({blocks} label blocks skipped)")
    assert far <= near + 60 * blocks
    # The same draws reached by a different route (a range straddling the point).
    again = WeightedMixturePlan.create(layout, [5.0, 3.0, 1.0], **kwargs).consumer(5).draws(10**7 - 5000, 10**7 + 64)
    assert _fields(again)[5000:] == _fields(draws)


# -- errors -------------------------------------------------------------------------------


def test_errors_name_the_value_and_the_dataset():
    with pytest.raises(PlanError, match=r"dataset 'tiny' has 2 anchors, fewer than the 4 consumers \(world_size 2 x 2 workers\)"):
        WeightedMixturePlan.create(
            MixtureLayout.from_anchor_counts([np.array([10]), np.array([2])]), [1, 1], names=["big", "tiny"],
            samples_per_epoch=10, seed=0, epoch=0, world_size=2, workers_per_rank=2,
        )
    # A starved dataset with weight 0 is fine: it is never drawn.
    WeightedMixturePlan.create(MixtureLayout.from_anchor_counts([np.array([10]), np.array([2])]), [1, 0],
                               samples_per_epoch=10, seed=0, epoch=0, world_size=2, workers_per_rank=2)
    with pytest.raises(PlanError, match="3 weights and 4 names for 4 datasets"):
        _weighted(weights=[1, 1, 1])
    with pytest.raises(PlanError, match="samples_per_epoch must be an int >= 1, got 0"):
        _weighted(samples_per_epoch=0)
    with pytest.raises(PlanError, match="non-negative numbers with a positive sum"):
        _weighted(weights=[1, np.nan, 1, 1])
    with pytest.raises(PlanError, match=r"draw range \[10, 3001\) must satisfy 0 <= start <= stop <= 750"):
        _weighted().consumer(0).draws(10, 3001)
    with pytest.raises(PlanError, match=r"consumer must be in \[0, 4\), got 4"):
        _weighted().consumer(4)


def _max_open(draws) -> np.ndarray:
    """Open pieces after each draw, replaying first/last flags (a piece opens at its first)."""
    delta = draws.first.astype(np.int64) - np.concatenate([[0], draws.last[:-1].astype(np.int64)])
    return np.cumsum(delta)
