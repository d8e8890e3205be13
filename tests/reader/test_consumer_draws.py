"""SegmentDraws: a consumer segment's draws as episode coordinates (pure, no files)."""

import numpy as np

from lerobot_shards.reader.plan import Admission, Block, Draw, Segment, SegmentDraws, first_draws, plan_epoch, segment_blocks


def test_draws_cover_the_segment_once_and_flag_last_draws():
    counts = np.array([5, 0, 9, 1, 14, 3], dtype=np.int64)
    plan = plan_epoch(counts, seed=3, epoch=1, world_size=2, workers_per_rank=2, shuffle=True)
    seen = []
    for consumer in range(plan.num_consumers):
        total = int(plan.consumer_counts[consumer])
        draws = SegmentDraws(plan, consumer, 0, total, pool_size=2)
        rows = list(draws)
        assert len(rows) == total
        assert sorted(set(draws.admission)) == sorted({p for p, _, _ in rows})
        # Each episode's last draw is flagged exactly once, at its final appearance.
        for position in {p for p, _, _ in rows}:
            flags = [last for p, _, last in rows if p == position]
            assert flags.count(True) == 1 and flags[-1]
        seen += [(p, a) for p, a, _ in rows]
    assert len(seen) == len(set(seen)) == plan.per_rank_count * 2


def test_a_resumed_segment_is_the_tail_of_the_full_one():
    plan = plan_epoch(np.array([30, 40, 7], dtype=np.int64), seed=0, epoch=0, world_size=1, workers_per_rank=1, shuffle=True)
    full = [(p, a) for p, a, _ in SegmentDraws(plan, 0, 0, 77, pool_size=2)]
    tail = [(p, a) for p, a, _ in SegmentDraws(plan, 0, 50, 77, pool_size=2)]
    assert tail == full[50:]


def test_blocks_name_what_they_hold_and_admit_each_piece_before_its_draws():
    plan = plan_epoch(np.array([6, 3, 8], dtype=np.int64), seed=1, epoch=0, world_size=1, workers_per_rank=1, shuffle=True)
    (segment_iter,) = segment_blocks(plan, [Segment(consumer=0, start=0, stop=17)], pool_size=2, ahead=1)
    admitted, drawn = [], []
    for block in segment_iter:
        assert isinstance(block, Block) and all(isinstance(a, Admission) for a in block.admitted)
        admitted += [a.piece for a in block.admitted]
        for draw in block.draws:
            assert (
                isinstance(draw, Draw) and draw.piece in admitted and draw.episode == draw.piece
            )  # one pack: pieces are episodes
            drawn.append((draw.episode, draw.anchor))
    assert sorted(drawn) == [(e, a) for e, n in enumerate([6, 3, 8]) for a in range(n)]
    assert sorted(admitted) == [0, 1, 2]


def test_first_draws_cut_a_consumers_segments_to_a_first_batch():
    """A first batch built in the training process reads only the draws it holds (and so
    admits only their pieces): the segments cut to that many draws, across a resume's phases."""
    segments = [Segment(0, 10, 13), Segment(2, 0, 40), Segment(1, 5, 9)]
    assert first_draws(segments, 2) == [Segment(0, 10, 12)]
    assert first_draws(segments, 3) == [Segment(0, 10, 13)]
    assert first_draws(segments, 16) == [Segment(0, 10, 13), Segment(2, 0, 13)]
    assert first_draws(segments, 100) == segments
    assert first_draws(segments, 0) == []
    plan = plan_epoch(np.array([6, 3, 8], dtype=np.int64), seed=1, epoch=0, world_size=1, workers_per_rank=1, shuffle=True)
    full = [(p, a) for p, a, _ in SegmentDraws(plan, 0, 0, 17, pool_size=2)]
    (cut,) = first_draws([Segment(0, 0, 17)], 5)
    assert [(p, a) for p, a, _ in SegmentDraws(plan, 0, cut.start, cut.stop, pool_size=2)] == full[:5]
