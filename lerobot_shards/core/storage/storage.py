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

The fsspec filesystem is shared by every root of the process with the same protocol and
options (``lerobot_shards.core.storage.clients``) and looked up lazily: a ``Storage`` costs no client of its
own, pickles into DataLoader workers (spawn) and survives fork (s3fs is not fork-safe once its
event loop runs).

This module imports fsspec only; s3fs, botocore and aiohttp are loaded by fsspec on demand and
their exceptions are recognised by class name, so classifying errors imports nothing.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import fsspec
import fsspec.core

from lerobot_shards.core.errors import (
    ArgumentError,
    ObjectNotFoundError,
    ShortReadError,
    StorageError,
)
from lerobot_shards.core.format.fields import sha256_chunks
from lerobot_shards.core.storage.backends.table import backend_for
from lerobot_shards.core.storage.calls import call_with_retries
from lerobot_shards.core.storage.clients import ProcessFilesystem, check_protocol, shared_filesystem
from lerobot_shards.core.storage.local_files import (
    atomic_copy,
    atomic_rename,
    atomic_write,
    is_temp_name,
    remove_stale_temp_files,
    same_device,
)
from lerobot_shards.core.storage.range_file import RangeFile, local_prefix
from lerobot_shards.core.storage.ranges import DEFAULT_MAX_GAP_BYTES, DEFAULT_MAX_REQUEST_BYTES, coalesce_ranges
from lerobot_shards.core.storage.retry import RetryPolicy

