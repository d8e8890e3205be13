"""Write a one-track mp4 member from compressed samples, without a muxer.

Copy mode cuts an episode out of LeRobot's concatenated per-camera file. Demuxing it packet
by packet and remuxing each packet into a fresh mp4 through FFmpeg cost more than half of a
copy pack (docs/BENCHMARKS.md). The source's sample tables already say where each sample's
bytes lie (``lerobot_shards.core.format.read_track``), so a member is built directly: the source's sample
entry box copied verbatim (codec configuration included), tables for the episode's samples,
and the samples' bytes, read with one read per contiguous run. Decoders see the same
compressed bytes as in the source.

Layout: ``ftyp``, ``moov`` (before the data, as ``movflags=faststart``), ``mdat``; one chunk;
first sample at time 0; no edit list. Pure: numbers and bytes in, bytes out.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

_MATRIX = struct.pack(">9I", 0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x40000000)
_MOVIE_TIMESCALE = 1000


def _box(kind: bytes, *parts: bytes) -> bytes:
    body = b"".join(parts)
    return struct.pack(">I4s", 8 + len(body), kind) + body


def _full_box(kind: bytes, version: int, flags: int, *parts: bytes) -> bytes:
    return _box(kind, struct.pack(">I", (version << 24) | flags), *parts)


def _run_lengths(values: Sequence[int]) -> list[tuple[int, int]]:
    runs: list[list[int]] = []
    for value in values:
        if runs and runs[-1][1] == value:
            runs[-1][0] += 1
        else:
            runs.append([1, value])
    return [(count, value) for count, value in runs]


def write_member(
    *,
    sample_entry: bytes,
    timescale: int,
    durations: Sequence[int],
    sizes: Sequence[int],
    keyframes: Sequence[int],
    width: int,
    height: int,
    data: bytes,
    brand: bytes = b"isom",
) -> bytes:
    """One mp4 holding ``data``, the samples of ``sizes`` back to back, in decode order.

    Args:
        sample_entry: the ``stsd`` entry box (e.g. ``av01`` with its ``av1C``), verbatim.
        timescale: ticks per second of ``durations``.
        durations: each sample's duration in ticks.
        keyframes: 0-based numbers of the sync samples (all samples when every one is).
        width, height: the track's display size.

    Raises:
        ValueError: tables that do not describe ``data`` (a packer bug, not bad input).
    """
    count = len(sizes)
    if len(durations) != count or sum(sizes) != len(data) or not count:
        raise ValueError(f"{count} sizes, {len(durations)} durations and {len(data)} bytes do not describe one another")
    media_duration = sum(durations)
    movie_duration = media_duration * _MOVIE_TIMESCALE // timescale
    stts = _full_box(
        b"stts", 0, 0, struct.pack(">I", len(runs := _run_lengths(durations))), *(struct.pack(">II", n, d) for n, d in runs)
    )
    stss = (
        b""
        if len(keyframes) == count
        else _full_box(b"stss", 0, 0, struct.pack(f">I{len(keyframes)}I", len(keyframes), *(k + 1 for k in keyframes)))
    )
    stsc = _full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, count, 1))
    stsz = _full_box(b"stsz", 0, 0, struct.pack(f">II{count}I", 0, count, *sizes))

    def moov(data_offset: int) -> bytes:
        stco = _full_box(b"stco", 0, 0, struct.pack(">II", 1, data_offset))
        stbl = _box(b"stbl", _full_box(b"stsd", 0, 0, struct.pack(">I", 1), sample_entry), stts, stss, stsc, stsz, stco)
        dinf = _box(b"dinf", _full_box(b"dref", 0, 0, struct.pack(">I", 1), _full_box(b"url ", 0, 1)))
        minf = _box(b"minf", _full_box(b"vmhd", 0, 1, bytes(8)), dinf, stbl)
        mdhd = _full_box(b"mdhd", 0, 0, struct.pack(">IIIIHH", 0, 0, timescale, media_duration, 0x55C4, 0))  # 'und'
        hdlr = _full_box(b"hdlr", 0, 0, struct.pack(">I4s12s", 0, b"vide", bytes(12)), b"VideoHandler\0")
        tkhd = _full_box(
            b"tkhd",
            0,
            3,
            struct.pack(">IIIII", 0, 0, 1, 0, movie_duration),
            bytes(8),
            struct.pack(">hhhH", 0, 0, 0, 0),
            _MATRIX,
            struct.pack(">II", width << 16, height << 16),
        )
        mvhd = _full_box(
            b"mvhd",
            0,
            0,
            struct.pack(">IIIIIH", 0, 0, _MOVIE_TIMESCALE, movie_duration, 0x10000, 0x100),
            bytes(10),
            _MATRIX,
            bytes(24),
            struct.pack(">I", 2),
        )
        return _box(b"moov", mvhd, _box(b"trak", tkhd, _box(b"mdia", mdhd, hdlr, minf)))

    ftyp = _box(b"ftyp", brand, struct.pack(">I", 512), b"isom", b"iso2", b"mp41")
    header = len(ftyp) + len(moov(0)) + 8  # the moov's size does not depend on the offset it holds
    if header + len(data) >= 1 << 32:
        raise ValueError("a member of 4 GiB or more")
    return ftyp + moov(header) + struct.pack(">I4s", 8 + len(data), b"mdat") + data
