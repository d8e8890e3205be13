"""Fetching episodes ahead of need on background threads, in the order they will be needed.

The pool schedule knows, without any I/O, the order in which a consumer first needs its
episodes (``SegmentDraws.admission``). ``Prefetcher`` keeps up to ``depth`` of the next ones
fetching or fetched, within a byte budget, so a draw does not wait on storage. A fetch that
fails in the background is re-raised in the consumer by ``take``, naming the episode, when
that episode is needed: never swallowed, never a hang waiting on a dead thread.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from lerobot_shards.core.errors import ArgumentError, LeRobotShardsError, PrefetchError, ResourceLimitError
from lerobot_shards.core.storage.retry import limit_kind, resource_limit

T = TypeVar("T")


class Prefetcher(Generic[T]):
    """Runs ``fetch(position)`` ahead of need, in a scheduled order (call from one thread).

    Args:
        fetch: reads one item (thread-safe); its exceptions reach ``take``.
        size_of: bytes an item will hold, known before fetching (for the byte budget).
        describe: names a position in error messages (``"shard-000003 episode 17"``).
        depth: at most this many items fetching or fetched-but-not-taken (0: no prefetch,
            ``take`` fetches on demand).
        byte_budget: at most this many bytes (by ``size_of``) fetching or fetched-but-not-taken;
            ``None`` for no cap. One item is always allowed, however large, so a budget
            smaller than an episode slows prefetch down but never stops it.
        threads: background threads.

    Attributes:
        peak_bytes: the most bytes ever in flight (fetching or fetched, not yet taken).
    """

    def __init__(
        self,
        fetch: Callable[[int], T],
        *,
        size_of: Callable[[int], int],
        describe: Callable[[int], str],
        depth: int = 4,
        byte_budget: int | None = None,
        threads: int = 2,
    ):
        if depth < 0:
            raise ArgumentError(f"prefetch depth must be >= 0, got {depth}")
        if byte_budget is not None and byte_budget < 0:
            raise ArgumentError(f"prefetch byte budget must be >= 0 or None, got {byte_budget}")
        self._fetch = fetch
        self._size_of = size_of
        self._describe = describe
        self.depth = depth
        self.byte_budget = byte_budget
        self._executor = ThreadPoolExecutor(max_workers=max(threads, 1), thread_name_prefix="lerobot-shards-fetch")
        self._futures: dict[int, Future] = {}
        self._bytes = 0
        self._order: list[int] = []
        self._next = 0
        self._taken: set[int] = set()  # taken since the last schedule(): never fetched again
        self._skip: Callable[[int], bool] = lambda position: False
        self.peak_bytes = 0

    def schedule(self, order: list[int], *, skip: Callable[[int], bool] | None = None) -> None:
        """Set the order in which positions will be taken and start fetching ahead.

        ``skip(position)`` says a position needs no fetch (it is already held by the caller).
        Items fetched for an earlier schedule stay available if the new order has them;
        the others are dropped, so they cannot hold depth or budget forever.
        """
        self._order = list(order)
        self._next = 0
        self._taken = set()
        self._skip = skip or (lambda position: False)
        wanted = set(self._order)
        for position in [p for p in self._futures if p not in wanted]:
            self._futures.pop(position).cancel()
            self._bytes -= self._size_of(position)
        self._top_up()

    def extend(self, order: list[int]) -> None:
        """Append positions to the scheduled order (the order is learned as draws advance)."""
        self._order.extend(order)
        self._top_up()

    @property
    def in_flight_bytes(self) -> int:
        """Bytes (by ``size_of``) fetching or fetched and not yet taken."""
        return self._bytes

    def _submit(self, position: int) -> None:
        try:
            future = self._executor.submit(self._fetch, position)
        except RuntimeError as err:  # the executor could not start a thread
            limit = resource_limit(err)
            if limit is None:
                raise
            where = f"prefetching {self._describe(position)}"
            raise ResourceLimitError(f"{where}: {limit}", limit=limit_kind(err), where=where) from err
        self._futures[position] = future
        self._bytes += self._size_of(position)
        self.peak_bytes = max(self.peak_bytes, self._bytes)

    def _top_up(self) -> None:
        while self._next < len(self._order) and len(self._futures) < self.depth:
            position = self._order[self._next]
            if position in self._futures or position in self._taken or self._skip(position):
                self._next += 1
                continue
            if self.byte_budget is not None and self._futures and self._bytes + self._size_of(position) > self.byte_budget:
                return  # the budget is spent; taking an item frees it
            self._next += 1
            self._submit(position)

    def take(self, position: int) -> T:
        """The item at ``position``: waits for its fetch (or starts it now if not scheduled).

        Raises:
            LeRobotShardsError: as raised by ``fetch`` (ours name the file, shard and episode).
            PrefetchError: any other exception of ``fetch``, naming the position, chained.
        """
        self._taken.add(position)
        future = self._futures.pop(position, None)
        if future is None:
            self._submit(position)
            future = self._futures.pop(position)
        try:
            return future.result()
        except LeRobotShardsError:
            raise  # ours name the file, shard and episode already
        except Exception as err:
            raise PrefetchError(f"{self._describe(position)}: background fetch failed ({type(err).__name__}: {err})") from err
        finally:
            self._bytes -= self._size_of(position)
            self._top_up()

    def close(self, *, wait: bool = False) -> None:
        """Cancel pending fetches and drop fetched items (running ones finish and are dropped;
        with ``wait``, before this returns: no thread of this prefetcher is left)."""
        for future in self._futures.values():
            future.cancel()
        self._futures.clear()
        self._bytes = 0
        self._executor.shutdown(wait=wait, cancel_futures=True)


__all__ = ["PrefetchError", "Prefetcher"]
