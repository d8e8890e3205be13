"""Reading a packed dataset from local disk or any fsspec URL, with retries that end.

Transient errors (connection resets, timeouts, 5xx, throttling) are retried with
exponential backoff and full jitter up to ``RetryPolicy.max_attempts``, then raise
``StorageError`` naming the object; permanent ones (404, 403) raise at once. The fsspec
filesystem is created lazily per process, so a ``Storage`` survives pickling into
DataLoader workers (s3fs is not fork-safe once its event loop runs).
"""

from __future__ import annotations

import errno
import io
import os
import random
import time
from dataclasses import dataclass
from typing import Any

import fsspec


class StorageError(OSError):
    """A read failed after retries (or permanently); the message names the object."""


class ObjectNotFoundError(StorageError, FileNotFoundError):
    """The object does not exist (a permanent error: never retried)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter: sleep U(0, min(cap_s, base_s * 2**attempt))."""

    max_attempts: int = 6
    base_s: float = 0.2
    cap_s: float = 5.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2**attempt)))


_TRANSIENT_ERRNOS = {errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED, errno.ETIMEDOUT, errno.EPIPE, errno.EHOSTUNREACH}
_TRANSIENT_NAMES = (
    "Timeout",
    "ConnectionError",
    "ConnectionClosed",
    "ServerDisconnected",
    "ClientPayloadError",
    "ClientOSError",
    "EndpointConnectionError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "IncompleteRead",
    "ResponseStreamingError",
    "SlowDown",
    "Throttl",
    "ServiceUnavailable",
    "InternalError",
)


def is_transient(error: BaseException) -> bool:
    """Classify an exception from fsspec/s3fs/botocore/aiohttp: True when retrying may help."""
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(error, (TimeoutError, ConnectionError)):
        return True
    if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
        return True
    status = _http_status(error)
    if status is not None:
        return status == 429 or status >= 500
    name = type(error).__name__ + " " + str(error)[:200]
    return any(token in name for token in _TRANSIENT_NAMES)


def _http_status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if status else None
    status = getattr(error, "status", None) or getattr(error, "status_code", None)
    return int(status) if isinstance(status, int) else None


@dataclass
class StorageCounters:
    """What this process read: bytes, requests, retries and seconds spent reading."""

    bytes_read: int = 0
    requests: int = 0
    retries: int = 0
    seconds: float = 0.0


class Storage:
    """Files of one dataset root (local path or fsspec URL), read with retries."""

    def __init__(self, root: str, storage_options: dict | None = None, *, retry: RetryPolicy = RetryPolicy()):
        self.url = str(root).rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.retry = retry
        self.counters = StorageCounters()
        self._fs = None
        self._root: str | None = None
        self._pid: int | None = None
        self._rng = random.Random()
        self.is_local = "://" not in self.url or self.url.startswith("file://")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fs"] = None  # rebuilt lazily in the receiving process
        state["_pid"] = None
        state["counters"] = StorageCounters()
        return state

    @property
    def fs(self):
        if self._fs is None or self._pid != os.getpid():
            options = dict(self.storage_options)
            if not self.is_local:
                # Our own instance: never reuse a parent process's event loop, and our retry
                # settings below do not leak into instances other code shares.
                options["skip_instance_cache"] = True
            self._fs, self._root = fsspec.core.url_to_fs(self.url, **options)
            if not self.is_local and hasattr(self._fs, "retries"):
                # s3fs retries internally (5x with backoff); let RetryPolicy count and bound attempts.
                self._fs.retries = 1
            self._pid = os.getpid()
        return self._fs

    @property
    def root(self) -> str:
        self.fs  # noqa: B018 - resolves _root
        return self._root

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def describe(self, rel: str) -> str:
        return f"{self.url}/{rel}"

    def _call(self, operation: str, rel: str, function, *args):
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                self.counters.requests += 1
                result = function(*args)
                self.counters.seconds += time.perf_counter() - started
                return result
            except FileNotFoundError as err:
                raise ObjectNotFoundError(f"{self.describe(rel)}: not found ({operation})") from err
            except Exception as err:  # classified below; anything permanent re-raises at once
                self.counters.seconds += time.perf_counter() - started
                attempt += 1
                if not is_transient(err):
                    raise StorageError(f"{self.describe(rel)}: {operation} failed: {type(err).__name__}: {err}") from err
                if attempt >= self.retry.max_attempts:
                    raise StorageError(
                        f"{self.describe(rel)}: {operation} failed after {attempt} attempts: {type(err).__name__}: {err}"
                    ) from err
                self.counters.retries += 1
                time.sleep(self.retry.delay(attempt, self._rng))

    def read_bytes(self, rel: str) -> bytes:
        data = self._call("read", rel, self.fs.cat_file, self.path(rel))
        self.counters.bytes_read += len(data)
        return data

    def read_range(self, rel: str, offset: int, size: int) -> bytes:
        """One ranged read of ``[offset, offset + size)``; a short read is an error."""

        def ranged() -> bytes:
            data = self.fs.cat_file(self.path(rel), start=offset, end=offset + size)
            if len(data) != size:
                raise StorageError(
                    f"{self.describe(rel)}: short read at [{offset}, {offset + size}): got {len(data)} bytes "
                    "(object truncated or changed?)"
                )
            return data

        try:
            data = self._call("ranged read", rel, ranged)
        except StorageError as err:
            if isinstance(err.__cause__, StorageError):
                raise err.__cause__ from None
            raise
        self.counters.bytes_read += len(data)
        return data

    def size(self, rel: str) -> int:
        return int(self._call("stat", rel, self.fs.size, self.path(rel)))

    def exists(self, rel: str) -> bool:
        return bool(self._call("exists", rel, self.fs.exists, self.path(rel)))

    def open(self, rel: str) -> io.BufferedReader:
        """A seekable read-only file whose every read is a retried ranged read (for pyarrow).

        fsspec's own file objects read ahead outside our retry policy; this one does not.
        """
        if self.is_local:
            return open(self.path(rel), "rb")
        return io.BufferedReader(_RangeFile(self, rel, self.size(rel)), buffer_size=1 << 20)


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

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self._size - self._position)
        if count <= 0:
            return 0
        data = self._storage.read_range(self._rel, self._position, count)
        buffer[:count] = data
        self._position += count
        return count


__all__ = ["ObjectNotFoundError", "RetryPolicy", "Storage", "StorageCounters", "StorageError", "is_transient"]
