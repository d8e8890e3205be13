"""Chains of resumes through real DataLoaders (issue 12): any sequence of shapes within an
epoch serves every anchor exactly once, each phase gives every rank the same count, the
state is the same on every rank, and a state of anything else is refused, not guessed.

Ranks are played in one process with ``rank=``/``world_size=``; tests/reader/test_torchrun_resume.py
runs the same contract under real ``torchrun`` processes."""

from __future__ import annotations

import pytest
import torch

from lerobot_shards import PackedDataset, ResumeStateError
from tests.packed_fixtures import *

TOTAL = 141
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


def _dataset(packed, rank: int, world_size: int, **kwargs) -> PackedDataset:
    options = dict(seed=7, episode_pool_size=3, return_uint8=True)
    options.update(kwargs)
    return PackedDataset(str(packed), rank=rank, world_size=world_size, **options)


def run_chain(packed, shapes, batches_per_phase, *, by_rank: dict | None = None, **kwargs) -> tuple[list[int], list[dict]]:
    """Run one epoch through ``shapes`` = [(world_size, num_workers, batch_size), ...]: each
    phase but the last consumes ``batches_per_phase[i]`` batches per rank, then every rank
    saves its state and the next phase resumes from it. Returns (indices served, states);
    ``by_rank`` (if given) collects each rank's indices in the order it received them."""
    seen: list[int] = []
    states: list[dict] = []
    state, consumed = None, 0
    for phase, (world_size, num_workers, batch_size) in enumerate(shapes):
        last = phase == len(shapes) - 1
        saved, counts = [], []
        for rank in range(world_size):
            dataset = _dataset(packed, rank, world_size, **kwargs)
            if state is not None:
                dataset.load_state_dict(state)
            expected_len = len(dataset)
            loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)
            mine = 0
            for k, batch in enumerate(loader):
                if not last and k == batches_per_phase[phase]:
                    break
                seen += batch["index"].tolist()
                mine += len(batch["index"])
                if by_rank is not None:
                    by_rank.setdefault(rank, []).extend(batch["index"].tolist())
            counts.append(mine)
            if last:
                assert mine == expected_len, f"phase {phase} rank {rank}: len(ds)={expected_len} but {mine} served"
            else:
                saved.append(dataset.state_dict(samples_consumed=consumed + mine, batch_size=batch_size, num_workers=num_workers))
        assert len(set(counts)) == 1, f"phase {phase}: ranks served {counts}"
        if not last:
            assert all(s == saved[0] for s in saved), "every rank must save the same state"
            state, consumed = saved[0], saved[0]["samples_consumed"]
            states.append(state)
    return seen, states


def _assert_exactly_once(seen: list[int], max_dropped: int) -> None:
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} anchors served twice"
    assert set(seen) <= set(range(TOTAL))
    assert TOTAL - max_dropped <= len(seen) <= TOTAL


def test_two_then_three_then_one_workers_is_exactly_once(packed_copy):
    # The reported failure: 2 workers -> 3 workers -> 1 worker gave 17 duplicates, 17 missing.
    seen, states = run_chain(packed_copy, [(1, 2, 4), (1, 3, 4), (1, 1, 4)], [5, 6])
    _assert_exactly_once(seen, max_dropped=0)
    assert [len(s["phases"]) for s in states] == [1, 2]


@pytest.mark.parametrize(
    "shapes,batches",
    [
        ([(2, 2, 4), (3, 0, 3), (1, 3, 5), (4, 2, 2)], [3, 2, 4]),
        ([(3, 3, 2), (3, 3, 2), (2, 0, 6), (2, 2, 6)], [2, 3, 1]),  # an unchanged shape between
        ([(1, 0, 8), (8, 1, 1), (2, 3, 7)], [4, 2]),  # more consumers than episodes left
    ],
)
def test_chains_of_shapes_and_batch_sizes_are_exactly_once(packed_copy, shapes, batches):
    seen, states = run_chain(packed_copy, shapes, batches)
    resplits = sum(1 for a, b in zip(shapes, shapes[1:]) if (a[0], max(a[1], 1)) != (b[0], max(b[1], 1)))
    _assert_exactly_once(seen, max_dropped=(shapes[0][0] - 1) + resplits * max(s[0] for s in shapes))
    # Each saved state lists the shapes so far; an unchanged loader shape continues its phase.
    for i, state in enumerate(states):
        distinct = [s for j, s in enumerate(shapes[: i + 1]) if j == 0 or s != shapes[j - 1]]
        assert [(p["world_size"], p["num_workers"], p["batch_size"]) for p in state["phases"]] == distinct


def test_an_unchanged_shape_resumes_the_exact_sequence_through_a_chain(packed_copy):
    full, chained = {}, {}
    run_chain(packed_copy, [(2, 2, 3)], [], by_rank=full)
    _, states = run_chain(packed_copy, [(2, 2, 3), (2, 2, 3), (2, 2, 3)], [4, 5], by_rank=chained)
    assert chained == full
    assert [len(s["phases"]) for s in states] == [1, 1]


def test_a_state_of_another_dataset_or_configuration_is_refused(packed_copy, packed_hevc):
    state = _dataset(packed_copy, 0, 1).state_dict(samples_consumed=8, batch_size=4, num_workers=2)
    cases = [
        (dict(seed=8), r"seed: found 7, expected 8"),
        (dict(shuffle=False), r"shuffle: found True, expected False"),
        (dict(episode_pool_size=4), r"episode_pool_size: found 3, expected 4"),
        (dict(episodes=[0, 1, 2]), r"episodes: found None, expected 'sha256:"),
        (dict(where="frame_index > 0"), r"where: found None, expected 'frame_index > 0'"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ResumeStateError, match=match):
            _dataset(packed_copy, 0, 1, **kwargs).load_state_dict(state)
    with pytest.raises(ResumeStateError, match=r"dataset: found 'sha256:[0-9a-f]+', expected 'sha256:[0-9a-f]+'"):
        _dataset(packed_hevc, 0, 1).load_state_dict(state)
    # The README's former state ({"epoch", "samples_consumed", "batch_size"}) resumed with other
    # workers mis-split silently (9 duplicates, 9 missing): it cannot say how the epoch was
    # split, so it is refused.
    with pytest.raises(ResumeStateError, match="not a resume state"):
        _dataset(packed_copy, 0, 1).load_state_dict({"epoch": 0, "samples_consumed": 20, "batch_size": 4})
    broken = {**state, "phases": []}
    with pytest.raises(ResumeStateError, match="no phases"):
        _dataset(packed_copy, 0, 1).load_state_dict(broken)
    with pytest.raises(ResumeStateError, match="less than the 8 this run resumed from"):
        resumed = _dataset(packed_copy, 0, 1)
        resumed.load_state_dict(state)
        resumed.state_dict(samples_consumed=4, batch_size=4, num_workers=2)
