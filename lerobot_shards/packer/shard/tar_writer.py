"""Deterministic POSIX tar writing with exact member data offsets."""

from __future__ import annotations

import hashlib
import tarfile
from typing import BinaryIO

BLOCK = 512


class DeterministicTarWriter:
    """Append regular-file members with fixed headers (mtime 0, uid/gid 0, mode 0644).

    ``add`` returns the byte offset of the member's data, so an index can point a ranged
    read straight at it. Names longer than 100 bytes get a pax header (standard tar).
    ``sha256()`` is the archive's digest, computed as it is written (no second read).
    """

    def __init__(self, fileobj: BinaryIO):
        self._file = fileobj
        self._offset = 0
        self._closed = False
        self._digest = hashlib.sha256()

    def add(self, name: str, data: bytes) -> int:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mtime = 0
        info.mode = 0o644
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.type = tarfile.REGTYPE
        fmt = tarfile.USTAR_FORMAT if len(name.encode()) <= 100 else tarfile.PAX_FORMAT
        header = info.tobuf(format=fmt, encoding="utf-8", errors="strict")
        self._write(header)
        data_offset = self._offset
        self._write(data)
        padding = (-len(data)) % BLOCK
        if padding:
            self._write(b"\0" * padding)
        return data_offset

    def close(self) -> int:
        """Write the two zero end-of-archive blocks; returns the archive size."""
        if not self._closed:
            self._write(b"\0" * (2 * BLOCK))
            self._closed = True
        return self._offset

    def sha256(self) -> str:
        """Hex SHA-256 of every byte written so far."""
        return self._digest.hexdigest()

    def _write(self, data: bytes) -> None:
        self._file.write(data)
        self._digest.update(data)
        self._offset += len(data)
