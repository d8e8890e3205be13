"""A source video file's samples by byte range: copy mode's cut without a demuxer.

``SourceSampleReader`` reads a concatenated per-camera file's ``moov`` once (bounded, checked by
``reader.format.read_track``), turns its sample tables into presentation times, and answers
each episode window ``[from_timestamp, to_timestamp)`` with the range of samples in it and
their bytes (one read per contiguous run). The window rule is the demuxer path's
(``SourceVideoReader.window``): samples whose time lies in ``[from - TS_EPS, to - TS_EPS)``.

It takes only files whose timing it reproduces exactly as FFmpeg reads it: samples stored in
presentation order (no ``ctts``) and no edit list, or one edit that starts at media time 0 at
normal rate and covers the track; no empty samples; durations that fit 32-bit headers. ``UnsupportedTiming`` (or a ``FormatError``) sends the
caller to the demuxer path.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from packer.errors import VideoCutError
from packer.source.video import TS_EPS
from reader.errors import FormatError
from reader.format import Mp4Track, read_track
from reader.format.limits import MAX_MOOV_BYTES, MAX_MP4_BOXES


class UnsupportedTiming(Exception):
    """The file's timing is not one the byte-range cut reproduces (use the demuxer)."""


def read_moov(path: Path) -> tuple[bytes, int]:
    """The file's ``moov`` box (header included) and the file's size, reading nothing else.

    Raises:
        FormatError: no ``moov``, one beyond ``MAX_MOOV_BYTES``, or top-level boxes that do not
            tile the file.
        OSError: the file cannot be read.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        position = 0
        for _ in range(MAX_MP4_BOXES):
            if position >= size:
                break
            handle.seek(position)
            header = handle.read(16)
            if len(header) < 8:
                raise FormatError(f"{path}: truncated box header at byte {position}")
            length, kind = struct.unpack(">I4s", header[:8])
            if length == 1 and len(header) == 16:
                length = struct.unpack(">Q", header[8:16])[0]
            elif length == 0:
                length = size - position
            if length < 8 or position + length > size:
                raise FormatError(f"{path}: box {kind!r} of {length} bytes at {position} does not fit the file's {size}")
            if kind == b"moov":
                if length > MAX_MOOV_BYTES:
                    raise FormatError(f"{path}: a moov box of {length:,} bytes; at most {MAX_MOOV_BYTES:,} are read")
                handle.seek(position)
                return handle.read(length), size
            position += length
    raise FormatError(f"{path}: no moov box in its first {MAX_MP4_BOXES} boxes")


class SourceSampleReader:
    """Sample ranges and bytes of episode windows of one concatenated source file.

    Raises:
        UnsupportedTiming: timing this reader does not reproduce (reordered frames, an edit list
            that shifts or cuts the media).
        FormatError: the file's boxes or tables are invalid.
        VideoCutError: the file cannot be read.
    """

    def __init__(self, path: Path):
        self.path = path
        try:
            moov, size = read_moov(path)
        except OSError as err:
            raise VideoCutError(f"{path}: cannot read ({err})") from None
        track = read_track(moov, where=str(path), file_size=size)
        self.track: Mp4Track = track
        self.layout = track.layout
        if track.composition is not None or not self.layout.in_order:
            raise UnsupportedTiming(f"{path}: composition offsets (ctts)")
        if track.timescale <= 0:
            raise UnsupportedTiming(f"{path}: no media timescale")
        if 0 in self.layout.sample_sizes:
            raise UnsupportedTiming(f"{path}: empty samples (the demuxer skips them)")
        if sum(track.durations) * 1000 // track.timescale >= 1 << 32 or sum(track.durations) >= 1 << 32:
            raise UnsupportedTiming(f"{path}: a duration beyond 32-bit mp4 headers")
        media_seconds = sum(track.durations) / track.timescale
        if track.edits and not (
            len(track.edits) == 1 and track.edits[0][1] == 0 and track.edits[0][2] == 1.0 and track.movie_timescale
            and track.edits[0][0] / track.movie_timescale >= media_seconds - TS_EPS
        ):
            raise UnsupportedTiming(f"{path}: edit list {track.edits}")
        ticks, self.seconds = 0, []
        for duration in track.durations:
            self.seconds.append(ticks / track.timescale)
            ticks += duration
        self.keyframes = frozenset(self.layout.keyframes)
        self._fd = os.open(path, os.O_RDONLY)
        self.ended_early = False
        self.last_seconds = 0.0

    def window(self, from_ts: float, to_ts: float) -> range:
        """Samples whose time lies in [from_ts, to_ts) (decode order = presentation order)."""
        first = bisect.bisect_left(self.seconds, from_ts - TS_EPS)
        stop = bisect.bisect_left(self.seconds, to_ts - TS_EPS)
        self.ended_early = stop == len(self.seconds)
        if stop > 0:
            self.last_seconds = max(self.last_seconds, self.seconds[stop - 1])
        return range(first, max(first, stop))

    def read(self, samples: range) -> bytes:
        """The bytes of ``samples``, back to back: one read per run of adjacent samples.

        Raises:
            VideoCutError: the file is shorter than its tables say, or cannot be read.
        """
        offsets, sizes = self.layout.sample_offsets, self.layout.sample_sizes
        parts = []
        run_start = run_end = None
        for j in samples:
            if run_end is not None and offsets[j] == run_end:
                run_end += sizes[j]
                continue
            if run_start is not None:
                parts.append(self._pread(run_start, run_end))
            run_start, run_end = offsets[j], offsets[j] + sizes[j]
        if run_start is not None:
            parts.append(self._pread(run_start, run_end))
        return b"".join(parts)

    def _pread(self, start: int, end: int) -> bytes:
        try:
            data = os.pread(self._fd, end - start, start)
        except OSError as err:
            raise VideoCutError(f"{self.path}: cannot read bytes {start}-{end} ({err})") from None
        if len(data) != end - start:
            raise VideoCutError(f"{self.path}: {len(data)} bytes at {start} where the sample tables promise {end - start}")
        return data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
