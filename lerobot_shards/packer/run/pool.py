"""Running a pack's shard jobs: in this process, or in a pool of processes that die with it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Protocol, TypeVar

J = TypeVar("J")
R = TypeVar("R")


class ProgressSink(Protocol):
    """Where a job reports progress items: ``put(item)`` (a queue, across processes)."""

    def put(self, item: Any) -> None: ...


class _Direct:
    """Progress of jobs run in this process: straight to the callback."""

    def __init__(self, callback: Callable[[Any], None]):
        self._callback = callback

    def put(self, item: Any) -> None:
        self._callback(item)


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    Run as a pool initializer: a SIGKILLed pack cannot clean up after itself, and workers
    would otherwise run on, orphaned, holding CPU and half-written files.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def run_jobs(
    function: Callable[..., R],
    jobs: Sequence[J],
    *,
    workers: int,
    on_result: Callable[[R], None],
    on_progress: Callable[[Any], None] | None = None,
) -> None:
    """Run ``function(job, progress=sink)`` for every job; ``on_result`` gets each result.

    With ``workers <= 1`` (or one job) everything runs here, in order. Otherwise a process
    pool runs them; progress items travel through a manager queue and reach ``on_progress``
    in this process; the first failure cancels the jobs not started and is re-raised.
    Workers die with this process (``die_with_parent``): a SIGKILLed pack leaves no orphans.
    """
    if workers <= 1 or len(jobs) <= 1:
        sink = _Direct(on_progress) if on_progress is not None else None
        for job in jobs:
            on_result(function(job, progress=sink))
        return
    manager = None
    if on_progress is not None:
        from multiprocessing.managers import SyncManager

        manager = SyncManager()
        manager.start(die_with_parent)
    queue = manager.Queue() if manager is not None else None

    def drain() -> None:
        while queue is not None and on_progress is not None and not queue.empty():
            on_progress(queue.get())

    try:
        with ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent) as pool:
            pending = {pool.submit(function, job, progress=queue) for job in jobs}
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    drain()
                    for future in done:
                        on_result(future.result())
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
    finally:
        if manager is not None:
            manager.shutdown()
