"""Mixture planning contracts (pure numpy): an epoch is ``plan_epoch`` over pieces, so the
union is drawn exactly once by default; weighted epochs give each source its exact quota,
cycling through its anchors exactly once per cycle across epochs; one pool bounds the open
pieces over all datasets together in both modes; reaching any epoch is arithmetic."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from lerobot_shards.reader.plan import (
    MixtureLayout,
    PieceMap,
    PlanError,
    plan_epoch,
    proportional_pieces,
    segment_blocks,
    source_quotas,
    weighted_pieces,
)
from tests.work_counter import lines_executed

# Four datasets: one with 0-anchor episodes, one empty, a tiny one.
COUNTS = [np.array([5, 0, 9, 3, 12]), np.array([], dtype=np.int64), np.array([7, 7, 1, 30]), np.array([2, 4])]
LAYOUT = MixtureLayout.from_anchor_counts(COUNTS)
TOTAL = 5 + 9 + 3 + 12 + 7 + 7 + 1 + 30 + 2 + 4
WEIGHTS = [3.0, 0.0, 2.0, 1.0]


def _draws(plan, consumer: int, pool_size: int, pieces: PieceMap | None = None) -> list[tuple[int, int, int, bool]]:
    """Consumer ``consumer``'s whole stream as ``(piece, episode, anchor, last)`` draws."""
    segment = [(consumer, 0, int(plan.consumer_counts[consumer]))]
    blocks = next(iter(segment_blocks(plan, segment, pool_size=pool_size, ahead=1, pieces=pieces)))
    return [draw for _, draws in blocks for draw in draws]


def _max_open(draws) -> int:
    open_pieces, most = set(), 0
    for piece, _, _, last in draws:
        open_pieces.add(piece)
        most = max(most, len(open_pieces))
        if last:
            open_pieces.discard(piece)
    return most


# -- layout -------------------------------------------------------------------------------


