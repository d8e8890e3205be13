"""A local disk cache of fetched episode bytes with a size cap and LRU eviction.

Safe for several processes (DataLoader workers) sharing one directory without a lock:
entries are written to a temp file and renamed into place, a hit touches the file's mtime
(the LRU clock), and eviction tolerates files that vanish under it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class DiskCache:
    """``get``/``put`` bytes by key under ``directory``, keeping at most ``limit_bytes``."""

    def __init__(self, directory: str | Path, limit_bytes: int):
        if limit_bytes <= 0:
            raise ValueError(f"cache limit must be positive, got {limit_bytes} bytes")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.limit_bytes = int(limit_bytes)
        self.hits = 0
        self.misses = 0
        self._written_since_scan = 0

    def _path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return self.directory / digest[:2] / digest

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            data = path.read_bytes()
            os.utime(path)
        except FileNotFoundError:
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self.limit_bytes:
            return  # never evict everything for one oversized entry
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
        self._written_since_scan += len(data)
        if self._written_since_scan > self.limit_bytes // 8:
            self.evict()

    def evict(self) -> int:
        """Delete least recently used entries until the cache fits; returns bytes freed."""
        self._written_since_scan = 0
        entries = []
        for path in self.directory.glob("*/*"):
            if path.name.startswith(".tmp-"):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in entries)
        freed = 0
        for _, size, path in sorted(entries):
            if total - freed <= self.limit_bytes:
                break
            try:
                path.unlink()
                freed += size
            except FileNotFoundError:
                pass
        return freed

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.glob("*/*") if p.is_file())
