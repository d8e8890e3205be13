"""Change exercise: a storage system whose failures are not S3's, as its one file.

``BusyFileSystem`` stands in for a third-party fsspec filesystem (adlfs, gcsfs): an in-memory
object store whose client raises its own exception classes, which none of the common rules
know (``ServiceBusy`` is not an ``OSError``, a ``ConnectionError`` or an aiohttp class;
``NotSignedIn`` is not a ``PermissionError``). Each operation on an object fails once, busy,
before it succeeds, so every request of a pack or a read needs our retry loop.

``BusyBackend`` is the file a contributor writes (it would live beside
``lerobot_shards/core/storage/backends/s3.py``): which of its client's errors are transient,
which say "no credentials", and the fix. Its row, ``BACKENDS["busy"] = BUSY``, is added by the
test (``tests/contracts/test_change_exercises.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from fsspec.implementations.memory import MemoryFileSystem

from lerobot_shards.core.storage import StorageBackend


class ServiceBusy(Exception):
    """The service asks the client to come back later (its own class, as azure-core's are)."""


class NotSignedIn(Exception):
    """The client holds no credentials."""


class BusyFileSystem(MemoryFileSystem):
    """An object store (``busy://``) that answers each operation on a path busy once."""

    protocol = ("busy",)
    store: ClassVar[dict] = {}  # its own objects, not memory://'s
    pseudo_dirs: ClassVar[list] = [""]
    _failed: ClassVar[set] = set()
    _lock = threading.Lock()
    busy_answers = 0

    def __init__(self, *args: Any, signed_in: bool = True, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.signed_in = signed_in

    def _busy_once(self, operation: str, path: str) -> None:
        if not self.signed_in:
            raise NotSignedIn("no credentials were found for busy://")
        with self._lock:
            first = (operation, path) not in self._failed
            self._failed.add((operation, path))
            if first:
                type(self).busy_answers += 1
        if first:
            raise ServiceBusy(f"{operation} {path}: the service is busy, come back later")

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        self._busy_once(f"cat {start}-{end}", self._strip_protocol(path))
        return super().cat_file(path, start=start, end=end, **kwargs)

    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> None:
        self._busy_once("pipe", self._strip_protocol(path))
        super().pipe_file(path, value, **kwargs)

    def put_file(self, lpath: str, rpath: str, **kwargs: Any) -> None:
        self._busy_once("put", self._strip_protocol(rpath))
        super().put_file(lpath, rpath, **kwargs)

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list:
        self._busy_once("ls", self._strip_protocol(path))
        return super().ls(path, detail=detail, **kwargs)


@dataclass(frozen=True)
class BusyBackend(StorageBackend):
    """What our storage layer knows of ``busy://``: its busy answers are worth another attempt,
    and a client that is not signed in needs ``busy login``."""

    def transient(self, error: BaseException) -> bool | None:
        return True if type(error).__name__ == "ServiceBusy" else None

    def no_credentials(self, error: BaseException) -> bool:
        return type(error).__name__ == "NotSignedIn"

    def hint(self, error: BaseException, url: str, storage_options: Mapping[str, Any] | None = None) -> str:
        return (
            "; no credentials: run `busy login`, or pass storage_options={'signed_in': True}"
            if self.lacks_credentials(error)
            else ""
        )


BUSY = BusyBackend("the busy store")
