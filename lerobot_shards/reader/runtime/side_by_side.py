"""Samples built side by side on a consumer's threads, handed on in draw order (issue 69).

A sample's build is mostly its frames' decode, which releases the GIL. One camera decoding
on one thread left a core idle wherever a consumer had two (one DataLoader worker on two
cores; the training process waiting for its first batch): the next samples are now built on
threads of their own while this one decodes, and leave in the order they were drawn.

Rules:

- **Order.** Results leave in the order their builds were submitted; a build that raised
  raises in its sample's place, after every sample before it.
- **One decoder, one thread.** A decoder is not thread-safe: a build keyed like one still in
  flight (the same admitted episode) is submitted only once that one has finished, so an
  episode's builds run one after another, in draw order.
- **Bounded.** At most ``2 x threads`` builds are in flight (their samples, and the episodes
  they hold alive); the caller waits for the oldest beyond that, and takes the oldest as soon
  as it is done.
- **Closed before what it reads.** ``close`` cancels the builds not started and waits for the
  running ones, so nothing decodes on a decoder being freed; the threads are made on first
  use, in the process that builds (a DataLoader worker), never before a fork.

With one thread nothing is handed off: each build runs in the caller, as before.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

T = TypeVar("T")


class SideBySide(Generic[T]):
    """Runs builds on ``threads`` threads, their results in submission order (see the module
    docstring).

    Raises (from ``submit``/``drain``): whatever a build raised, in its place.
    """

    def __init__(self, threads: int):
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.window = 2 * threads
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: deque[tuple[object, Future[T]]] = deque()
        self.key_waits = 0  # builds held back behind one of the same key (counted, for tests)

    def submit(self, key: object, build: Callable[[], T]) -> Iterator[T]:
        """Start ``build`` (after any in-flight build of the same ``key``); yields the oldest
        results that are done, and waits for them while more than ``window`` are in flight."""
        if self.threads == 1:
            yield build()
            return
        same = [future for held, future in self._in_flight if held is key]
        if same:
            self.key_waits += 1
            wait(same)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="lerobot-shards-build")
        self._in_flight.append((key, self._executor.submit(build)))
        while self._in_flight and (len(self._in_flight) > self.window or self._in_flight[0][1].done()):
            yield self._take()

    def drain(self) -> Iterator[T]:
        """Every result still in flight, in order."""
        while self._in_flight:
            yield self._take()

    def _take(self) -> T:
        return self._in_flight.popleft()[1].result()

    def close(self) -> None:
        """Cancel the builds not started, wait for the running ones, stop the threads (a later
        ``submit`` starts them again)."""
        in_flight, self._in_flight = self._in_flight, deque()
        for _, future in in_flight:
            future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


__all__ = ["SideBySide"]
