"""A worker's next samples built on a thread of their own while it fills the batch (issue 57).

A consumer's work per sample is building it (its rows, its windows and its frames' decode,
which releases the GIL) and then copying it into its batch row, and handing each full batch to
the training process. On one thread each waits for the other: the copy and the batch's Python
for the decode, the next decode for the copy. With the samples built on a thread of their own,
the next sample decodes while this one is copied; a worker then uses a little more than one
core when one is free, and the same work when none is.

Nothing about the samples changes: one producer, a bounded first-in-first-out hand-over, so the
order and the values are the source's; an error is raised where the sample it interrupted would
have come, after every sample before it. Memory is bounded: at most ``depth`` samples wait in
the hand-over, one more is being built (or waits for room), and one is being copied. Closing
stops the producer and closes the source on the producer's thread (its ``finally`` runs: a
consumer publishes its counters).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

_END = object()
_POLL_S = 0.1  # how often a blocked producer looks whether it was stopped


class _Raised:
    """The source raised: the consumer raises it where the next sample would have come."""

    def __init__(self, error: BaseException):
        self.error = error


class BuiltAhead(Iterator[dict]):
    """Iterates ``samples``, up to ``depth`` samples ahead, on a thread of its own.

    Raises (from ``__next__``): whatever the source raised, in its place.
    """

    def __init__(self, samples: Iterator[dict], depth: int):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self._source = samples
        self._queue: queue.Queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._produce, name="lerobot-shards-build-ahead", daemon=True)
        self._thread.start()

    def _put(self, item) -> bool:
        """Hand ``item`` over; False when stopped first."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for sample in self._source:
                if not self._put(sample):
                    return
                del sample  # the consumer holds it now: not kept alive here until the next is built
            self._put(_END)
        except BaseException as error:  # handed to the consumer, raised there in its place
            self._put(_Raised(error))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def __next__(self) -> dict:
        if self._done:
            raise StopIteration
        item = self._queue.get()
        if item is _END:
            self._done = True
            self._thread.join()
            raise StopIteration
        if isinstance(item, _Raised):
            self._done = True
            self._thread.join()
            raise item.error
        return item

    def close(self) -> None:
        """Stop building ahead: the samples built and not taken are dropped, the source is
        closed on the producer's thread, and this returns once the producer has ended."""
        self._done = True
        self._stop.set()
        while self._thread.is_alive():
            try:  # a producer blocked on a full hand-over sees the stop within _POLL_S
                self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                pass
        self._thread.join()


__all__ = ["BuiltAhead"]