T = TypeVar("T")


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
            ``endpoint_url``, ``config_kwargs``, ...). Copied.
        retry: attempts, backoff and timeouts (see ``RetryPolicy``).
    """

    def __init__(self, root: str | os.PathLike, storage_options: dict | None = None, *, retry: RetryPolicy = RetryPolicy()):
        self.url = str(root).rstrip("/") or "/"
        self.storage_options = dict(storage_options or {})
        self.retry = retry
        protocol, _ = fsspec.core.split_protocol(self.url)
        self.protocol = protocol or "file"
        check_protocol(self.url, self.protocol)  # an unknown scheme or a missing package: said here, once
        self.backend = backend_for(self.protocol)
        problem = self.backend.options_problem(self.storage_options)
        if problem:
            raise ArgumentError(f"{self.url}: {problem} (storage_options / --storage-options)")
        self.is_local = self.backend.local
        self.counters = StorageCounters()
        self._init_process_state()

    def _init_process_state(self) -> None:
        self._process = ProcessFilesystem()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_process")
        state["counters"] = StorageCounters()  # counters are per process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_process_state()

    def __repr__(self) -> str:
        return f"Storage({self.url!r})"  # never the options: they may hold secrets

    # -- filesystem ---------------------------------------------------------------------------
    def _make_filesystem(self, *, internal_retries: bool) -> tuple[Any, str]:
        options = self.backend.filesystem_options(self.storage_options, self.retry, internal_retries=internal_retries)
        fs, root = shared_filesystem(self.url, options)
        self.backend.tune(fs, internal_retries=internal_retries)
        return fs, root

    @property
    def fs(self) -> Any:
        """This process's fsspec filesystem, for code that needs one (pyarrow, DuckDB).

        For S3 its internal retries are off: calls made on it directly are tried once. Prefer
        this class's methods (``open_input`` for pyarrow, ``register_with_duckdb`` for SQL).
        Survives fork: a child builds its own (``ProcessFilesystem``).
        """
        return self._process.get(lambda: self._make_filesystem(internal_retries=False))[0]

    @property
    def root(self) -> str:
        """The root as the filesystem names it (``bucket/prefix``, an absolute local path)."""
        return self._process.get(lambda: self._make_filesystem(internal_retries=False))[1]

    def path(self, rel: str) -> str:
        """The filesystem path of ``rel`` (for ``self.fs`` calls)."""
        return f"{self.root}/{rel}" if rel else self.root

    def object_url(self, rel: str) -> str:
        """The full URL of ``rel`` (``s3://bucket/prefix/rel``), for messages and cache keys."""
        return f"{self.url}/{rel}" if rel else self.url

    describe = object_url

    # -- the retry loop ---------------------------------------------------------------------
    def _count(self, **deltas: float) -> None:
        with self._process.lock:
            for name, delta in deltas.items():
                setattr(self.counters, name, getattr(self.counters, name) + delta)

    def _call(self, operation: str, rel: str, function: Callable[[], T]) -> T:
        """Run ``function`` under the retry policy; map its failure to our exceptions
        (``call_with_retries``)."""
        return call_with_retries(
            function,
            url=self.object_url(rel),
            operation=operation,
            backend=self.backend,
            retry=self.retry,
            storage_options=self.storage_options,
            rng=self._process.rng,
            count=self._count,
        )

    # -- reads ------------------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes:
        """The whole object.

        Raises:
            ObjectNotFoundError, AccessDeniedError: at once.
            StorageError: permanent failure, or transient failures beyond the policy.
        """
        # Fresh: s3fs sizes a whole-object read from a cached listing of its folder, which
        # says "not found" for an object written since by another client or process.
        data = self._fresh("read", rel, self.fs.cat_file)
        self._count(bytes_read=len(data))
        return data

    def read_prefix(self, rel: str, limit: int) -> bytes:
        """The object's first ``limit`` bytes, or all of it when shorter, in one ranged request:
        a file whose size is unknown read whole without a separate size request, and never
        more than ``limit`` bytes of it (``len(result) == limit`` means it may be longer).

        Raises:
            ObjectNotFoundError, AccessDeniedError, StorageError: as ``read_bytes``.
            ValueError: ``limit`` < 1.
        """
        if limit < 1:
            raise ArgumentError(f"{self.object_url(rel)}: limit must be >= 1, got {limit}")

        def prefix() -> bytes:
            if self.is_local:
                return local_prefix(self.path(rel), limit)
            try:
                return self.fs.cat_file(self.path(rel), start=0, end=limit)
            except Exception as err:
                if self.backend.is_range_not_satisfiable(err):  # an empty object
                    return b""
                raise

        data = self._call("read", rel, prefix)  # the bound is ours, not what the user must fix
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
            raise ArgumentError(f"{self.object_url(rel)}: range ({offset}, {size}) has a negative offset or size")
        if size == 0:
            return b""
        operation = f"ranged read [{offset}, {offset + size})"

        def ranged() -> bytes:
            try:
                data = self.fs.cat_file(self.path(rel), start=offset, end=offset + size)
            except Exception as err:
                if self.backend.is_range_not_satisfiable(err):
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
            f"{url}: ranged read [{offset}, {offset + size}) got {got} of {size} bytes; {actual} (object truncated or replaced?)",
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

        atomic_write(Path(local_path), chunks())
        return total

    def _fresh(self, operation: str, rel: str, ask: Callable[[str], T]) -> T:
        """``ask(path)`` under the retry policy, never answered from fsspec's listing cache
        (another process may have written the object since)."""
        path = self.path(rel)

        def call() -> T:
            self.fs.invalidate_cache(path)
            return ask(path)

        return self._call(operation, rel, call)

    def size(self, rel: str) -> int:
        """The object's size in bytes (never from a cached listing)."""
        return int(self._fresh("size", rel, self.fs.size))

    def exists(self, rel: str) -> bool:
        """Whether ``rel`` exists (an object, or for object stores also a non-empty prefix)."""
        return bool(self._fresh("exists", rel, self.fs.exists))

    def missing_root(self) -> str | None:
        """Why this root is missing when its system can say more than "not found" (a Hub repo or
        revision that does not exist), else None."""
        return self.backend.missing_root(self.fs, self.root)

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
        return io.BufferedReader(RangeFile(self, rel, total), buffer_size=1 << 20)

    open = open_input  # the reader's historical name

    # -- writes -----------------------------------------------------------------------------
    def check_writable(self) -> None:
        """Refuse, before any work, a root whose storage system takes no writes of ours.

        Raises:
            StorageError: the system's ``writes_refused`` reason, naming the root.
        """
        reason = self.backend.writes_refused
        if reason is not None:
            raise StorageError(f"{self.url}: not written to ({self.backend.name}): {reason}", url=self.url, operation="write")

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Create or replace ``rel`` with ``data``, atomically (readers see old or new, never half).

        Local: a temp file in the target directory renamed into place (parents created).
        Remote: one PUT (fsspec switches to multipart for large data); retried as a whole.
        """
        self.check_writable()
        path = self.path(rel)
        if self.is_local:
            self._call("write", rel, lambda: atomic_write(Path(path), [data]))
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
        self.check_writable()
        path = self.path(rel)
        size = os.path.getsize(local_path)
        if self.is_local:
            if move and same_device(Path(local_path), Path(path).parent):
                self._call("upload", rel, lambda: atomic_rename(Path(local_path), Path(path)))
                self._count(bytes_written=size)
                return
            self._call("upload", rel, lambda: atomic_copy(Path(local_path), Path(path)))
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
        self.check_writable()
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


__all__ = ["Storage", "StorageCounters"]


def bucket_of(url: str) -> str:
    """The bucket (first path component after the scheme) of an object store URL."""
    return url.split("://", 1)[-1].split("/", 1)[0]
