"""Files of one dataset root (a local path or any fsspec URL), read and written with retries that end.

Transient errors (connection resets, timeouts, HTTP 408/429/5xx, S3 throttling) are retried with
exponential backoff and full jitter up to ``RetryPolicy.max_attempts``, then raise ``StorageError``
naming the object, the operation, the attempts and the last error. Permanent errors raise at
once: a missing object as ``ObjectNotFoundError`` (a ``FileNotFoundError``), a refused one as
``AccessDeniedError`` (a ``PermissionError``), anything else as ``StorageError``.

Our retry loop is the one in charge: for ``s3://`` roots, s3fs's and botocore's own retries are
turned off (unless ``storage_options`` set botocore's ``retries``) and every request has connect
and read timeouts, so a stalled endpoint costs at most ``max_attempts`` read timeouts. One layer
stays below us: aiohttp (>= 3.9) resends an idempotent request once when the connection drops
before the response headers (RFC 9112), so such a reset may cost no attempt of ours.

The fsspec filesystem is created lazily per process: a ``Storage`` pickles into DataLoader
workers (spawn) and survives fork (s3fs is not fork-safe once its event loop runs).

This module imports fsspec only; s3fs, botocore and aiohttp are loaded by fsspec on demand and
their exceptions are recognised by class name, so classifying errors imports nothing.
"""

from __future__ import annotations

import errno
import io
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import fsspec
import fsspec.core

from reader.errors import (
    AccessDeniedError,
    ObjectNotFoundError,
    ShortReadError,
    StorageError,
)

from reader.format.fields import sha256_chunks

T = TypeVar("T")

DEFAULT_MAX_GAP_BYTES = 1 << 20
"""``read_ranges`` merges ranges of one object whose gap is at most this: on object stores a
request costs about as much as a few hundred KB to a few MB of transfer."""

DEFAULT_MAX_REQUEST_BYTES = 64 << 20
"""``read_ranges`` never merges ranges into a request larger than this (a retry refetches it all)."""


# -- errors ---------------------------------------------------------------------------------
# -- retry policy ---------------------------------------------------------------------------
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
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("base_s", "cap_s", "connect_timeout_s", "read_timeout_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def delay_s(self, failed_attempts: int, rng: random.Random) -> float:
        """Seconds to sleep after ``failed_attempts`` (>= 1) failed attempts."""
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2 ** (failed_attempts - 1))))


