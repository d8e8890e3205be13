"""Resume chains, property-tested on the pure arithmetic (no data read).

Hundreds of random epochs: an index of realistic size, planned on a random shape (up to 64
ranks x 8 workers), then resumed up to 5 times, each time at a random batch edge onto a
random shape and batch size. Whatever each phase's loader consumed is derived from the
DataLoader model (checked against torch in tests/reader/test_resume.py) and the streams
``resume_streams`` gives that phase. Contracts: every anchor of the epoch is served exactly
once, except the plan's drop and at most ``world_size - 1`` per re-split; every phase gives
each rank the same count; with an unchanged shape nothing is re-split.
"""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_shards.reader.plan import Phase, plan_epoch, resume_streams, worker_progress

CHAINS = 240


def batch_edges(worker_counts: np.ndarray, batch_size: int, drop_last: bool) -> np.ndarray:
    """Per-rank samples consumed after each batch of a DataLoader over these worker streams."""
    full, rest = np.divmod(worker_counts, batch_size)
    sizes, order = [], []
    for w, (n_full, remainder) in enumerate(zip(full.tolist(), rest.tolist())):
        n = n_full + (1 if remainder and not drop_last else 0)
        sizes.append(np.where(np.arange(n) < n_full, batch_size, remainder))
        order.append(np.stack([np.arange(n), np.full(n, w)], axis=1))
    if not sizes:
        return np.zeros(1, dtype=np.int64)
    sizes_all, order_all = np.concatenate(sizes), np.concatenate(order)
    ranked = np.lexsort((order_all[:, 1], order_all[:, 0]))  # round robin: batch number, then worker
    return np.concatenate([[0], np.cumsum(sizes_all[ranked])])


def served(streams, consumer: int, delivered: int) -> list[tuple[int, int, int]]:
    """The first ``delivered`` draws of a consumer, as (plan stream, start, stop) intervals."""
    out = []
    sources, starts, stops = streams.segments_of(consumer)
    for source, start, stop in zip(sources.tolist(), starts.tolist(), stops.tolist()):
        if delivered <= 0:
            break
        take = min(delivered, stop - start)
        out.append((source, start, start + take))
        delivered -= take
    return out


def random_shape(rng) -> tuple[int, int]:
    world = int(rng.choice([1, 2, 3, 4, 7, 8, 16, 64]))
    workers = int(rng.choice([0, 1, 2, 3, 8]))
    return world, workers


@pytest.mark.parametrize("chunk", range(4))
def test_random_chains_serve_every_anchor_exactly_once(chunk):
    for seed in range(chunk * CHAINS // 4, (chunk + 1) * CHAINS // 4):
        rng = np.random.default_rng(seed)
        episodes = int(rng.integers(50, 3000))
        anchors = rng.integers(0, 400, episodes)
        world, workers = random_shape(rng)
        phases = [Phase(0, world, workers, int(rng.integers(1, 65)), bool(rng.random() < 0.2))]
        plan = plan_epoch(anchors, seed=seed, epoch=1, world_size=world, workers_per_rank=max(1, workers), shuffle=True)
        plan_counts = plan.consumer_counts
        streams = resume_streams(plan_counts, phases[:1], resumed_at=0, world_size=world, workers_per_rank=max(1, workers))
        consumed: list[tuple[int, int, int]] = []
        resplit_drops = []
        for _ in range(int(rng.integers(0, 6))):
            phase = phases[-1]
            per_rank = streams.consumer_counts.reshape(phase.world_size, phase.workers_per_rank)
            assert (per_rank.sum(axis=1) == per_rank.sum(axis=1)[0]).all(), f"seed {seed}: unequal ranks"
            edges = batch_edges(per_rank[0], phase.batch_size, phase.drop_last)
            step = int(rng.choice(edges))
            progress = [
                worker_progress(row, batch_size=phase.batch_size, samples_consumed=step, drop_last=phase.drop_last)
                for row in per_rank
            ]
            delivered = np.concatenate([p.delivered for p in progress])
            for consumer, count in enumerate(delivered.tolist()):
                consumed += served(streams, consumer, count)
            world, workers = random_shape(rng) if rng.random() < 0.8 else (phase.world_size, phase.num_workers)
            batch = int(rng.integers(1, 65)) if rng.random() < 0.7 else phase.batch_size
            nxt = Phase(phase.start + step, world, workers, batch, bool(rng.random() < 0.2))
            before = streams.dropped
            streams = resume_streams(
                plan_counts, phases, resumed_at=nxt.start, world_size=world, workers_per_rank=nxt.workers_per_rank
            )
            resplit_drops.append((streams.dropped - before, world))
            if (phase.world_size, phase.workers_per_rank) == (world, nxt.workers_per_rank):
                assert streams.dropped == before, f"seed {seed}: an unchanged shape dropped anchors"
            phases.append(nxt)
        # The last phase runs to the end of the epoch.
        for consumer, count in enumerate(streams.consumer_counts.tolist()):
            consumed += served(streams, consumer, count)
        per_rank = streams.consumer_counts.reshape(streams.world_size, streams.workers_per_rank).sum(axis=1)
        assert (per_rank == per_rank[0]).all(), f"seed {seed}: unequal ranks in the last phase"
        # Exactly once: intervals on the plan's streams never overlap ...
        by_source: dict[int, list[tuple[int, int]]] = {}
        for source, start, stop in consumed:
            by_source.setdefault(source, []).append((start, stop))
        for source, intervals in by_source.items():
            intervals.sort()
            assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:])), f"seed {seed}: stream {source} served twice"
            assert intervals[-1][1] <= plan_counts[source]
        # ... and cover every planned draw but the re-splits' drops, each < the new world size.
        total = sum(stop - start for _, start, stop in consumed)
        assert total == int(plan_counts.sum()) - streams.dropped, f"seed {seed}: {total} served"
        assert all(0 <= dropped < new_world for dropped, new_world in resplit_drops), resplit_drops
        assert plan.dropped < phases[0].world_size


def test_an_unchanged_shape_continues_the_same_streams():
    counts = np.array([40, 39, 39, 40, 39, 39])  # 2 ranks x 3 workers
    phases = [Phase(0, 2, 3, 5)]
    once = resume_streams(counts, phases, resumed_at=30, world_size=2, workers_per_rank=3)
    assert once.exact and once.dropped == 0
    # Saving again later on the same shape needs no new phase: the sequence is the same one.
    twice = resume_streams(counts, phases, resumed_at=60, world_size=2, workers_per_rank=3)
    again = resume_streams(once.consumer_counts, [Phase(0, 2, 3, 5)], resumed_at=30, world_size=2, workers_per_rank=3).through(
        once
    )
    for consumer in range(6):
        assert [a.tolist() for a in twice.segments_of(consumer)] == [a.tolist() for a in again.segments_of(consumer)]


def test_phases_out_of_order_are_refused():
    from lerobot_shards.reader.plan import PlanError

    with pytest.raises(PlanError, match="phases must start at 0 and ascend"):
        resume_streams(np.array([4, 4]), [Phase(3, 1, 2, 2)], resumed_at=4, world_size=1, workers_per_rank=2)
    with pytest.raises(PlanError, match="ascend up to the resume point 2"):
        resume_streams(np.array([4, 4]), [Phase(0, 1, 2, 2), Phase(4, 1, 1, 2)], resumed_at=2, world_size=1, workers_per_rank=1)
