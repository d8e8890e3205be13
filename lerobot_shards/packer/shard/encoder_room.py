"""Room for an encoder under an address-space limit, checked before the encoder starts.

x265 starts its frame-encoder threads without checking that they started and then waits for
each to say it is ready: when ``pthread_create`` fails because the process's address space
(``ulimit -v``, ``RLIMIT_AS``, SLURM's ``VSizeFactor``) has no room for another 8 MiB thread
stack, ``avcodec_open2`` never returns. Measured on 480x640 frames on 2 cores: with 20-40 MiB
of address space left the open hung forever, with 10 MiB it failed (``EAGAIN``), with 50 MiB
it worked. x264 fails cleanly, with a bare "Generic error in an external library".

So before an encoder opens, ``ensure_encoder_room`` maps (and unmaps) the address space its
threads and buffers may take, bounded from above, and refuses with a ``ResourceLimitError``
that names the limit when the kernel says there is no room: one line at the CLI boundary
instead of a job that hangs until SLURM's time limit. The probe is the kernel's own verdict
(an ``mmap`` the limit is enforced on), not arithmetic on ``/proc``. A thread of this process
may take the room between the probe and the encoder's threads starting; the packer's other
threads (the digest thread, a source decoder's) allocate little, and the bound below is about
three times what the encoders were measured to take.
"""

from __future__ import annotations

import mmap
import resource

from lerobot_shards.core.address_space import address_space_limit, has_room, usable_cores
from lerobot_shards.core.errors import ResourceLimitError

MIB = 1 << 20
# What an encoder holds besides thread stacks: its own structures (x265 ultrafast and x264
# veryfast took 30-60 MiB beyond their stacks at 480x640) and the frames in its lookahead and
# frame threads, counted per pixel below.
ENCODER_BASE_BYTES = 64 * MIB
FRAMES_HELD = 48
# x265 runs at most 6 frame encoders when it chooses their number (x265's frameNumThreads for 32
# cores or more); its pools hold one worker a core (several pools of up to 64 past 64 cores).
X265_MAX_FRAME_THREADS = 6


def encoder_threads(encoder: str, options: dict[str, str], cores: int) -> int:
    """An upper bound on the threads ``encoder`` (``libx265``, ``libx264``) starts with ``options``
    on ``cores`` cores: its pool or frame threads, its lookahead, one spare."""
    if encoder == "libx265":
        params: dict[str, str] = {}
        for item in options.get("x265-params", "").split(":"):
            name, _, value = item.partition("=")
            params[name] = value
        pool = 0 if params.get("pools") == "none" else cores
        frames = int(params["frame-threads"]) if params.get("frame-threads", "").isdigit() else X265_MAX_FRAME_THREADS
        return pool + frames + 2
    # x264's automatic count is 1.5 frame threads a core, plus lookahead threads (6 threads
    # on 2 cores were seen): two a core.
    threads = int(options.get("threads", "0")) or 2 * cores
    return threads + 2


def thread_stack_bytes() -> int:
    """The stack glibc gives a thread started with default attributes: the stack limit
    (``ulimit -s``) when it is set, else 8 MiB (the usual limit, and more than the 2 MiB glibc
    falls back to)."""
    soft = resource.getrlimit(resource.RLIMIT_STACK)[0]
    return 8 * MIB if soft == resource.RLIM_INFINITY or soft <= 0 else int(soft)


def encoder_room_bytes(encoder: str, options: dict[str, str], height: int, width: int, *, cores: int | None = None) -> int:
    """Address space an encoder of ``height`` x ``width`` frames may take: a stack and a guard
    page per thread, its base, and ``FRAMES_HELD`` frames of 4:4:4 8-bit pixels."""
    threads = encoder_threads(encoder, options, usable_cores() if cores is None else cores)
    return threads * (thread_stack_bytes() + mmap.PAGESIZE) + ENCODER_BASE_BYTES + FRAMES_HELD * 3 * height * width


def room_refusal(encoder: str, nbytes: int, limit: int) -> ResourceLimitError:
    """The error for an encoder that does not fit under ``limit``: names the limit, what the
    encoder needs and the fix."""
    return ResourceLimitError(
        f"re-encoding with {encoder} may take {nbytes / MIB:.0f} MiB of address space for its threads and frames, "
        f"more than this process has left under its limit of {limit / 2**30:.2f} GiB (ulimit -v / RLIMIT_AS); "
        "raise the job's virtual-memory limit (ulimit -v, or SLURM's --mem with VSizeFactor) or run the pack "
        "where no such limit is set"
    )


def ensure_encoder_room(encoder: str, options: dict[str, str], height: int, width: int) -> None:
    """Refuse before an encoder opens when it may not fit under this process's address-space
    limit (a no-op without one).

    Raises:
        ResourceLimitError: the limit leaves less than ``encoder_room_bytes`` of address space.
    """
    limit = address_space_limit()
    if limit is None:
        return
    need = encoder_room_bytes(encoder, options, height, width)
    if not has_room(need):
        raise room_refusal(encoder, need, limit)