# -- error classification (pure) --------------------------------------------------------------
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
    """The HTTP status an exception carries (botocore ``response``, aiohttp ``status``), if any."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if isinstance(status, int) else None
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
    if any(cls.__name__ in _TRANSIENT_CLASS_NAMES for cls in type(error).__mro__):
        return True
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return True
    return None


def is_transient(error: BaseException) -> bool:
    """Whether retrying the operation that raised ``error`` may succeed.

    Walks the exception and its causes (s3fs raises a translated ``OSError`` whose ``__cause__``
    is botocore's ``ClientError``) and returns the first verdict: not found, access denied,
    other 4xx and our own ``StorageError`` are permanent; connection resets, timeouts, 408, 429,
    5xx and throttling codes are transient. Unknown errors are permanent, so a bug is never
    retried into a slow failure.
    """
    for cause in _causes(error):
        verdict = _verdict(cause)
        if verdict is not None:
            return verdict
    return False


def _is_not_found(error: BaseException) -> bool:
    return any(isinstance(e, FileNotFoundError) or http_status(e) == 404 for e in _causes(error))


def _is_access_denied(error: BaseException) -> bool:
    return any(isinstance(e, PermissionError) or http_status(e) == 403 for e in _causes(error))


def _is_range_not_satisfiable(error: BaseException) -> bool:
    return any(http_status(e) == 416 or _s3_code(e) == "InvalidRange" for e in _causes(error))


# -- range coalescing (pure) ------------------------------------------------------------------
@dataclass(frozen=True)
class CoalescedRange:
    """One request ``[offset, offset + size)`` serving the input ranges at positions ``members``."""

    offset: int
    size: int
    members: tuple[int, ...]


def coalesce_ranges(
    ranges: Sequence[tuple[int, int]],
    *,
    max_gap_bytes: int = DEFAULT_MAX_GAP_BYTES,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> list[CoalescedRange]:
    """Merge ``(offset, size)`` ranges of one object into as few requests as the limits allow.

    Ranges are taken in offset order; a range joins the current request when the gap to it is
    at most ``max_gap_bytes`` (overlapping ranges always join) and the merged request stays
    within ``max_request_bytes`` (a single larger range still gets its own request). Empty
    ranges get no request (``members`` of no result mentions them).

    Raises:
        ValueError: a negative offset or size.
    """
    order = []
    for position, (offset, size) in enumerate(ranges):
        if offset < 0 or size < 0:
            raise ValueError(f"range {position} is ({offset}, {size}); offsets and sizes must be >= 0")
        if size:
            order.append((offset, offset + size, position))
    order.sort()
    requests: list[CoalescedRange] = []
    start = end = -1
    members: list[int] = []
    for offset, stop, position in order:
        merged_end = max(end, stop)
        if members and offset - end <= max_gap_bytes and merged_end - start <= max_request_bytes:
            end = merged_end
            members.append(position)
            continue
        if members:
            requests.append(CoalescedRange(start, end - start, tuple(members)))
        start, end, members = offset, stop, [position]
    if members:
        requests.append(CoalescedRange(start, end - start, tuple(members)))
    return requests


# -- counters --------------------------------------------------------------------------------
@dataclass
class StorageCounters:
    """What one ``Storage`` did in this process.

    ``requests`` counts every attempt (failed ones included), ``retries`` the attempts that were
    retried, ``seconds`` the wall time inside attempts (sleeps between them excluded).
    """

    bytes_read: int = 0
    bytes_written: int = 0
    requests: int = 0
    retries: int = 0
    seconds: float = 0.0


# -- storage ---------------------------------------------------------------------------------
class Storage:
    """Objects under one root (local path, ``file://``, ``s3://bucket/prefix`` or any fsspec URL).

    Paths given to methods (``rel``) are relative to the root, ``/``-separated. Thread-safe.

    Args:
        root: the dataset root.
        storage_options: fsspec options for remote roots (for S3: ``key``, ``secret``,
            ``client_kwargs={"endpoint_url": ...}``, ``config_kwargs``, ...). Copied.
        retry: attempts, backoff and timeouts (see ``RetryPolicy``).
    """

    def __init__(self, root: str | os.PathLike, storage_options: dict | None = None, *, retry: RetryPolicy = RetryPolicy()):
        self.url = str(root).rstrip("/") or "/"
        self.storage_options = dict(storage_options or {})
        self.retry = retry
        protocol, _ = fsspec.core.split_protocol(self.url)
        self.protocol = protocol or "file"
        self.is_local = self.protocol in ("file", "local")
        self.counters = StorageCounters()
        self._init_process_state()

    def _init_process_state(self) -> None:
        self._lock = threading.Lock()
        self._fs: Any = None
        self._root: str | None = None
        self._pid: int | None = None
        self._rng = random.Random()
        self._stale: list[Any] = []

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_lock", "_fs", "_root", "_pid", "_rng", "_stale"):
            state.pop(name)
        state["counters"] = StorageCounters()  # counters are per process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_process_state()

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"  # never the options: they may hold secrets

    # -- filesystem ---------------------------------------------------------------------------
    def _filesystem_options(self, *, internal_retries: bool) -> dict:
        options = dict(self.storage_options)
        if self.is_local:
            return options
        # Our own instance: never one whose event loop a parent process started, and our retry
        # settings do not leak into instances other code shares.
        options["skip_instance_cache"] = True
        if self.protocol in ("s3", "s3a"):
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("connect_timeout", self.retry.connect_timeout_s)
            config.setdefault("read_timeout", self.retry.read_timeout_s)
            if internal_retries:
                config.setdefault("retries", {"mode": "standard", "total_max_attempts": self.retry.max_attempts})
            else:
                config.setdefault("retries", {"total_max_attempts": 1})
            options["config_kwargs"] = config
        return options

    def _make_filesystem(self, *, internal_retries: bool) -> tuple[Any, str]:
        fs, root = fsspec.core.url_to_fs(self.url, **self._filesystem_options(internal_retries=internal_retries))
        if self.protocol in ("s3", "s3a"):
            # s3fs's own loop (5 tries by default) would hide attempts from ours. Without ours,
            # botocore retries requests and s3fs gets one more try for a body cut mid-read
            # (botocore returns before the body is read), instead of multiplying 5 x attempts.
            fs.retries = 2 if internal_retries else 1
        return fs, root

    @property
    def fs(self) -> Any:
        """This process's fsspec filesystem, for code that needs one (pyarrow, DuckDB).

        For S3 its internal retries are off: calls made on it directly are tried once. Prefer
        this class's methods (``open_input`` for pyarrow, ``register_with_duckdb`` for SQL).
        """
        pid = os.getpid()
        if self._pid is not None and self._pid != pid:
            # Forked: a parent thread may have held the lock at fork time and does not exist
            # here to release it. Never acquire the inherited one.
            self._lock = threading.Lock()
        if self._fs is None or self._pid != pid:
            with self._lock:
                if self._fs is None or self._pid != pid:
                    if self._fs is not None:
                        # Inherited through fork: unusable here, and collecting it would run
                        # s3fs's session finalizer on sockets shared with the parent: keep it.
                        self._stale.append(self._fs)
                    if self._pid != pid:
                        self._rng = random.Random()  # forked workers must not share jitter
                    self._fs, self._root = self._make_filesystem(internal_retries=False)
                    self._pid = pid
        return self._fs

    @property
    def root(self) -> str:
        """The root as the filesystem names it (``bucket/prefix``, an absolute local path)."""
        self.fs  # noqa: B018 - resolves _root
        assert self._root is not None
        return self._root

    def path(self, rel: str) -> str:
        """The filesystem path of ``rel`` (for ``self.fs`` calls)."""
        return f"{self.root}/{rel}" if rel else self.root

    def object_url(self, rel: str) -> str:
        """The full URL of ``rel`` (``s3://bucket/prefix/rel``), for messages and cache keys."""
        return f"{self.url}/{rel}" if rel else self.url

    describe = object_url

    # -- the retry loop ---------------------------------------------------------------------
    def _count(self, **deltas: float) -> None:
        with self._lock:
            for name, delta in deltas.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)

    def _call(self, operation: str, rel: str, function: Callable[[], T]) -> T:
        """Run ``function`` under the retry policy; map its failure to our exceptions."""
        url = self.object_url(rel)
        attempts = 0
        while True:
            attempts += 1
            started = time.perf_counter()
            try:
                result = function()
            except Exception as err:  # classified below; nothing is swallowed
                self._count(requests=1, seconds=time.perf_counter() - started)
                if isinstance(err, StorageError):
                    raise
                if _is_not_found(err):
                    raise ObjectNotFoundError(f"{url}: not found ({operation})", url=url, operation=operation, attempts=attempts) from err
                if _is_access_denied(err):
                    raise AccessDeniedError(
                        f"{url}: access denied ({operation}): {_brief(err)}", url=url, operation=operation, attempts=attempts
                    ) from err
                if not is_transient(err):
                    raise StorageError(
                        f"{url}: {operation} failed: {_brief(err)}", url=url, operation=operation, attempts=attempts
                    ) from err
                if attempts >= self.retry.max_attempts:
                    raise StorageError(
                        f"{url}: {operation} failed after {attempts} attempts; last error: {_brief(err)}",
                        url=url,
                        operation=operation,
                        attempts=attempts,
                    ) from err
                self._count(retries=1)
                time.sleep(self.retry.delay_s(attempts, self._rng))
                continue
            self._count(requests=1, seconds=time.perf_counter() - started)
            return result

    # -- reads ------------------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes:
        """The whole object.

        Raises:
            ObjectNotFoundError, AccessDeniedError: at once.
            StorageError: permanent failure, or transient failures beyond the policy.
        """
        data = self._call("read", rel, lambda: self.fs.cat_file(self.path(rel)))
        self._count(bytes_read=len(data))
        return data

    def read_range(self, rel: str, offset: int, size: int) -> bytes:
        """Bytes ``[offset, offset + size)`` of the object, in one ranged request.

        Raises:
            ShortReadError: the object has fewer bytes (message gives the range and its size).
            ObjectNotFoundError, AccessDeniedError, StorageError: as ``read_bytes``.
            ValueError: a negative offset or size.
        """
        if offset < 0 or size < 0:
            raise ValueError(f"{self.object_url(rel)}: range ({offset}, {size}) has a negative offset or size")
        if size == 0:
            return b""
        operation = f"ranged read [{offset}, {offset + size})"

        def ranged() -> bytes:
            try:
                data = self.fs.cat_file(self.path(rel), start=offset, end=offset + size)
            except Exception as err:
                if _is_range_not_satisfiable(err):
                    raise self._short_read(rel, offset, size, 0) from err
                raise
            if len(data) != size:
                # A body cut by the network raises (aiohttp checks Content-Length); a complete
                # short body means the object itself is shorter.
                raise self._short_read(rel, offset, size, len(data))
            return data

        data = self._call(operation, rel, ranged)
        self._count(bytes_read=len(data))
        return data

    def _short_read(self, rel: str, offset: int, size: int, got: int) -> ShortReadError:
        url = self.object_url(rel)
        try:
            actual = f"the object has {int(self.fs.size(self.path(rel)))} bytes"
        except Exception:  # the message is best effort; the error stands either way
            actual = "its size is unknown"
        return ShortReadError(
            f"{url}: ranged read [{offset}, {offset + size}) got {got} of {size} bytes; {actual} "
            "(object truncated or replaced?)",
            url=url,
            operation="ranged read",
            attempts=1,
        )

    def read_ranges(
        self,
        rel: str,
        ranges: Sequence[tuple[int, int]],
        *,
        max_gap_bytes: int = DEFAULT_MAX_GAP_BYTES,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> list[bytes]:
        """Bytes of each ``(offset, size)`` range of one object, in input order.

        Near ranges are fetched together (see ``coalesce_ranges``): the number of requests is
        ``len(coalesce_ranges(ranges, ...))``, each retried as ``read_range``.
        """
        out: list[bytes] = [b""] * len(ranges)
        for request in coalesce_ranges(ranges, max_gap_bytes=max_gap_bytes, max_request_bytes=max_request_bytes):
            blob = memoryview(self.read_range(rel, request.offset, request.size))
            for position in request.members:
                offset, size = ranges[position]
                start = offset - request.offset
                out[position] = bytes(blob[start : start + size])
        return out

    def download(self, rel: str, local_path: str | os.PathLike, *, chunk_bytes: int = 8 << 20) -> int:
        """Copy the object to a local file, atomically (temp file + rename), in ``chunk_bytes``
        ranged reads, each retried on its own (a reset 190 MB into a 200 MB video costs one
        chunk, not the file). Returns the bytes written.

        Raises:
            ObjectNotFoundError, AccessDeniedError, StorageError: as ``read_range``.
        """
        total = self.size(rel)

        def chunks() -> Iterator[bytes]:
            for offset in range(0, total, chunk_bytes):
                yield self.read_range(rel, offset, min(chunk_bytes, total - offset))

        _atomic_write(Path(local_path), chunks())
        return total

    def size(self, rel: str) -> int:
        """The object's size in bytes (never from a cached listing)."""
        path = self.path(rel)

        def stat() -> int:
            self.fs.invalidate_cache(path)
            return int(self.fs.size(path))

        return self._call("size", rel, stat)

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists (an object, or for object stores also a non-empty prefix)."""
        path = self.path(rel)

        def check() -> bool:
            self.fs.invalidate_cache(path)
            return bool(self.fs.exists(path))

        return self._call("exists", rel, check)

    def list(self, prefix: str = "") -> list[str]:
        """Sorted paths (relative to the root) of every object under ``prefix``, recursively;
        [] if none. Temp files of atomic writes (``TEMP_MARKER``) are not objects yet: left out."""
        base = self.path(prefix.rstrip("/"))

        def find() -> list[str]:
            self.fs.invalidate_cache(base)
            return self.fs.find(base)

        strip = len(self.root.rstrip("/")) + 1
        found = (path[strip:] for path in self._call("list", prefix, find))
        return sorted(rel for rel in found if not is_temp_name(rel.rsplit("/", 1)[-1]))

    def list_dirs(self, prefix: str = "") -> list[str]:
        """Sorted names of the directories (object-store prefixes) directly under ``prefix``;
        [] if none. One listing call, however many objects lie below them."""
        base = self.path(prefix.rstrip("/"))

        def ls() -> list[dict]:
            self.fs.invalidate_cache(base)
            try:
                return self.fs.ls(base, detail=True)
            except FileNotFoundError:
                return []

        names = []
        for entry in self._call("list", prefix, ls):
            if entry.get("type") == "directory":
                name = str(entry["name"]).rstrip("/").rsplit("/", 1)[-1]
                if name and not is_temp_name(name):
                    names.append(name)
        return sorted(set(names))

    def digest(self, rel: str, *, chunk_bytes: int = 1 << 22) -> tuple[str, int]:
        """``(SHA-256 hex, size)`` of the object, streamed in ``chunk_bytes`` reads (each retried).

        Raises:
            ObjectNotFoundError, AccessDeniedError, StorageError: as ``read_range``.
        """
        with self.open_input(rel) as handle:
            return sha256_chunks(iter(lambda: handle.read(chunk_bytes), b""))

    def open_input(self, rel: str, *, size: int | None = None) -> io.BufferedIOBase:
        """A seekable read-only binary file over ``rel`` (for ``pyarrow.parquet.ParquetFile``).

        Remote reads go through ``read_range`` (our retries, no read-ahead beyond the 1 MiB
        buffer); fsspec's own file objects read ahead outside the retry policy. Pass ``size``
        when known to save a request.
        """
        if self.is_local:
            return open(self.path(rel), "rb")
        total = self.size(rel) if size is None else int(size)
        return io.BufferedReader(_RangeFile(self, rel, total), buffer_size=1 << 20)

    open = open_input  # the reader's historical name

    # -- writes -----------------------------------------------------------------------------
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace ``rel`` with ``data``, atomically (readers see old or new, never half).

        Local: a temp file in the target directory renamed into place (parents created).
        Remote: one PUT (fsspec switches to multipart for large data); retried as a whole.
        """
        path = self.path(rel)
        if self.is_local:
            self._call("write", rel, lambda: _atomic_write(Path(path), [data]))
        else:

            def put() -> None:
                self.fs.pipe_file(path, data)
                self.fs.invalidate_cache(path)

            self._call("write", rel, put)
        self._count(bytes_written=len(data))

    def put_file(self, local_path: str | os.PathLike, rel: str, *, move: bool = False) -> None:
        """Copy a local file to ``rel`` (atomically, as ``write_bytes``).

        With ``move=True`` the local file is consumed: on a local root on the same device it is
        renamed into place (no copy: a 512 MB shard costs nothing to publish), otherwise it is
        deleted once the copy or upload succeeded. Without it, the source is kept.
        """
        path = self.path(rel)
        size = os.path.getsize(local_path)
        if self.is_local:
            if move and _same_device(Path(local_path), Path(path).parent):
                self._call("upload", rel, lambda: _atomic_rename(Path(local_path), Path(path)))
                self._count(bytes_written=size)
                return
            self._call("upload", rel, lambda: _atomic_copy(Path(local_path), Path(path)))
        else:

            def upload() -> None:
                self.fs.put_file(os.fspath(local_path), path)
                self.fs.invalidate_cache(path)

            self._call("upload", rel, upload)
        self._count(bytes_written=size)
        if move:
            os.unlink(local_path)

    def remove_stale_temp_files(self, *, older_than_s: float = 900.0) -> int:
        """Delete temp files that an interrupted writer left under a local root (see
        ``remove_stale_temp_files``); object stores have none (writes are single PUTs).
        Returns how many were deleted."""
        return remove_stale_temp_files(Path(self.path("")), older_than_s=older_than_s) if self.is_local else 0

    def remove(self, rel: str, *, missing_ok: bool = False) -> None:
        """Delete the object ``rel``.

        Raises:
            ObjectNotFoundError: it does not exist and ``missing_ok`` is False (local roots; an
                object store's delete of a missing key succeeds).
        """
        path = self.path(rel)

        def delete() -> None:
            self.fs.rm_file(path)
            self.fs.invalidate_cache(path)

        try:
            self._call("remove", rel, delete)
        except ObjectNotFoundError:
            if not missing_ok:
                raise

    # -- DuckDB -----------------------------------------------------------------------------
    def register_with_duckdb(self, con: Any) -> str:
        """Make this root readable by SQL on ``con``; returns the root as SQL should name it.

        Remote roots: an fsspec filesystem is registered on the connection
        (``con.register_filesystem``), so ``read_parquet('<returned>/index/samples.parquet')``
        works without DuckDB's httpfs extension. DuckDB routes paths to it by the first name in
        the filesystem's ``protocol`` (``s3`` for s3fs; ``s3a://`` paths resolve too), so one
        connection holds one filesystem per protocol: registering a second S3 endpoint raises
        DuckDB's error. DuckDB reads outside our retry loop (and ``self.counters``), so this
        filesystem keeps botocore's retries on (``max_attempts`` in standard mode, which backs
        off on its own) with the policy's timeouts.
        Local roots: nothing is registered; the absolute root path is returned.
        """
        if self.is_local:
            return self.root
        fs, root = self._make_filesystem(internal_retries=True)
        con.register_filesystem(fs)
        return fs.unstrip_protocol(root)


def _brief(error: BaseException) -> str:
    """``Type: message``; for a message-less wrapper (fsspec's ``FSTimeoutError()``), its cause's."""
    text = str(error)
    cause = error.__cause__ or error.__context__
    if not text and cause is not None:
        return f"{type(error).__name__} ({_brief(cause)})"
    return f"{type(error).__name__}: {(text or repr(error))[:300]}"


def default_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the process umask.

    ``tempfile.mkstemp`` creates files ``0o600``; a file renamed into a dataset must instead be
    readable by whoever may read the directory (``0o644`` under umask 022), like any other.
    """
    try:
        with open("/proc/self/status") as status:  # reading it does not change the umask
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (racy only with threads changing it too)
    os.umask(mask)
    return 0o666 & ~mask


TEMP_MARKER = ".tmp-"
"""Temporary files of atomic writes are named ``.<target name>.tmp-<random>`` in the target's
directory; ``remove_stale_temp_files`` deletes old ones that a killed writer left behind."""


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of our atomic writes' temp files (``.<name>.tmp-<random>``)."""
    return name.startswith(".") and TEMP_MARKER in name


def _atomic_write(target: Path, chunks: Sequence[bytes] | Iterator[bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}{TEMP_MARKER}")
    try:
        os.fchmod(fd, default_file_mode())
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_stale_temp_files(directory: Path, *, older_than_s: float = 900.0) -> int:
    """Delete temp files of atomic writes (``TEMP_MARKER`` in the name) under ``directory``
    whose last write is older than ``older_than_s``: left by a writer that was killed or ran
    out of space. A live writer keeps its file's mtime fresh, so concurrent writers (other
    ``--part`` jobs) are never disturbed. Returns how many were deleted."""
    removed, now = 0, time.time()
    for path in directory.rglob(f"*{TEMP_MARKER}*") if directory.is_dir() else []:
        try:
            if path.is_file() and not path.is_symlink() and now - path.stat().st_mtime > older_than_s:
                path.unlink()
                removed += 1
        except OSError:
            continue  # gone already, or not ours to delete
    return removed


def _atomic_copy(source: Path, target: Path) -> None:
    with open(source, "rb") as handle:
        _atomic_write(target, iter(lambda: handle.read(1 << 22), b""))


def _same_device(source: Path, directory: Path) -> bool:
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return os.stat(source).st_dev == os.stat(directory).st_dev
    except OSError:
        return False


def _atomic_rename(source: Path, target: Path) -> None:
    """Rename a finished local file into place with the mode a new file gets (a temp file
    made by ``tempfile`` is ``0o600``; a published one must be readable like any other)."""
    os.chmod(source, default_file_mode())
    os.replace(source, target)


class _RangeFile(io.RawIOBase):
    """Raw file over ``Storage.read_range`` (so pyarrow's reads get our retries)."""

    def __init__(self, storage: Storage, rel: str, size: int):
        self._storage, self._rel, self._size, self._position = storage, rel, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self._size - self._position)
        if count <= 0:
            return 0
        data = self._storage.read_range(self._rel, self._position, count)
        memoryview(buffer).cast("B")[:count] = data
        self._position += count
        return count


__all__ = [
    "DEFAULT_MAX_GAP_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "AccessDeniedError",
    "CoalescedRange",
    "ObjectNotFoundError",
    "RetryPolicy",
    "ShortReadError",
    "Storage",
    "StorageCounters",
    "StorageError",
    "coalesce_ranges",
    "default_file_mode",
    "http_status",
    "is_temp_name",
    "is_transient",
    "remove_stale_temp_files",
]
