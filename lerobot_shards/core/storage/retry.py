"""How long a storage operation may take, and which failures are worth another attempt.

``RetryPolicy`` bounds attempts, backoff (exponential with full jitter) and per-request
timeouts. ``is_transient`` classifies an exception from any layer below us (s3fs, botocore,
aiohttp, the OS) by walking its causes: connection resets, timeouts, HTTP 408/429/5xx and S3
throttling codes are transient; not found, access denied, other 4xx and unknown errors are
permanent, so a bug is never retried into a slow failure. Exceptions are recognised by class
name, so classifying imports nothing.
"""

from __future__ import annotations

import errno
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass

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
        errno.EBUSY,  # s3fs's translation of SlowDown, ServiceUnavailable, OperationAborted
        errno.EREMOTEIO,  # s3fs's translation of InternalError
    }
)
# Exception classes (matched by name anywhere in the MRO, so nothing is imported): botocore's
# HTTPClientError covers EndpointConnectionError, ConnectionClosedError, ReadTimeoutError and
# ConnectTimeoutError; aiohttp's ClientConnectionError covers ServerDisconnectedError and
# ClientOSError; ResponseParserError is what throttling with a garbled body turns into.
_TRANSIENT_CLASS_NAMES = frozenset(
    {
        "HTTPClientError",
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "IncompleteReadError",
        "ResponseStreamingError",
        "ResponseParserError",
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
# HTTP clients' connection failures, by (top-level module, class) so that a generic name (a
# ConnectionError, a ReadError) from elsewhere (botocore, tarfile) is not taken for one: httpx
# and its fork httpx2 (huggingface_hub 1.x and 2.x) and requests (before them). requests'
# SSLError and ProxyError, and botocore's errors built on them, are subclasses of its
# ConnectionError but not cured by a retry: they stay permanent, as a certificate failure was.
_TRANSIENT_CLIENT_CLASSES = frozenset(
    {
        (module, name)
        for module in ("httpx", "httpx2")
        for name in ("ConnectError", "ReadError", "WriteError", "RemoteProtocolError", "TimeoutException")
    }
    | {("requests", "ConnectionError"), ("requests", "ChunkedEncodingError"), ("requests", "Timeout")}
)
_NEVER_TRANSIENT_CLASS_NAMES = frozenset({"SSLError", "ProxyError", "ProxyConnectionError"})
_TRANSIENT_S3_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "OperationAborted",
    }
)


def _causes(error: BaseException) -> Iterator[BaseException]:
    """``error``, then what caused it (``__cause__``, else ``__context__``), without cycles."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_status(error: BaseException) -> int | None:
    """The HTTP status an exception carries (botocore's ``response`` dict, an httpx/requests
    ``response`` as huggingface_hub raises them, aiohttp's ``status``), if any."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if isinstance(status, int) else None
    status = getattr(response, "status_code", None)
    if isinstance(status, int) and 100 <= status <= 599:
        return status
    for name in ("status", "status_code", "code"):
        status = getattr(error, name, None)
        if isinstance(status, int) and 100 <= status <= 599:
            return status
    return None


def _s3_code(error: BaseException) -> str | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def _verdict(error: BaseException) -> bool | None:
    """True: transient; False: permanent; None: this exception alone does not tell."""
    if isinstance(error, StorageError):
        return False  # ours: already classified (short reads, not found, ...)
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)):
        return False
    code = _s3_code(error)
    if code in _TRANSIENT_S3_CODES:
        return True
    status = http_status(error)
    if status is not None:
        return status in (408, 429) or status >= 500
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True  # includes asyncio.TimeoutError, fsspec's FSTimeoutError, ConnectionResetError
    mro = type(error).__mro__
    if any(cls.__name__ in _TRANSIENT_CLASS_NAMES for cls in mro):
        return True
    if any((cls.__module__.split(".")[0], cls.__name__) in _TRANSIENT_CLIENT_CLASSES for cls in mro):
        return not any(cls.__name__ in _NEVER_TRANSIENT_CLASS_NAMES for cls in mro)
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return True
    return None


