"""File objects over a root's objects: a seekable file whose reads are ``Storage.read_range``
calls (so pyarrow's reads get our retries), and a bounded read of a local file's first bytes."""

from __future__ import annotations

import io
from typing import Any


class RangeFile(io.RawIOBase):
    """Raw file over ``Storage.read_range`` (so pyarrow's reads get our retries)."""

    def __init__(self, storage: Any, rel: str, size: int):
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


def local_prefix(path: str, limit: int) -> bytes:
    """A local file's first ``limit`` bytes, read in chunks: one ``read(limit)`` asks the
    allocator for the whole bound up front (256 MiB for a manifest), which a virtual-memory
    limit (``ulimit -v``, SLURM's ``VSizeFactor``) refuses though the file holds a few KB."""
    chunks: list[bytes] = []
    read = 0
    with open(path, "rb") as handle:
        while read < limit and (chunk := handle.read(min(_LOCAL_CHUNK, limit - read))):
            chunks.append(chunk)
            read += len(chunk)
    return b"".join(chunks)


_LOCAL_CHUNK = 1 << 22


def size_text(size: int) -> str:
    """``268435456`` as ``256 MiB`` (what an operation's description says it read)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):g} {unit}"
    return f"{size} bytes"
