"""How long a storage operation may take, and what every storage system's failures share.

``RetryPolicy`` bounds attempts, backoff (exponential with full jitter) and per-request
timeouts. ``common_verdict`` classifies one exception as any fsspec filesystem may raise it
(the OS's connection errors, timeouts, an HTTP status of 408/429/5xx, aiohttp's connection
errors, which fsspec's HTTP filesystem and the async clients built on it raise); what a
storage system's own client raises (botocore's errors and S3's codes, the Hub's httpx) is its
backend's to say (``lerobot_shards.core.storage.backends``), and ``StorageBackend.is_transient``
asks the backend first, then this module, cause by cause. Unknown errors are permanent, so a
bug is never retried into a slow failure. Exceptions are recognised by class name, so
classifying imports nothing.
"""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass

from lerobot_shards.core.address_space import address_space_words, thread_not_started
from lerobot_shards.core.errors import ArgumentError, StorageError


@dataclass(frozen=True)
class RetryPolicy:
    """How long a storage operation may take before it raises.

    Attempt ``k`` (1-based) that fails transiently is followed by a sleep drawn uniformly from
    ``[0, min(cap_s, base_s * 2**(k-1)))`` (exponential backoff with full jitter), up to
    ``max_attempts`` attempts in all. For ``s3://`` each attempt connects within
    ``connect_timeout_s`` and waits at most ``read_timeout_s`` for each chunk of the response;
    explicit ``connect_timeout``/``read_timeout`` in ``storage_options["config_kwargs"]`` win.
    Worst case for one operation: ``max_attempts * (connect_timeout_s + read_timeout_s)`` plus
    the sleeps (at most ``(max_attempts - 1) * cap_s``).
    """

    max_attempts: int = 6
    base_s: float = 0.2
    cap_s: float = 5.0
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ArgumentError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("base_s", "cap_s", "connect_timeout_s", "read_timeout_s"):
            if getattr(self, name) < 0:
                raise ArgumentError(f"{name} must be >= 0, got {getattr(self, name)}")

    def delay_s(self, failed_attempts: int, rng: random.Random) -> float:
        """Seconds to sleep after ``failed_attempts`` (>= 1) failed attempts."""
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2 ** (failed_attempts - 1))))


_TRANSIENT_ERRNOS = frozenset(
    {
        errno.ECONNRESET,
        errno.ECONNABORTED,
        errno.ECONNREFUSED,
        errno.ETIMEDOUT,
        errno.EPIPE,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ENETRESET,
        errno.EAGAIN,
    }
)
# aiohttp's connection failures (by name anywhere in the MRO, so nothing is imported): fsspec's
# HTTP filesystem and the async clients built on aiohttp (s3fs through aiobotocore, gcsfs)
# raise them. ClientConnectionError covers ServerDisconnectedError and ClientOSError.
_TRANSIENT_CLASS_NAMES = frozenset(
    {
        "ClientConnectionError",
        "ClientPayloadError",
        "ServerDisconnectedError",
        "ServerTimeoutError",
        "ClientOSError",
        "IncompleteRead",
        "RemoteDisconnected",
        "FSTimeoutError",
    }
)
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what caused it (``__cause__``, else ``__context__``), without cycles."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def common_status(error: BaseException) -> int | None:
    """The HTTP status one exception carries where HTTP clients put it (an httpx/requests
    ``response.status_code``, aiohttp's ``status``, a ``status_code`` or ``code``), if any."""
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(status, int) and 100 <= status <= 599:
        return status
    for name in ("status", "status_code", "code"):
        status = getattr(error, name, None)
        if isinstance(status, int) and 100 <= status <= 599:
            return status
    return None


def status_verdict(status: int) -> bool:
    """Whether an HTTP status is worth another attempt: 408, 429 and 5xx."""
    return status in (408, 429) or status >= 500


def common_verdict(error: BaseException) -> bool | None:
    """What one exception says as any filesystem raises it: True transient, False permanent,
    None when it does not tell (a backend or a cause may). Not found, access denied and our
    own ``StorageError`` (already classified: short reads, ...) are permanent."""
    if isinstance(error, StorageError):
        return False
    if isinstance(error, _PERMANENT):
        return False
    status = common_status(error)
    if status is not None:
        return status_verdict(status)
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True  # includes asyncio.TimeoutError, fsspec's FSTimeoutError, ConnectionResetError
    if any(cls.__name__ in _TRANSIENT_CLASS_NAMES for cls in type(error).__mro__):
        return True
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return True
    return None


def name_resolution_failed(error: BaseException) -> bool:
    """Whether ``error`` (or a cause) is a failed DNS lookup (``socket.gaierror``, which
    requests, httpx and aiohttp all wrap). Permanent: a machine without network or DNS, or a
    misspelt host, does not heal in a retry's seconds (an offline Hub pack waited 33 s through
    8 attempts), and a re-run resumes where it stopped."""
    return any(isinstance(cause, socket.gaierror) for cause in causes(error))


def retry_after_s(error: BaseException, *, cap_s: float) -> float | None:
    """How long the server asked the client to wait (an HTTP ``Retry-After`` in seconds on the
    error's response, as the Hub sends with 429), capped at ``cap_s``; None when it did not say."""
    for cause in causes(error):
        headers = getattr(getattr(cause, "response", None), "headers", None)
        value = headers.get("Retry-After") if headers is not None and hasattr(headers, "get") else None
        if value is not None:
            try:
                return max(0.0, min(float(value), cap_s))
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def _limit_hit(error: BaseException) -> tuple[str, int] | None:
    """``(kind, errno)`` of the process limit ``error`` or one of its causes hit (see ``limit_kind``)."""
    for cause in causes(error):
        number = getattr(cause, "errno", None)
        if isinstance(cause, OSError) and number in (errno.EMFILE, errno.ENFILE):
            return "files", int(number)
        if isinstance(cause, OSError) and number == errno.ENOMEM or isinstance(cause, MemoryError):
            return "memory", errno.ENOMEM
        if thread_not_started(cause):
            return "threads", errno.EAGAIN
    return None


def limit_kind(error: BaseException) -> str | None:
    """Which process limit ``error`` (or one of its causes) hit: ``"files"``, ``"memory"``,
    ``"threads"``, or None. aiohttp reports an exhausted descriptor table as a connection error
    and s3fs wraps it again, so this walks the causes before anything is classified as transient."""
    hit = _limit_hit(error)
    return hit[0] if hit is not None else None


def resource_limit(error: BaseException) -> str | None:
    """What process limit ``error`` (or one of its causes) hit, in words with its value and a
    reader's fix (``num_workers``, ``prefetch_*``), or None (see ``limit_kind``)."""
    hit = _limit_hit(error)
    if hit is None:
        return None
    kind, number = hit
    if kind == "files":
        return f"too many open files ({errno.errorcode[number]}): {_nofile_limit()}"
    if kind == "memory":
        return f"out of memory (ENOMEM; this process may address {address_space_words()}): lower num_workers, prefetch_bytes or the batch size"
    return f"cannot start another thread: {_nproc_limit()}"


def _nofile_limit() -> str:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return (
        f"this process may open {soft} files (ulimit -n; hard limit {hard}); raise it, or lower num_workers and prefetch_episodes"
    )


def _nproc_limit() -> str:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    shown = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    return f"the user may run {shown} threads and processes (ulimit -u); raise it, or lower num_workers"
