"""The decode stage's pure parts, without files or decoders: the batch plan (each member's
distinct frames and the rows they fill), thread shares, the member cache held per admission,
and the wire's collate (bytes once, admissions and retirements counted)."""

import pytest
import torch

from lerobot_shards.core.errors import DecodeStageError
from lerobot_shards.reader.decode import ENCODED_KEY, EncodedFrames, MemberCache, balance, collate, plan_camera


def _frames(member: str, indices, *, data=b"x", admits=False, retires=False, frames=10):
    return EncodedFrames(
        member_id=member,
        data=data,
        codec="hevc",
        indices=tuple(indices),
        squeeze=len(indices) == 1,
        as_float=False,
        frame_size=(4, 6),
        frames=frames,
        admits=admits,
        retires=retires,
    )


def test_each_frame_is_planned_once_with_every_row_it_fills():
    payload = {"members": [_frames("a", (0,)), _frames("b", (0,))], "refs": [(0, (2, 3)), (1, (5, 6)), (0, (3, 4)), (0, (2, 3))]}
    plan = plan_camera("cam", payload)
    assert (plan.samples, plan.length) == (4, 2)
    jobs = {job.member: job for job in plan.jobs}
    assert jobs[0].wanted == (2, 3, 4) and jobs[0].rows == ((0, 6), (1, 4, 7), (5,))
    assert jobs[1].wanted == (5, 6) and jobs[1].rows == ((2,), (3,))
    rows = sorted(r for job in plan.jobs for rs in job.rows for r in rs)
    assert rows == list(range(8))  # every output row filled exactly once


def test_a_bad_batch_is_refused_before_anything_is_decoded():
    members = [_frames("a", (0,), frames=5)]
    with pytest.raises(DecodeStageError, match=r"a: frames \[5, 9\] are outside its 5 frames"):
        plan_camera("cam", {"members": members, "refs": [(0, (4, 5)), (0, (9, 0))]})
    with pytest.raises(DecodeStageError, match=r"cam: samples of one batch ask for windows of \[1, 2\] frames"):
        plan_camera("cam", {"members": members, "refs": [(0, (1,)), (0, (1, 2))]})


def test_thread_shares_balance_frames_and_keep_every_job_once():
    weights = [9, 1, 1, 1, 5, 4, 3, 3]
    groups = balance(weights, 3)
    assert sorted(p for g in groups for p in g) == list(range(8))
    loads = [sum(weights[p] for p in g) for g in groups]
    assert max(loads) - min(loads) <= 1
    assert balance([1, 1], 8) == [[0], [1]] and balance([], 4) == []


def test_members_are_held_from_admission_to_retirement():
    cache = MemberCache(loose=2, limit=100)
    cache.put("a", "A", held=True)
    cache.admit("a", 2)  # two workers' admissions of the same member
    cache.retire("a", 1)
    assert cache.get("a") == "A" and cache.held == 1
    cache.retire("a", 1)
    assert cache.get("a") is None and cache.held == 0
    # Without flags (batches built by hand): a small LRU.
    for name in "xyz":
        cache.put(name, name.upper(), held=False)
    assert cache.get("x") is None and cache.get("z") == "Z"
    # An LRU member admitted later becomes held.
    cache.admit("z", 1)
    assert cache.held == 1 and "z" in cache
    assert cache.counters["admissions"] == 3 and cache.counters["retirements"] == 2


def test_held_members_beyond_the_limit_are_dropped_and_counted():
    cache = MemberCache(loose=0, limit=3)
    for name in "abcde":
        cache.put(name, name, held=True)
        cache.admit(name, 1)
    assert cache.held == 3 and cache.counters["forced_evictions"] == 2 and cache.counters["max_held"] == 3
    assert "a" not in cache and "e" in cache
    cache.reset()
    assert len(cache) == 0
    with pytest.raises(ValueError, match="limit >= 1, got 64 and 0"):
        MemberCache(limit=0)


def test_collate_keeps_one_entry_per_member_with_its_bytes_and_counts_flags():
    samples = [
        {"index": torch.tensor(0), ENCODED_KEY: {"cam": _frames("a", (1,), data=None, retires=True)}},
        {"index": torch.tensor(1), ENCODED_KEY: {"cam": _frames("b", (2,), data=b"bytes-of-b", admits=True)}},
        {"index": torch.tensor(2), ENCODED_KEY: {"cam": _frames("b", (3,), data=None)}},
        {"index": torch.tensor(3), ENCODED_KEY: {"cam": _frames("c", (0,), data=None)}},
        {"index": torch.tensor(4), ENCODED_KEY: {"cam": _frames("c", (4,), data=b"bytes-of-c", admits=True, retires=True)}},
    ]
    batch = collate(samples)
    payload = batch[ENCODED_KEY]["cam"]
    assert [m.member_id for m in payload["members"]] == ["a", "b", "c"]
    assert [m.data for m in payload["members"]] == [None, b"bytes-of-b", b"bytes-of-c"]
    assert payload["holds"] == [(0, 1), (1, 0), (1, 1)]
    assert payload["refs"] == [(0, (1,)), (1, (2,)), (1, (3,)), (2, (0,)), (2, (4,))]
    assert batch["index"].tolist() == [0, 1, 2, 3, 4]
