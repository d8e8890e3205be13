"""Pool schedule contracts: exactly-once draws, bounded pool, instant and exact skip-ahead."""

from __future__ import annotations

import heapq
import itertools
from collections import Counter

import numpy as np
import pytest

from lerobot_shards.reader.plan import PlanError, PoolSchedule, plan_epoch
from tests.work_counter import lines_executed


def make(lengths, *, pool_size=4, seed=0, epoch=0, consumer=0, shuffle=True, block_size=64, starts=None):
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.zeros(len(lengths), dtype=np.int64) if starts is None else np.asarray(starts, dtype=np.int64)
    return PoolSchedule(
        np.arange(len(lengths)) + 100,
        starts,
        starts + lengths,
        pool_size=pool_size,
        seed=seed,
        epoch=epoch,
        consumer=consumer,
        shuffle=shuffle,
        block_size=block_size,
    )


def spans_by_brute_force(schedule: PoolSchedule) -> dict[int, tuple[int, int]]:
    """piece -> (first draw, last draw), from the full draw sequence."""
    piece, _ = schedule.draws(0, len(schedule))
    spans: dict[int, tuple[int, int]] = {}
    for t, p in enumerate(piece.tolist()):
        first = spans.get(p, (t, t))[0]
        spans[p] = (first, t)
    return spans


CASES = [
    # (lengths, pool_size, block_size)
    ([5, 0, 17, 3, 9, 1, 30, 2, 8], 3, 7),
    ([40] * 12, 4, 64),
    ([1] * 50, 16, 5),
    ([100, 1, 1, 1, 1, 100], 2, 13),
    ([7], 8, 3),
    (list(np.random.default_rng(1).integers(0, 60, 120)), 16, 256),
]


@pytest.mark.parametrize(("lengths", "pool_size", "block_size"), CASES)
@pytest.mark.parametrize("shuffle", [True, False])
def test_every_anchor_drawn_exactly_once(lengths, pool_size, block_size, shuffle):
    starts = np.arange(len(lengths)) * 3  # pieces that do not start at anchor 0
    schedule = make(lengths, pool_size=pool_size, block_size=block_size, shuffle=shuffle, starts=starts)
    piece, pos = schedule.draws(0, len(schedule))
    assert len(schedule) == sum(lengths) == len(piece)
    drawn = Counter(zip(piece.tolist(), pos.tolist()))
    assert max(drawn.values()) == 1
    expected = {(j, starts[j] + i) for j, n in enumerate(lengths) for i in range(n)}
    assert set(drawn) == expected


@pytest.mark.parametrize(("lengths", "pool_size", "block_size"), CASES)
def test_pool_never_holds_more_than_pool_size(lengths, pool_size, block_size):
    schedule = make(lengths, pool_size=pool_size, block_size=block_size)
    spans = spans_by_brute_force(schedule)
    open_count = np.zeros(len(schedule) + 1, dtype=np.int64)
    for first, last in spans.values():
        open_count[first] += 1
        open_count[last + 1] -= 1
    assert np.cumsum(open_count).max() <= min(pool_size, np.count_nonzero(lengths))
    # Each slot serves its pieces one after another, in plan order.
    for s in range(schedule.num_slots):
        mine = sorted(j for j in spans if schedule.slot_of_piece[j] == s)
        for a, b in itertools.pairwise(mine):
            assert spans[a][1] < spans[b][0]


@pytest.mark.parametrize(("lengths", "pool_size", "block_size"), CASES)
def test_admission_order_matches_brute_force(lengths, pool_size, block_size):
    schedule = make(lengths, pool_size=pool_size, block_size=block_size)
    spans = spans_by_brute_force(schedule)
    n = len(schedule)
    rng = np.random.default_rng(0)
    for start, stop in [(0, n), (0, 1), (n - 1, n), *(sorted(rng.integers(0, n + 1, 2)) for _ in range(10))]:
        got = schedule.admission_order(int(start), int(stop))
        expected = sorted((f, last, p) for p, (f, last) in spans.items() if f < stop and last >= start and start < stop)
        assert list(zip(got.first_draw.tolist(), got.last_draw.tolist(), got.piece.tolist())) == expected
    for t in rng.integers(0, n, 10).tolist():
        open_now = {p for p, (f, last) in spans.items() if f <= t <= last}
        assert set(schedule.open_pieces_at(t).tolist()) == open_now


