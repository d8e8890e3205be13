"""Offset resume through PackedDataset (issue 4, contract 4), beyond tests/reader/test_reader_split.py.

Rules: ``upcoming_anchors`` (index arithmetic, no shard read) is exactly what an iterator
yields; resuming costs the same at offset 0 and 10^7; ``drop_last`` loaders and a later epoch
resume exactly; a changed world size re-splits the remaining anchors exactly once.
"""

from __future__ import annotations

import pytest
import torch

from lerobot_shards import PackedDataset
from lerobot_shards.testing import write_tabular_pack
from tests.packed_fixtures import *
from tests.work_counter import lines_executed

TOTAL = 141


def _batches(dataset, *, batch_size: int, num_workers: int, drop_last: bool = False) -> list[list[int]]:
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, drop_last=drop_last)
    return [batch["index"].tolist() for batch in loader]


def test_upcoming_anchors_are_what_the_iterator_yields(packed_copy):
    dataset = PackedDataset(str(packed_copy), seed=9, episode_pool_size=3, where="frame_index % 3 != 1", return_uint8=True)
    samples = list(dataset)
    plan = dataset.upcoming_anchors()
    assert plan.index.tolist() == [int(s["index"]) for s in samples]
    assert plan.episode_index.tolist() == [int(s["episode_index"]) for s in samples]
    assert plan.frame_index.tolist() == [int(s["frame_index"]) for s in samples]
    assert dataset.upcoming_anchors(limit=5).index.tolist() == plan.index[:5].tolist()
    assert dataset.stats()["samples"] == len(samples)  # upcoming_anchors read nothing


