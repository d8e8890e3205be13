"""One filesystem client per process, protocol and options, shared by every ``Storage``.

An s3fs client costs ~170 ms and ~13 MB to build (a botocore session, an event loop thread, a
connection pool). A mixture of 3,000 packs in one bucket is 3,000 ``Storage`` roots: with a
client each, every rank and worker would pay 3,000 of them. Roots with the same protocol and
options share one client (and its connection pool, which bounds the sockets a process opens);
each ``Storage`` keeps only its root and counters.

Fork safety: a forked child never uses its parent's clients (s3fs is not fork-safe once its
event loop runs). After a fork the registry starts empty; the inherited clients are kept
referenced, never collected, so their finalizers cannot close sockets the parent still uses.
"""

from __future__ import annotations

import json
import os
import random
import threading
from typing import Any

import fsspec
import fsspec.core
from fsspec.registry import known_implementations

from lerobot_shards.core.errors import ArgumentError, MissingPackageError

_lock = threading.Lock()
_clients: dict[tuple[str, str], Any] = {}
_inherited: list[Any] = []
_created = 0


def _after_fork_in_child() -> None:
    global _lock, _created
    _inherited.extend(_clients.values())
    _clients.clear()
    _lock = threading.Lock()  # the parent's may have been held by a thread that is not here
    _created = 0


os.register_at_fork(after_in_child=_after_fork_in_child)


def _key(protocol: str, options: dict) -> tuple[str, str]:
    # Options are the user's (endpoint, credentials, config) plus ours (timeouts, retries);
    # objects without a JSON form (a botocore Config, a session) key by their repr.
    return protocol, json.dumps(options, sort_keys=True, default=repr)


def shared_filesystem(url: str, options: dict) -> tuple[Any, str]:
    """``(filesystem, root path)`` for ``url``, the filesystem shared by every root of this
    process with the same protocol and ``options`` (chained URLs, ``a::b://``, get their own)."""
    global _created
    if "::" in url:
        return fsspec.core.url_to_fs(url, **options)
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    cls = fsspec.get_filesystem_class(protocol)
    key = _key(protocol, {**options, **cls._get_kwargs_from_urls(url)})
    fs = _clients.get(key)
    if fs is None:
        with _lock:
            fs = _clients.get(key)
            if fs is None:
                fs, root = fsspec.core.url_to_fs(url, **options)
                _clients[key] = fs
                _created += 1
                return fs, root
    return fs, fs._strip_protocol(url)


class ProcessFilesystem:
    """One root's handle on its filesystem in this process: built on first use by ``make``
    (``() -> (filesystem, root path)``), built again in a forked child, with the lock and the
    backoff jitter that belong to the process.

    A parent thread may hold the lock at fork time and does not exist in the child to release
    it: after a fork the inherited lock is never acquired, a new one is made. The inherited
    filesystem is kept referenced, never collected, so s3fs's session finalizer cannot close
    sockets the parent still uses. Forked workers get their own jitter, or they would retry in
    step.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rng = random.Random()
        self._fs: Any = None
        self._root: str | None = None
        self._pid: int | None = None
        self._stale: list[Any] = []

    def get(self, make: Any) -> tuple[Any, str]:
        """``(filesystem, root path)`` of this process, made by ``make()`` when there is none."""
        pid = os.getpid()
        if self._pid is not None and self._pid != pid:
            self.lock = threading.Lock()
        if self._fs is None or self._pid != pid:
            with self.lock:
                if self._fs is None or self._pid != pid:
                    if self._fs is not None:
                        self._stale.append(self._fs)
                    if self._pid != pid:
                        self.rng = random.Random()
                    self._fs, self._root = make()
                    self._pid = pid
        assert self._root is not None
        return self._fs, self._root


def check_protocol(url: str, protocol: str) -> None:
    """That fsspec can open ``protocol`` here, before anything is read or written.

    Raises:
        ArgumentError: an unknown scheme (``nosuchproto://``), naming the schemes that work.
        MissingPackageError: a known storage system whose fsspec package is not installed
            (``gs://`` without ``gcsfs``), naming the ``pip install`` that fixes it.
    """
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ArgumentError(
            f"{url}: unknown storage scheme {protocol}://; give a local path or a URL of a storage system "
            "(s3://, gs://, az://, hf://, or another fsspec knows)"
        ) from None
    except ImportError:
        path = known_implementations.get(protocol, {}).get("class", "")
        package = path.split(".")[0] or protocol
        raise MissingPackageError(
            f"{url}: {protocol}:// needs the {package} package, which is not installed: pip install {package}"
        ) from None


def clients_created() -> int:
    """How many clients this process has built (since start or its fork): the cost a mixture
    of many roots in one bucket should not multiply."""
    return _created


__all__ = ["ProcessFilesystem", "check_protocol", "clients_created", "shared_filesystem"]