def test_layout_maps_global_episodes_to_datasets_and_back():
    assert LAYOUT.episode_offsets.tolist() == [0, 5, 5, 9, 11]
    assert LAYOUT.dataset_anchors.tolist() == [29, 0, 45, 6] and LAYOUT.num_anchors == TOTAL
    dataset, local = LAYOUT.to_local(np.arange(11))
    # The empty dataset 1 owns no global id: 5 belongs to dataset 2.
    assert dataset.tolist() == [0] * 5 + [2] * 4 + [3] * 2
    assert local.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1]
    assert LAYOUT.to_global(dataset, local).tolist() == list(range(11))
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
    pieces = proportional_pieces(LAYOUT)
    assert pieces.episode.tolist() == list(range(11)) and pieces.whole.all()  # piece i is episode i
    plan = plan_epoch(pieces.counts, seed=3, epoch=2, world_size=world_size, workers_per_rank=workers, shuffle=True)
    seen, per_rank = [], np.zeros(world_size, dtype=np.int64)
    for consumer in range(world_size * workers):
        draws = _draws(plan, consumer, pool_size=2)
        assert all(anchor < LAYOUT.anchor_counts[episode] for _, episode, anchor, _ in draws)
        seen += [(episode, anchor) for _, episode, anchor, _ in draws]
        per_rank[consumer // workers] += len(draws)
    assert len(seen) == len(set(seen)) == TOTAL - plan.dropped
    assert plan.dropped < world_size and (per_rank == TOTAL // world_size).all()


def test_one_pool_bounds_open_pieces_over_all_datasets_in_both_modes():
    """400 datasets: a consumer never holds more than ``pool_size`` pieces open, whichever
    mode (the old weighted plan held one open episode per source: 400 here)."""
    rng = np.random.default_rng(0)
    layout = MixtureLayout.from_anchor_counts([rng.integers(3, 30, size=3) for _ in range(400)])
    weights = rng.uniform(0.1, 5.0, size=400)
    for pieces, mapping in (
        (proportional_pieces(layout), None),
        (p := weighted_pieces(layout, weights, samples_per_epoch=8000, seed=1, epoch=3), PieceMap(p, layout, 1, True)),
    ):
        plan = plan_epoch(pieces.counts, seed=1, epoch=3, world_size=2, workers_per_rank=2, shuffle=True)
        for consumer in range(4):
            draws = _draws(plan, consumer, pool_size=8, pieces=mapping)
            assert _max_open(draws) <= 8
        assert len({int(layout.to_local(e)[0]) for e in pieces.episode.tolist()}) > 300  # most sources take part


# -- weighted: quotas and cycles ----------------------------------------------------------


def test_quotas_are_exact_and_split_by_weight():
    quotas = source_quotas([5, 3, 1, 1], 1001, dataset_anchors=np.array([10, 10, 10, 10]))
    assert quotas.sum() == 1001 and quotas.tolist() == [501, 300, 100, 100]  # 500.5 takes the remainder
    assert source_quotas([1, 1, 1], 2, dataset_anchors=np.array([5, 5, 5])).tolist() == [1, 1, 0]  # ties: earlier first
    assert source_quotas(WEIGHTS, 3000, dataset_anchors=LAYOUT.dataset_anchors).tolist() == [1500, 0, 1000, 500]
    with pytest.raises(PlanError, match="dataset 'empty' has weight 1 but no anchor"):
        source_quotas([1, 1], 10, dataset_anchors=np.array([3, 0]), names=["a", "empty"])
    with pytest.raises(PlanError, match="samples_per_epoch must be an int >= 1, got 0"):
        source_quotas([1], 0, dataset_anchors=np.array([3]))
    with pytest.raises(PlanError, match="non-negative numbers with a positive sum"):
        source_quotas([1, np.nan], 5, dataset_anchors=np.array([3, 3]))
    with pytest.raises(PlanError, match="3 weights and 4 names for 4 datasets"):
        source_quotas([1, 1, 1], 5, dataset_anchors=LAYOUT.dataset_anchors)


@pytest.mark.parametrize("shuffle", [True, False])
def test_weighted_epochs_give_each_source_its_quota_and_cycle_exactly_once(shuffle):
    """Over 12 epochs each source streams its anchors in cycles: within a cycle no anchor
    twice, every complete cycle is every anchor once, and the two pieces of an episode cut
    by an epoch boundary never share an anchor."""
    quotas = source_quotas(WEIGHTS, 37, dataset_anchors=LAYOUT.dataset_anchors)
    stream: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    for epoch in range(12):
        pieces = weighted_pieces(LAYOUT, WEIGHTS, samples_per_epoch=37, seed=7, epoch=epoch, shuffle=shuffle)
        mapping = PieceMap(pieces, LAYOUT, 7, shuffle)
        per_source = np.zeros(4, np.int64)
        for piece in range(len(pieces)):
            dataset = int(LAYOUT.to_local(pieces.episode[piece])[0])
            anchors = mapping.anchors(piece, np.arange(pieces.counts[piece])).tolist()
            per_source[dataset] += len(anchors)
            stream[dataset] += [(int(pieces.cycle[piece]), int(pieces.episode[piece]), a) for a in anchors]
        assert per_source.tolist() == quotas.tolist()  # the quota, every epoch
    for dataset, items in stream.items():
        by_cycle: dict[int, list] = defaultdict(list)
        for cycle, episode, anchor in items:
            by_cycle[cycle].append((episode, anchor))
        total = int(LAYOUT.dataset_anchors[dataset])
        for cycle, anchors in by_cycle.items():
            assert len(anchors) == len(set(anchors)), f"dataset {dataset} cycle {cycle}: an anchor twice"
            if cycle < max(by_cycle):
                assert len(anchors) == total, f"dataset {dataset} cycle {cycle} is incomplete"
    assert max(c for c, _, _ in stream[3]) >= 11  # the tiny source (6 anchors, quota 6 or 7) cycled every epoch


def test_weighted_pieces_are_deterministic_and_keyed():
    def arrays(**kwargs):
        args = {"samples_per_epoch": 500, "seed": 7, "epoch": 2, **kwargs}
        pieces = weighted_pieces(LAYOUT, WEIGHTS, **args)
        return [pieces.episode.tolist(), pieces.cycle.tolist(), pieces.lo.tolist(), pieces.hi.tolist()]

    assert arrays() == arrays()
    assert arrays() != arrays(seed=8) and arrays() != arrays(epoch=3)


def test_reaching_a_late_epoch_is_arithmetic():
    """Epoch 10^9 costs what epoch 1 costs: the stream's position is jumped to, not replayed."""
    layout = MixtureLayout.from_anchor_counts([np.full(500, 20), np.full(30, 50), np.array([40, 60])])

    def pieces_at(epoch: int):
        return weighted_pieces(layout, [5.0, 3.0, 1.0], samples_per_epoch=20_000, seed=1, epoch=epoch)

    _, near = lines_executed(pieces_at, 1)
    late, far = lines_executed(pieces_at, 10**9)
    print(f"weighted pieces: {near} Python lines at epoch 1, {far} at epoch 1e9")
    assert far <= 2 * near + 100
    assert late.counts.sum() == 20_000


def test_errors_name_the_value():
    with pytest.raises(PlanError, match="epoch must be an int >= 0, got -1"):
        weighted_pieces(LAYOUT, WEIGHTS, samples_per_epoch=10, seed=0, epoch=-1)
    with pytest.raises(PlanError, match="dataset '#1' has weight 1 but no anchor"):
        weighted_pieces(LAYOUT, [1, 1, 1, 1], samples_per_epoch=10, seed=0, epoch=0)
