"""SegmentDraws learns admissions lazily, window by window: the answer must be the eager one.

Rules: over segments of many schedule blocks (65,536 draws each), the admission order and the
last-draw flags equal ``PoolSchedule.admission_order`` over the whole segment; before each
block the prefetcher is told every episode the block needs plus ``ahead`` more; and starting a
segment costs the same at its beginning and deep inside it.
"""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_shards.reader.plan import MAX_LOOKAHEAD_DRAWS, PoolSchedule, SegmentDraws, plan_epoch
from tests.work_counter import lines_executed


@pytest.fixture(scope="module")
def plan():
    lengths = np.random.default_rng(0).integers(1, 900, size=1_500)  # ~675k anchors, uneven
    return plan_epoch(lengths.astype(np.int64), seed=1, epoch=2, world_size=1, workers_per_rank=2, shuffle=True)


@pytest.mark.parametrize("start_fraction", [0.0, 0.37])
def test_lazy_admissions_equal_the_eager_ones(plan, start_fraction):
    consumer, ahead = 1, 5
    stop = int(plan.consumer_counts[consumer])
    start = int(stop * start_fraction)
    eager = PoolSchedule.from_plan(plan, consumer, pool_size=8).admission_order(start, stop)
    episode_of_piece = plan.pieces_of(consumer)[0]
    eager_order = [int(episode_of_piece[p]) for p in eager.piece]
    first_draw = dict(zip(eager_order, eager.first_draw.tolist()))
    last_draw = dict(zip(eager_order, eager.last_draw.tolist()))

    draws = SegmentDraws(plan, consumer, start, stop, pool_size=8)
    admitted, t = [], start
    for new, block in draws.blocks(ahead=ahead):
        admitted += new
        block_stop = t + len(block)
        needed = {position for position, _, _ in block}
        assert needed <= set(admitted), "a block drew an episode the prefetcher was not told about"
        later = [p for p in eager_order if block_stop <= first_draw[p] < block_stop + MAX_LOOKAHEAD_DRAWS]
        assert set(later[:ahead]) <= set(admitted), "prefetch was not told far enough ahead"
        for offset, (position, _, last) in enumerate(block):
            assert last == (last_draw[position] == t + offset)
        t = block_stop
    assert t == stop and admitted == eager_order
    assert draws.admission == eager_order


def test_starting_deep_in_a_long_segment_costs_no_more_than_at_its_start(plan):
    stop = int(plan.consumer_counts[0])
    lines = {}
    for start in (0, stop - 5_000):
        _, lines[start] = lines_executed(lambda: next(SegmentDraws(plan, 0, start, stop, pool_size=16).blocks(ahead=20)))
    print(f"first block of draws: Python lines by start: {lines}")
    assert lines[stop - 5_000] <= 2 * lines[0] + 2_000, lines
