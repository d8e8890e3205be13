"""Running a pack's shard jobs: in this process, or in a pool of processes that die with it."""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_module
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
    pool runs them; progress items travel through a queue the workers inherit and reach ``on_progress``
    in this process; the first failure cancels the jobs not started and is re-raised.
    Workers die with this process (``die_with_parent``): a SIGKILLed pack leaves no orphans.
    """
    if workers <= 1 or len(jobs) <= 1:
        sink = _Direct(on_progress) if on_progress is not None else None
        for job in jobs:
            on_result(function(job, progress=sink))
        return
    # Progress travels through a plain multiprocessing queue the workers inherit (initargs),
    # not a manager: a manager listens on a Unix socket under $TMPDIR, and a deep TMPDIR (a
    # SLURM job's, a test's) exceeds AF_UNIX's 108-byte path and failed the pack at start.
    context = multiprocessing.get_context()
    progress: Any = context.Queue() if on_progress is not None else None

    def drain() -> None:
        while progress is not None and on_progress is not None:
            try:
                item = progress.get_nowait()
            except queue_module.Empty:
                return
            on_progress(item)

    try:
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=context, initializer=_start_worker, initargs=(progress,)
        ) as pool:
            pending = {pool.submit(_run_job, function, job) for job in jobs}
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
        drain()  # the workers have exited: what they put last is in the queue now
    finally:
        if progress is not None:
            progress.close()
            progress.cancel_join_thread()


_WORKER_PROGRESS: ProgressSink | None = None


def _start_worker(progress: ProgressSink | None) -> None:
    """Pool initializer: die with the pack, and keep the progress queue for ``_run_job``."""
    global _WORKER_PROGRESS
    die_with_parent()
    _WORKER_PROGRESS = progress


def _run_job(function: Callable[..., R], job: Any) -> R:
    return function(job, progress=_WORKER_PROGRESS)
