"""Editing mp4 files box by box, for hostile-input tests: find a box by its path, insert a box
into a container, replace one, with every enclosing box's size fixed up.

When ``moov`` comes before the samples, growing it moves them: the track's ``stco`` offsets
are shifted to match (one track, 32-bit offsets: what the test files hold).
"""

from __future__ import annotations

import struct

# Where a container's children start, after its header: a full box's version and flags, a
# sample description's entry count, a visual sample entry's fixed fields.
_CHILDREN_AT = {b"stsd": 8, b"meta": 4, b"dref": 8}
_VISUAL = {b"avc1", b"avc3", b"hvc1", b"hev1", b"av01", b"vp09", b"mp4v"}


def box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def full_box(kind: bytes, version: int, flags: int, payload: bytes) -> bytes:
    return box(kind, struct.pack(">I", (version << 24) | flags) + payload)


def _children_at(kind: bytes) -> int:
    return 78 if kind in _VISUAL else _CHILDREN_AT.get(kind, 0)


def _boxes(data: bytes, start: int, end: int):
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack(">I4s", data[pos : pos + 8])
        header = 8
        if size == 1:
            size, header = struct.unpack(">Q", data[pos + 8 : pos + 16])[0], 16
        elif size == 0:
            size = end - pos
        yield pos, size, header, kind
        pos += size


def locate(data: bytes, path: list[bytes]) -> list[tuple[int, int, int, bytes]]:
    """``(start, size, header, kind)`` of each box along ``path`` (the first match at each level)."""
    found, start, end = [], 0, len(data)
    for index, kind in enumerate(path):
        for pos, size, header, name in _boxes(data, start, end):
            if name == kind:
                found.append((pos, size, header, name))
                start, end = pos + header + _children_at(name), pos + size
                break
        else:
            raise KeyError(f"no {kind!r} at {b'/'.join(path[:index]).decode()}")
    return found


def get(data: bytes, path: list[bytes]) -> bytes:
    """The whole box (header included) at ``path``."""
    pos, size, _, _ = locate(data, path)[-1]
    return data[pos : pos + size]


def _grow(data: bytearray, chain, delta: int) -> None:
    for pos, size, header, _ in chain:
        if header == 16:
            data[pos + 8 : pos + 16] = struct.pack(">Q", size + delta)
        else:
            data[pos : pos + 4] = struct.pack(">I", size + delta)


_STCO = [b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stco"]


def _shift_chunks(data: bytearray, moov_at: int, delta: int) -> None:
    """Samples stored after ``moov`` moved by ``delta`` bytes: shift the chunk offsets past it."""
    if not delta or not any(kind == b"mdat" and pos > moov_at for pos, _, _, kind in _boxes(bytes(data), 0, len(data))):
        return
    pos, _, header, _ = locate(bytes(data), _STCO)[-1]
    count = struct.unpack(">I", data[pos + header + 4 : pos + header + 8])[0]
    for i in range(count):
        at = pos + header + 8 + 4 * i
        offset = struct.unpack(">I", data[at : at + 4])[0]
        if offset > moov_at:
            data[at : at + 4] = struct.pack(">I", offset + delta)


def insert(data: bytes, path: list[bytes], new: bytes) -> bytes:
    """``new`` appended as the last child of the container at ``path``."""
    chain = locate(data, path)
    pos, size, _, _ = chain[-1]
    out = bytearray(data[: pos + size] + new + data[pos + size :])
    _grow(out, chain, len(new))
    _shift_chunks(out, chain[0][0], len(new))
    return bytes(out)


def replace(data: bytes, path: list[bytes], new: bytes) -> bytes:
    """The box at ``path`` replaced by ``new``."""
    chain = locate(data, path)
    pos, size, _, _ = chain[-1]
    out = bytearray(data[:pos] + new + data[pos + size :])
    _grow(out, chain[:-1], len(new) - size)
    _shift_chunks(out, chain[0][0], len(new) - size)
    return bytes(out)