def test_upcoming_anchors_per_worker_make_up_the_loader_batches(packed_copy):
    dataset = PackedDataset(str(packed_copy), seed=4, episode_pool_size=2, return_uint8=True)
    batches = _batches(dataset, batch_size=5, num_workers=3)
    chunks = []
    for worker in range(3):
        stream = dataset.upcoming_anchors(worker=worker, num_workers=3).index.tolist()
        chunks += [stream[i : i + 5] for i in range(0, len(stream), 5)]
    assert sorted(batches) == sorted(chunks)
    # Resumed after 4 batches: worker i continues the i-th worker of the pending rotation.
    dataset.load_state_dict(dataset.state_dict(samples_consumed=20, batch_size=5, num_workers=3))
    resumed = [dataset.upcoming_anchors(worker=w, num_workers=3).index.tolist() for w in range(3)]
    assert [stream[:5] for stream in resumed] == batches[4:7]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_with_drop_last_and_in_a_later_epoch(packed_copy, num_workers):
    def dataset(epoch: int):
        ds = PackedDataset(str(packed_copy), seed=13, episode_pool_size=3, return_uint8=True)
        ds.set_epoch(epoch)
        return ds

    for epoch, drop_last in ((2, True), (5, False)):
        full = _batches(dataset(epoch), batch_size=6, num_workers=num_workers, drop_last=drop_last)
        for k in (2, len(full) // 2 + 1):
            resumed = dataset(0)
            resumed.load_state_dict(
                dataset(epoch).state_dict(samples_consumed=6 * k, batch_size=6, num_workers=num_workers, drop_last=drop_last)
            )
            assert resumed.epoch == epoch
            tail = _batches(resumed, batch_size=6, num_workers=num_workers, drop_last=drop_last)
            assert tail == full[k:], f"epoch {epoch}, drop_last={drop_last}, k={k}"


def test_resume_on_a_different_world_size_covers_the_rest_exactly_once(packed_copy):
    """Saved on 2 ranks x 2 workers, resumed on 3 ranks x 1 worker."""
    done, state = [], None
    for rank in range(2):
        old = PackedDataset(str(packed_copy), seed=6, rank=rank, world_size=2, return_uint8=True)
        batches = _batches(old, batch_size=4, num_workers=2)
        done += [i for batch in batches[:5] for i in batch]
        state = old.state_dict(samples_consumed=20, batch_size=4, num_workers=2)
    assert [p["world_size"] for p in state["phases"]] == [2]
    rest = []
    for rank in range(3):
        new = PackedDataset(str(packed_copy), seed=6, rank=rank, world_size=3, return_uint8=True)
        new.load_state_dict(state)
        rest.append([i for batch in _batches(new, batch_size=4, num_workers=1) for i in batch])
    assert len({len(r) for r in rest}) == 1, "ranks must yield equal counts after the re-split"
    seen = done + [i for r in rest for i in r]
    assert len(seen) == len(set(seen)), "an anchor was served twice"
    # One anchor dropped by the 2-rank plan, at most 2 more by the 3-rank re-split.
    assert TOTAL - 3 <= len(seen) <= TOTAL - 1


# -- resume cost on a large index ------------------------------------------------------------
def test_resume_cost_does_not_depend_on_the_offset(tmp_path):
    write_tabular_pack(tmp_path, episodes=12_000, length=1_000, samples_index=False)  # 1.2e7 anchors
    dataset = PackedDataset(str(tmp_path), seed=0, episode_pool_size=16)
    batch = 16
    lines, heads = {}, {}
    for offset in (0, 10_000_000, 10_000_000 + 2 * batch):

        def resume(offset=offset):
            dataset.load_state_dict(dataset.state_dict(samples_consumed=offset, batch_size=batch, num_workers=2))
            return [dataset.upcoming_anchors(worker=w, num_workers=2, limit=3 * batch).index for w in range(2)]

        heads[offset], lines[offset] = lines_executed(resume)
    print(f"resume arithmetic + first 48 anchors of 2 workers, Python lines by offset: {lines}")
    # Counted, not timed: the pool schedule skips 1e7 draws a block (65,536 draws) at a time.
    assert lines[10_000_000] <= 2 * lines[0] + 60 * (10_000_000 // 65536), lines
    # Two more batches (one per worker) move each worker's stream on by exactly one batch.
    for worker in range(2):
        assert heads[10_000_000 + 2 * batch][worker][: 2 * batch].tolist() == heads[10_000_000][worker][batch:].tolist()
    assert not set(heads[0][0].tolist()) & set(heads[10_000_000][0].tolist())


def test_upcoming_anchors_costs_what_it_lists(tmp_path, monkeypatch):
    """Issue 31: listing the next anchors of a large epoch cost a pass over every listed
    anchor per distinct episode (400k anchors: 19.5 s), and the default listed the whole
    epoch. Now the work is counted: draws planned == anchors listed, one frame lookup per
    distinct episode, and the default stops at 10,000."""
    from lerobot_shards.reader import dataset as dataset_module
    from lerobot_shards.testing import write_tabular_pack

    write_tabular_pack(tmp_path / "big", episodes=3_000, length=8, seed=1)
    dataset = PackedDataset(str(tmp_path / "big"), seed=2, where="frame_index % 2 = 0")  # 12,000 anchors
    drawn, lookups = [0], []
    original_draws, original_lookup = dataset_module.SegmentDraws.__iter__, dataset.index.anchor_frame

    def counted_draws(self):
        for draw in original_draws(self):
            drawn[0] += 1
            yield draw

    def counted_lookup(position, anchors):
        lookups.append((position, len(anchors)))
        return original_lookup(position, anchors)

    monkeypatch.setattr(dataset_module.SegmentDraws, "__iter__", counted_draws)
    monkeypatch.setattr(dataset.index, "anchor_frame", counted_lookup)
    everything = dataset.upcoming_anchors(limit=None)
    assert len(everything.index) == 12_000 and drawn[0] == 12_000
    for limit in (1, 50, 2_000):
        drawn[0], lookups[:] = 0, []
        listed = dataset.upcoming_anchors(limit=limit)
        assert listed.index.tolist() == everything.index[:limit].tolist()
        assert drawn[0] == limit and sum(n for _, n in lookups) == limit
        assert len(lookups) == len({p for p, _ in lookups}) <= limit  # one lookup per distinct episode
    drawn[0] = 0
    assert len(dataset.upcoming_anchors().index) == 10_000 and drawn[0] == 10_000  # the default no longer walks the epoch
