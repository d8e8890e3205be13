"""A local disk cache of fetched bytes with a size cap and LRU eviction.

Several processes (DataLoader workers) may share one directory without a lock:

- an entry is written to a temp file and renamed into place, so a reader sees a whole entry
  or none; each entry carries its length and CRC32, so a damaged file is a miss, not bad data;
- a hit sets the file's mtime to now: mtime is the LRU clock (atime is unreliable under
  ``noatime``/``relatime`` mounts);
- eviction lists the entries, deletes the oldest until the total fits, and tolerates files
  that other processes delete or replace meanwhile.

Each process keeps the directory within ``limit_bytes`` as far as it can see: it scans the
directory when its own writes would exceed the cap since its last scan, and evicts down to
``low_water`` of the cap. Other processes' writes since that scan can exceed the cap briefly
(by at most what they wrote since their own last scan); their next scans restore it.

The cache is an optimisation: a failed write (disk full, permissions) or read is counted and
reported as a miss, never raised.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from lerobot_shards.core.errors import ArgumentError

_MAGIC = b"LSC1"
_HEADER = struct.Struct("<4sIQ")  # magic, crc32 of payload, payload length
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}")
_SUBDIR_NAME = re.compile(r"[0-9a-f]{2}")
_TMP_PREFIX = ".tmp-"
CACHE_SUBDIR = "lerobot-shards-v1"  # everything the cache writes or deletes lives below this
_STALE_TMP_S = 3600.0  # temp files older than this were left by a crashed writer


@dataclass
class DiskCacheStats:
    """This process's view: hits/misses of ``get``, entries written/evicted, problems seen."""

    hits: int = 0
    misses: int = 0
    puts: int = 0
    bytes_written: int = 0
    evicted_entries: int = 0
    evicted_bytes: int = 0
    corrupt_entries: int = 0
    errors: int = 0
    scanned_bytes: int = 0
    """Bytes in the directory at this process's last scan (not a live figure)."""


def range_key(object_url: str, offset: int, size: int, stamp: str = "") -> str:
    """The key for bytes ``[offset, offset + size)`` of ``object_url``.

    ``stamp`` identifies the object's version (the shard's sha256 from the manifest, an ETag,
    ``size:mtime``): a replaced object then misses instead of serving the old bytes.
    """
    return f"{object_url}@{offset}+{size}#{stamp}"


class DiskCache:
    """``get``/``put`` bytes by string key under ``directory``, keeping about ``limit_bytes``.

    Args:
        directory: created if missing. Entries live in ``lerobot-shards-v1/<2 hex>/<64 hex>``
            below it, and only such files are ever deleted: a directory shared with other
            files (even one holding hex-named files) loses nothing.
        limit_bytes: the cap on the entries' total size (headers included).
        low_water: eviction frees space down to this fraction of the cap, so scans are rare.
    """

    def __init__(self, directory: str | os.PathLike, limit_bytes: int, *, low_water: float = 0.9):
        if limit_bytes <= 0:
            raise ArgumentError(f"cache limit must be positive, got {limit_bytes} bytes")
        if not 0 < low_water <= 1:
            raise ArgumentError(f"low_water must be in (0, 1], got {low_water}")
        self.directory = Path(directory) / CACHE_SUBDIR
        self.directory.mkdir(parents=True, exist_ok=True)
        self.limit_bytes = int(limit_bytes)
        self.low_water = low_water
        self._stats = DiskCacheStats()
        self._estimate: int | None = None  # directory total as of our last scan + our writes since

    @property
    def hits(self) -> int:
        return self._stats.hits

    @property
    def misses(self) -> int:
        return self._stats.misses

    def _path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self.directory / digest[:2] / digest

    def get(self, key: str) -> bytes | None:
        """The bytes stored under ``key``, or None (missing, evicted, damaged or unreadable)."""
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                header = handle.read(_HEADER.size)
                data = handle.read()
        except FileNotFoundError:
            self._stats.misses += 1
            return None
        except OSError:
            self._stats.errors += 1
            self._stats.misses += 1
            return None
        if not _is_whole(header, data):
            self._stats.corrupt_entries += 1
            self._stats.misses += 1
            _unlink(path)
            return None
        try:
            os.utime(path)  # the LRU clock
        except OSError:
            pass  # evicted or replaced since we read it: the bytes we have are still whole
        self._stats.hits += 1
        return data

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key`` (replacing any entry), evicting old entries as needed.

        An entry larger than the whole cap is not stored (it would evict everything).
        """
        size = _HEADER.size + len(data)
        if size > self.limit_bytes:
            return
        if self._estimate is None or self._estimate + size > self.limit_bytes:
            self.evict(target_bytes=max(0, int(self.limit_bytes * self.low_water) - size))
        path = self._path(key)
        tmp = None
        try:
            path.parent.mkdir(exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP_PREFIX)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_HEADER.pack(_MAGIC, zlib.crc32(data), len(data)))
                handle.write(data)
            os.replace(tmp, path)
        except OSError:
            self._stats.errors += 1
            if tmp is not None:
                _unlink(Path(tmp))
            return
        self._stats.puts += 1
        self._stats.bytes_written += size
        self._estimate = (self._estimate or 0) + size

    def evict(self, *, target_bytes: int | None = None) -> int:
        """Delete least recently used entries until the total is at most ``target_bytes``
        (default: the cap); also removes temp files left by crashed writers. Returns bytes freed."""
        target = self.limit_bytes if target_bytes is None else target_bytes
        entries = []
        now = time.time()
        for path, stat in self._scan():
            if path.name.startswith(_TMP_PREFIX):
                if now - stat.st_mtime > _STALE_TMP_S:
                    _unlink(path)
                continue
            entries.append((stat.st_mtime_ns, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        freed = 0
        for _, size, path in sorted(entries, key=lambda entry: entry[0]):
            if total - freed <= target:
                break
            if _unlink(path):
                self._stats.evicted_entries += 1
                self._stats.evicted_bytes += size
            freed += size  # gone either way: if another process deleted it, it freed the space
        self._estimate = total - freed
        self._stats.scanned_bytes = total
        return freed

    def size_bytes(self) -> int:
        """Total bytes of the entries now in the directory (a full scan)."""
        return sum(stat.st_size for path, stat in self._scan() if not path.name.startswith(_TMP_PREFIX))

    def stats(self) -> DiskCacheStats:
        """A copy of this process's counters."""
        return DiskCacheStats(**vars(self._stats))

    def _scan(self):
        """(path, stat) of each entry and temp file; skips anything we did not write."""
        try:
            subdirs = list(os.scandir(self.directory))
        except FileNotFoundError:
            return
        for subdir in subdirs:
            if not (_SUBDIR_NAME.fullmatch(subdir.name) and subdir.is_dir(follow_symlinks=False)):
                continue
            try:
                files = list(os.scandir(subdir.path))
            except FileNotFoundError:
                continue
            for entry in files:
                if not (_ENTRY_NAME.fullmatch(entry.name) or entry.name.startswith(_TMP_PREFIX)):
                    continue
                try:
                    stat = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield Path(entry.path), stat


def _is_whole(header: bytes, data: bytes) -> bool:
    if len(header) != _HEADER.size:
        return False
    magic, crc, length = _HEADER.unpack(header)
    return magic == _MAGIC and length == len(data) and zlib.crc32(data) == crc


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:  # already gone (another process evicted it), or not ours to delete
        return False


__all__ = ["DiskCache", "DiskCacheStats", "range_key"]