def test_slots_are_filled_greedily_by_load():
    lengths = np.random.default_rng(5).integers(1, 50, 40)
    schedule = make(lengths, pool_size=6)
    heap, expected = [(0, s) for s in range(6)], []
    for n in lengths.tolist():
        load, s = heapq.heappop(heap)
        expected.append(s)
        heapq.heappush(heap, (load + n, s))
    np.testing.assert_array_equal(schedule.slot_of_piece, expected)
    loads = np.bincount(expected, weights=lengths)
    assert loads.max() - loads.min() <= lengths.max()
    np.testing.assert_array_equal(schedule.slot_counts, loads)


def test_empty_pieces_get_no_slot():
    schedule = make([0, 3, 0, 2], pool_size=8)
    assert schedule.num_slots == 2
    np.testing.assert_array_equal(schedule.slot_of_piece, [-1, 0, -1, 1])


def test_slices_concatenate_to_the_full_sequence():
    lengths = np.random.default_rng(2).integers(1, 300, 60)
    whole = make(lengths, pool_size=8, block_size=97).draws(0, int(lengths.sum()))
    rng = np.random.default_rng(3)
    for trial in range(5):
        # Fresh schedules (cold caches) and one reused schedule (warm caches, random jumps).
        schedule = make(lengths, pool_size=8, block_size=97)
        cuts = np.sort(rng.integers(0, lengths.sum() + 1, 12 if trial else 2000))
        bounds = [0, *cuts.tolist(), int(lengths.sum())]
        parts = [schedule.draws(a, b) for a, b in itertools.pairwise(bounds)]
        np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), whole[0])
        np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), whole[1])
    for a, b in (sorted(rng.integers(0, lengths.sum() + 1, 2)) for _ in range(20)):
        piece, pos = schedule.draws(int(a), int(b))
        np.testing.assert_array_equal(piece, whole[0][a:b])
        np.testing.assert_array_equal(pos, whole[1][a:b])


def test_deterministic_and_keyed_by_consumer():
    lengths = np.full(30, 20)
    a = make(lengths, consumer=3).draws(0, 600)
    b = make(lengths, consumer=3).draws(0, 600)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], make(lengths, consumer=4).draws(0, 600)[0])
    assert not np.array_equal(a[0], make(lengths, consumer=3, epoch=1).draws(0, 600)[0])


def test_piece_permutation_does_not_depend_on_consumer():
    lengths = np.full(10, 25)
    per_piece = []
    for consumer in (0, 1):
        piece, pos = make(lengths, consumer=consumer).draws(0, 250)
        per_piece.append([pos[piece == j].tolist() for j in range(10)])
    assert per_piece[0] == per_piece[1]
    assert per_piece[0][0] != list(range(25)), "anchors inside a piece must be permuted"


def test_no_shuffle_draws_in_plan_order():
    schedule = make([3, 0, 2], starts=[4, 0, 1], shuffle=False, pool_size=16)
    assert schedule.num_slots == 1
    piece, pos = schedule.draws(0, 5)
    assert list(zip(piece.tolist(), pos.tolist())) == [(0, 4), (0, 5), (0, 6), (2, 1), (2, 2)]


def test_interleaving_is_uniform_across_block_edges():
    # Two slots of 2 anchors each: 6 equally likely label orders. block_size=3 puts a
    # block edge inside the sequence, so the hypergeometric split is exercised.
    seen = Counter()
    trials = 6000
    for consumer in range(trials):
        schedule = make([2, 2], pool_size=2, block_size=3, consumer=consumer)
        seen[tuple(schedule.slot_of_piece[schedule.draws(0, 4)[0]].tolist())] += 1
    assert len(seen) == 6
    expected, sigma = trials / 6, (trials * (1 / 6) * (5 / 6)) ** 0.5
    assert all(abs(n - expected) < 5 * sigma for n in seen.values()), seen