def is_transient(error: BaseException) -> bool:
    """Whether retrying the operation that raised ``error`` may succeed.

    Walks the exception and its causes (s3fs raises a translated ``OSError`` whose ``__cause__``
    is botocore's ``ClientError``) and returns the first verdict: not found, access denied,
    other 4xx, a failed DNS lookup and our own ``StorageError`` are permanent; connection resets, timeouts, 408, 429,
    5xx and throttling codes are transient. Unknown errors are permanent, so a bug is never
    retried into a slow failure.
    """
    if name_resolution_failed(error):
        return False
    for cause in _causes(error):
        verdict = _verdict(cause)
        if verdict is not None:
            return verdict
    return False


def name_resolution_failed(error: BaseException) -> bool:
    """Whether ``error`` (or a cause) is a failed DNS lookup (``socket.gaierror``, which
    requests, httpx and aiohttp all wrap). Permanent: a machine without network or DNS, or a
    misspelt host, does not heal in a retry's seconds (an offline Hub pack waited 33 s through
    8 attempts), and a re-run resumes where it stopped."""
    return any(isinstance(cause, socket.gaierror) for cause in _causes(error))


def retry_after_s(error: BaseException, *, cap_s: float) -> float | None:
    """How long the server asked the client to wait (an HTTP ``Retry-After`` in seconds on the
    error's response, as the Hub sends with 429), capped at ``cap_s``; None when it did not say."""
    for cause in _causes(error):
        headers = getattr(getattr(cause, "response", None), "headers", None)
        value = headers.get("Retry-After") if headers is not None and hasattr(headers, "get") else None
        if value is not None:
            try:
                return max(0.0, min(float(value), cap_s))
            except ValueError:
                return None  # an HTTP date: fall back to our own backoff
    return None


def resource_limit(error: BaseException) -> str | None:
    """What process limit ``error`` (or one of its causes) hit, in words with its value, or
    None. aiohttp reports an exhausted descriptor table as a connection error and s3fs wraps it
    again, so this walks the causes before anything is classified as transient."""
    for cause in _causes(error):
        number = getattr(cause, "errno", None)
        if isinstance(cause, OSError) and number in (errno.EMFILE, errno.ENFILE):
            return f"too many open files ({errno.errorcode[number]}): {_nofile_limit()}"
        if isinstance(cause, OSError) and number == errno.ENOMEM or isinstance(cause, MemoryError):
            return "out of memory (ENOMEM): lower num_workers, prefetch_bytes or the batch size"
        if isinstance(cause, RuntimeError) and "can't start new thread" in str(cause):
            return f"cannot start another thread: {_nproc_limit()}"
    return None


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


def is_not_found(error: BaseException) -> bool:
    return any(isinstance(e, FileNotFoundError) or http_status(e) == 404 for e in _causes(error))


def is_access_denied(error: BaseException) -> bool:
    return any(isinstance(e, PermissionError) or http_status(e) == 403 for e in _causes(error))


def is_range_not_satisfiable(error: BaseException) -> bool:
    return any(http_status(e) == 416 or _s3_code(e) == "InvalidRange" for e in _causes(error))


def brief(error: BaseException) -> str:
    """``Type: message [S3 code, HTTP status]``; for a message-less wrapper (fsspec's
    ``FSTimeoutError()``), its cause's. The service's code and status come from anywhere in
    the causes (s3fs turns ``SlowDown`` into ``OSError(EBUSY, "Please reduce your request
    rate.")``, which alone does not say it was throttling)."""
    text = str(error)
    cause = error.__cause__ or error.__context__
    if not text and cause is not None:
        return f"{type(error).__name__} ({brief(cause)})"
    code = next((c for c in map(_s3_code, _causes(error)) if c), None)
    status = next((s for s in map(http_status, _causes(error)) if s), None)
    service = ", ".join(part for part in (f"S3 {code}" if code else "", f"HTTP {status}" if status else "") if part)
    return f"{type(error).__name__}: {(text or repr(error))[:300]}" + (f" [{service}]" if service else "")
