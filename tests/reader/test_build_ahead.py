"""A worker's samples built ahead on a thread of their own (issue 57): the source's order, values
and errors, a bounded number built ahead, and a close that stops the producer and runs the
source's ``finally``. The loader-level contract (the same batches with and without it, from
real workers) is in ``test_batch_loader.py``."""

from __future__ import annotations

import threading
import time

import pytest

from lerobot_shards.reader.runtime import BuiltAhead
from tests.hang_guard import hang_guard


class _Source:
    """A generator of ``count`` samples that counts how many it built and whether its
    ``finally`` ran (a consumer publishes its counters there)."""

    def __init__(self, count: int, fail_at: int | None = None):
        self.count, self.fail_at = count, fail_at
        self.built, self.finished, self.thread = 0, False, None

    def __iter__(self):
        self.thread = threading.current_thread()
        try:
            for i in range(self.count):
                if i == self.fail_at:
                    raise ValueError(f"sample {i} is damaged")
                self.built += 1
                yield {"i": i}
        finally:
            self.finished = True


def _settled(source: _Source, seconds: float = 30.0) -> int:
    """How many the producer built once it stopped building (it blocks on a full hand-over)."""
    deadline, last = time.monotonic() + seconds, -1
    while time.monotonic() < deadline:
        now = source.built
        if now == last:
            return now
        last = now
        time.sleep(0.05)
    pytest.fail("the producer kept building: the hand-over is not bounded")


def test_samples_come_in_the_source_order_from_another_thread():
    source = _Source(500)
    with hang_guard(60, "building 500 samples ahead"):
        got = [s["i"] for s in BuiltAhead(iter(source), depth=2)]
    assert got == list(range(500))
    assert source.thread is not threading.current_thread()  # built on the producer's thread
    assert source.finished


@pytest.mark.parametrize("depth", [1, 3])
def test_at_most_depth_samples_wait_and_one_more_is_built(depth):
    source = _Source(10_000)
    ahead = BuiltAhead(iter(source), depth=depth)
    taken = [next(ahead) for _ in range(5)]
    built = _settled(source)
    # depth in the hand-over and one built that waits for room; an unbounded producer would
    # have built all 10,000 (the samples cost nothing to build)
    assert built == len(taken) + depth + 1, built
    ahead.close()


def test_an_error_comes_where_its_sample_would_have_come():
    ahead = BuiltAhead(iter(_Source(10, fail_at=4)), depth=3)
    assert [next(ahead)["i"] for _ in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="sample 4 is damaged"):
        next(ahead)
    with pytest.raises(StopIteration):  # the stream ended with its error
        next(ahead)


def test_closing_stops_the_producer_and_runs_the_sources_finally():
    source = _Source(10_000)
    ahead = BuiltAhead(iter(source), depth=1)
    next(ahead)
    with hang_guard(60, "closing a producer blocked on a full hand-over"):
        ahead.close()
    assert source.finished  # the source was closed: a consumer's counters are published
    built = source.built
    assert built <= 3, built  # it stopped: nothing more is built after close
    with pytest.raises(StopIteration):
        next(ahead)


def test_depth_below_one_is_refused():
    with pytest.raises(ValueError, match="depth must be >= 1"):
        BuiltAhead(iter(_Source(1)), depth=0)