def test_pool_mixes_many_episodes():
    lengths = np.random.default_rng(4).integers(50, 200, 2000)
    schedule = make(lengths, pool_size=16, block_size=4096)
    piece, _ = schedule.draws(0, len(schedule) // 2)
    windows = piece[: len(piece) // 64 * 64].reshape(-1, 64)  # (windows, 64 draws)
    distinct = np.array([len(np.unique(w)) for w in windows])
    print(f"distinct episodes per 64 draws (pool 16): mean {distinct.mean():.1f}, min {distinct.min()}")
    assert distinct.mean() >= 8


def test_skip_ahead_is_arithmetic():
    # A 2e7-anchor consumer: 100k pieces of 200 anchors. Counted, not timed: reaching draw
    # 1e7 costs Python lines per block of 65,536 draws (one hypergeometric draw each), never
    # per draw or per piece.
    lengths = np.full(100_000, 200)
    schedule = make(lengths, pool_size=16, block_size=65536, seed=1, consumer=7)

    def reach(start: int):
        fresh = make(lengths, pool_size=16, block_size=65536, seed=1, consumer=7)
        return fresh.draws(start, start + 256), fresh.admission_order(start, start + 256)

    _, near = lines_executed(reach, 0)
    _, far = lines_executed(reach, 10_000_000)
    blocks = 10_000_000 // 65536
    print(f"skip to draw 1e7 of 2e7: {far} Python lines vs {near} at draw 0 ({blocks} blocks)")
    assert far <= near + 60 * blocks
    piece, pos = schedule.draws(10_000_000, 10_000_256)
    spans = schedule.admission_order(10_000_000, 10_000_256)
    assert len(piece) == 256 and len(np.unique(piece)) > 1
    assert set(piece.tolist()) <= set(spans.piece.tolist())
    assert len(schedule.open_pieces_at(10_000_000)) == 16


def test_from_plan_uses_the_plans_pieces():
    counts = np.random.default_rng(0).integers(0, 30, 40)
    plan = plan_epoch(counts, seed=3, epoch=2, world_size=2, workers_per_rank=2, shuffle=True)
    covered = Counter()
    for c in range(plan.num_consumers):
        schedule = PoolSchedule.from_plan(plan, c, pool_size=4)
        piece, pos = schedule.draws(0, len(schedule))
        assert len(schedule) == plan.consumer_counts[c]
        episode, _, _ = plan.pieces_of(c)
        covered.update(zip(episode[piece].tolist(), pos.tolist()))
    assert max(covered.values()) == 1 and len(covered) == plan.num_anchors - plan.dropped


def test_empty_schedule():
    schedule = make([], pool_size=4)
    assert len(schedule) == 0 and schedule.num_slots == 0
    assert all(len(a) == 0 for a in schedule.draws(0, 0))
    assert len(schedule.admission_order().piece) == 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.draws(5, 4), r"draw range \[5, 4\) must satisfy 0 <= start <= stop <= 10"),
        (lambda s: s.draws(0, 11), r"draw range \[0, 11\) must satisfy"),
        (lambda s: s.admission_order(-1, 3), r"draw range \[-1, 3\)"),
        (lambda s: s.open_pieces_at(10), r"draw t must be in \[0, 10\), got 10"),
    ],
)
def test_out_of_range_draws_are_rejected(call, match):
    with pytest.raises(PlanError, match=match):
        call(make([4, 6]))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pool_size": 0}, r"pool_size must be an int >= 1, got 0"),
        ({"block_size": 0}, r"block_size must be an int >= 1, got 0"),
        ({"seed": -3}, r"seed must be an int >= 0, got -3"),
        ({"starts": [2, -1]}, r"piece 1 has range \[-1, 5\); expected 0 <= start <= stop"),
    ],
)
def test_bad_construction_is_rejected(kwargs, match):
    with pytest.raises(PlanError, match=match):
        make([4, 6], **kwargs)


def test_mismatched_arrays_are_rejected():
    with pytest.raises(PlanError, match=r"must be 1-D of one length, got shapes \(2,\), \(1,\), \(2,\)"):
        PoolSchedule([0, 1], [0], [1, 2], pool_size=1, seed=0, epoch=0, consumer=0, shuffle=True)
