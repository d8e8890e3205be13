"""Samples built side by side on a consumer's threads (issue 69): the draw order, values and
errors of one at a time; an episode's builds never at once (its decoders are not
thread-safe); a bounded number in flight; random image transforms drawn in draw order; the
threads split between samples and cameras by a stated rule."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import torch

from lerobot_shards import PackedDataset
from lerobot_shards.core.errors import IntegrityError
from lerobot_shards.reader.decode import CpuDecoders
from lerobot_shards.reader.runtime import SampleBuilder, SideBySide, split_threads
from tests.hang_guard import hang_guard
from tests.packed_fixtures import *

TOP = "observation.images.top"


def _run(side: SideBySide, jobs) -> list:
    out = []
    for key, build in jobs:
        out += side.submit(key, build)
    out += side.drain()
    return out


def test_results_leave_in_submission_order_when_later_builds_finish_first():
    side: SideBySide[int] = SideBySide(2)
    first_may_finish = threading.Event()
    second_done = threading.Event()

    def first() -> int:
        assert first_may_finish.wait(30)
        return 0

    def second() -> int:
        second_done.set()
        return 1

    def third() -> int:
        assert second_done.wait(30)
        first_may_finish.set()  # the first finishes only after the second did
        return 2

    with hang_guard(60, "three builds side by side"):
        got = _run(side, [("a", first), ("b", second), ("c", third)])
    side.close()
    assert got == [0, 1, 2]


def test_builds_of_one_key_never_run_at_once_and_keep_their_order():
    side: SideBySide[tuple[str, int]] = SideBySide(4)
    running: Counter = Counter()
    overlap, lock, order = [], threading.Lock(), {"x": [], "y": []}

    def build(key: str, i: int):
        def run():
            with lock:
                running[key] += 1
                overlap.append(running[key])
                order[key].append(i)
            threading.Event().wait(0.001)
            with lock:
                running[key] -= 1
            return key, i

        return run

    keys = {"x": object(), "y": object()}
    jobs = [(keys[name], build(name, i)) for i in range(40) for name in ("x", "y")]
    with hang_guard(60, "80 builds on two keys"):
        got = _run(side, jobs)
    side.close()
    assert got == [(name, i) for i in range(40) for name in ("x", "y")]
    assert max(overlap) == 1  # never two builds of one key at once
    assert order == {"x": list(range(40)), "y": list(range(40))}
    assert side.key_waits > 0  # the rule was exercised, not dodged


def test_at_most_twice_the_threads_are_in_flight():
    side: SideBySide[int] = SideBySide(3)
    started, release = Counter(), threading.Event()

    def build(i: int):
        def run():
            started["n"] += 1
            assert release.wait(30)
            return i

        return run

    taken = []
    jobs = iter([(object(), build(i)) for i in range(20)])
    pending = side.submit(*next(jobs))
    for _ in range(5):  # 6 submitted without taking any: the window (2 x 3) is full, not passed
        assert list(pending) == []
        pending = side.submit(*next(jobs))
    release.set()
    with hang_guard(60, "the window's results"):
        taken += pending  # the seventh submission waits for the oldest
        for key, job in jobs:
            taken += side.submit(key, job)
        taken += side.drain()
    side.close()
    assert taken == list(range(20))


def test_an_error_leaves_in_its_place_after_the_builds_before_it():
    side: SideBySide[int] = SideBySide(2)

    def ok(i):
        return lambda: i

    def damaged():
        raise ValueError("sample 3 is damaged")

    got = []
    with pytest.raises(ValueError, match="sample 3 is damaged"):
        for i in range(8):
            got += side.submit(object(), damaged if i == 3 else ok(i))
        got += side.drain()
    side.close()
    assert got == [0, 1, 2]


def test_close_waits_for_the_running_build_and_cancels_the_rest():
    side: SideBySide[int] = SideBySide(1 + 1)
    running, release, ran = threading.Event(), threading.Event(), []

    def slow():
        running.set()
        assert release.wait(30)
        ran.append("slow")
        return 0

    list(side.submit(object(), slow))
    assert running.wait(30)
    threading.Timer(0.2, release.set).start()
    with hang_guard(60, "closing with a build running"):
        side.close()
    assert ran == ["slow"]  # close returned only once the running build had finished


def test_one_thread_builds_in_the_caller():
    side: SideBySide[str] = SideBySide(1)
    assert list(side.submit(object(), lambda: threading.current_thread().name)) == [threading.current_thread().name]


@pytest.mark.parametrize(
    "threads,cameras,encoded,split",
    [
        (1, 1, False, (1, 1)),
        (2, 1, False, (2, 1)),  # one worker on two cores, one camera: two samples at once
        (2, 4, False, (1, 2)),  # four cameras: two of a sample's cameras at once
        (2, 2, False, (1, 2)),
        (16, 1, False, (16, 1)),  # the training process alone on 16 cores
        (16, 4, False, (4, 4)),
        (8, 3, False, (2, 3)),
        (4, 1, True, (1, 1)),  # workers shipping members decode none of their frames
    ],
)
def test_threads_split_between_samples_and_cameras(threads, cameras, encoded, split):
    assert split_threads(threads, cameras, encoded_video=encoded) == split


def _samples(root, **options) -> list[dict]:
    window = {TOP: [-0.1, 0.0], "action": [0.0, 0.1]}
    return list(PackedDataset(str(root), seed=7, episode_pool_size=4, delta_timestamps=window, **options))


def _same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            same = torch.equal(x[key], y[key]) if isinstance(x[key], torch.Tensor) else x[key] == y[key]
            assert same, key


class _Jitter:
    """A random image transform (torch's global generator), as LeRobot's are."""

    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        return frames + torch.rand(()) * 0.01


def test_samples_side_by_side_are_the_samples_one_at_a_time(packed_copy, monkeypatch):
    torch.manual_seed(11)
    one = _samples(packed_copy, decode_threads=1, image_transforms=_Jitter())
    threads, active, most = set(), Counter(), Counter()
    lock = threading.Lock()
    real = CpuDecoders.decode

    def decode(decoder, indices, *, where):
        with lock:
            threads.add(threading.current_thread().name.rsplit("_", 1)[0])
            active[id(decoder)] += 1
            most[id(decoder)] = max(most[id(decoder)], active[id(decoder)])
        try:
            return real(decoder, indices, where=where)
        finally:
            with lock:
                active[id(decoder)] -= 1

    built_on = set()
    real_build = SampleBuilder.build

    def build(self, *args, **kwargs):
        built_on.add(threading.current_thread().name.rsplit("_", 1)[0])
        return real_build(self, *args, **kwargs)

    monkeypatch.setattr(CpuDecoders, "decode", staticmethod(decode))
    monkeypatch.setattr(SampleBuilder, "build", build)
    torch.manual_seed(11)
    # 4 threads over 2 cameras: two samples at once, each decoding its two cameras at once.
    four = _samples(packed_copy, decode_threads=4, image_transforms=_Jitter())
    _same(one, four)  # the frames, and the transform's random draws, in draw order
    assert built_on == {"lerobot-shards-build"} and threads == {"lerobot-shards-decode"}
    assert max(most.values()) == 1  # one decoder, one thread at a time


def test_a_fetch_error_leaves_after_every_sample_drawn_before_it(packed_copy, monkeypatch):
    from lerobot_shards.reader.fetch import EpisodeFetcher

    everything = _samples(packed_copy, decode_threads=1, return_uint8=True)
    order = []
    for sample in everything:
        if int(sample["episode_index"]) not in order:
            order.append(int(sample["episode_index"]))
    damaged = order[2]  # the third episode the stream opens
    real = EpisodeFetcher.fetch

    def fetch(self, episode):
        loaded = real(self, episode)
        if loaded.entry.episode_index == damaged:
            raise IntegrityError(f"episode {damaged} is damaged")
        return loaded

    monkeypatch.setattr(EpisodeFetcher, "fetch", fetch)
    got = []
    with pytest.raises(IntegrityError, match=f"episode {damaged} is damaged"):
        for sample in PackedDataset(
            str(packed_copy),
            seed=7,
            episode_pool_size=4,
            delta_timestamps={TOP: [-0.1, 0.0], "action": [0.0, 0.1]},
            decode_threads=4,
            return_uint8=True,
            prefetch_episodes=0,
        ):
            got.append(sample)
    before = next(i for i, s in enumerate(everything) if int(s["episode_index"]) == damaged)
    assert len(got) == before  # every sample drawn before it, none after
    _same(got, everything[:before])
