"""The limits this process runs under: the cores it may run on (``usable_cores``) and its
address-space limit (``ulimit -v``, ``RLIMIT_AS``, SLURM's ``VSizeFactor``) and
what the allocators reserve under it.

Under such a limit every mapping counts, used or not, and two allocators reserve far more than
they use: pyarrow's mimalloc reserves a 1 GiB arena at its first allocation, and glibc gives
each thread that allocates a 64 MiB heap (up to eight a core). In the field fuzzer's worker
(3 GiB, 2 cores) they held 1.0 and ~0.75 GiB of address space with ~0.5 GiB resident, and the
encoder that came last found no room for its threads. ``fit_reservations_to_limit`` keeps both to
what is used, and numpy's OpenBLAS to one thread; it changes nothing without a limit. The
``lerobot-shards`` script calls it first, before pyarrow and numpy load (they read these once,
as they load); not for ``train`` (LeRobot's trainer keeps its own settings).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import resource

from lerobot_shards.core.errors import ResourceLimitError

# mimalloc grows by arenas of this size instead of 1 GiB; glibc shares this many heaps among
# the threads (each heap reserves 64 MiB on 64-bit).
MIMALLOC_ARENA_RESERVE = "64MiB"
GLIBC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def usable_cores() -> int:
    """Cores this process may run on: its affinity (a SLURM job's cpuset, ``taskset``), not the
    machine's count; at least 1. Every pool we size (encoder threads, decode threads, scan
    processes, a loader's spare cores) asks here."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def address_space_limit() -> int | None:
    """This process's address-space limit in bytes (``RLIMIT_AS``), or None when unlimited."""
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def address_space_words() -> str:
    """This process's address-space limit in words: ``3.0 GiB (ulimit -v / RLIMIT_AS)`` or ``no limit``."""
    limit = address_space_limit()
    return "no limit" if limit is None else f"{limit / 2**30:.1f} GiB (ulimit -v / RLIMIT_AS)"


def has_room(nbytes: int) -> bool:
    """Whether the kernel lets this process map ``nbytes`` more of address space now (mapped
    read-only and unmapped at once: it counts against ``RLIMIT_AS`` and commits no memory)."""
    try:
        probe = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ)
    except (OSError, MemoryError, OverflowError, ValueError):
        return False
    probe.close()
    return True


# An allocation that fails while less than this is left under the limit is the process at its
# limit, not a size a file asked for (a hostile length asks for GiBs and leaves the room there).
LOW_WATER_BYTES = 64 << 20


def at_limit(err: BaseException) -> bool:
    """Whether ``err`` (a ``MemoryError``, ``ENOMEM``, a library that could not be mapped) is this process at its address-space limit
    rather than what a file asked for: less than ``LOW_WATER_BYTES`` is left under the limit.
    Readers that turn a failed allocation into "damaged file" re-raise these: under ``ulimit -v``
    an honest file is not damaged, and ``--repair`` would be wrong advice."""
    if unmappable_library(err):
        return True
    if not (isinstance(err, MemoryError) or (isinstance(err, OSError) and err.errno == errno.ENOMEM)):
        return False
    return near_limit()


def near_limit() -> bool:
    """Whether this process has less than ``LOW_WATER_BYTES`` of address space left under its
    limit (never without one). Under it anything can fail in any way: CPython compiling a
    module reported a ``SyntaxError`` in an unchanged file at 275 MiB."""
    return address_space_limit() is not None and not has_room(LOW_WATER_BYTES)


def limit_error(err: BaseException, where: str) -> ResourceLimitError | None:
    """``err`` as the process limit it is (``ulimit -v``, ``-n``, ``-u``), for code that would
    otherwise call the file it was reading damaged; None when it is not a limit.

    Open files: ``EMFILE``/``ENFILE``. Threads: Python's "can't start new thread", or ``EAGAIN``
    from a library starting its threads (FFmpeg opening a codec; its decode loops never let
    ``EAGAIN`` out). Memory: ``at_limit``.
    """
    if isinstance(err, ResourceLimitError):
        return err
    number = getattr(err, "errno", None)
    if number in (errno.EMFILE, errno.ENFILE):
        kind = "files"
    elif thread_not_started(err) or number == errno.EAGAIN:
        kind = "threads"
    elif at_limit(err):
        kind = "memory"
    else:
        return None
    return ResourceLimitError(f"{where}: {err}", limit=kind, where=where)


def thread_not_started(err: BaseException) -> bool:
    """Python's error for a thread the system would not start (address space, ``ulimit -u``)."""
    return isinstance(err, RuntimeError) and "can't start new thread" in str(err)


def unmappable_library(err: BaseException) -> bool:
    """An import that failed because the shared library could not be mapped (no address space
    left), not because a package is missing: ``pip install`` would be wrong advice."""
    text = str(err).lower()
    return isinstance(err, ImportError) and ("failed to map segment" in text or "cannot allocate memory" in text)


def fit_reservations_to_limit() -> bool:
    """Under an address-space limit, keep mimalloc (pyarrow's), glibc's malloc and OpenBLAS
    (numpy's) from reserving address space they do not use: for this process (glibc now;
    mimalloc and OpenBLAS if pyarrow and numpy have not loaded yet) and, through the
    environment, for processes it starts. A variable the user set is kept.

    Returns:
        Whether a limit was found (and the allocators fitted to it).
    """
    if address_space_limit() is None:
        return False
    os.environ.setdefault("MIMALLOC_ARENA_RESERVE", MIMALLOC_ARENA_RESERVE)
    # numpy's OpenBLAS starts a thread (and a 32 MiB buffer) a core as numpy loads, and when one
    # cannot start it raises SIGINT: the command died as if ^C'd. Nothing here needs BLAS threads.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    arenas = os.environ.setdefault("MALLOC_ARENA_MAX", str(GLIBC_ARENAS))
    if platform.libc_ver()[0] == "glibc" and arenas.isdigit():
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, int(arenas))
    return True
