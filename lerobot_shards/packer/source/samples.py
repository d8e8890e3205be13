"""A source video file's samples by byte range: copy mode's cut without a demuxer.

``SourceSampleReader`` reads a concatenated per-camera file's ``moov`` once (bounded, checked by
``lerobot_shards.core.format.read_track``), turns its sample tables into presentation times, and answers
each episode window ``[from_timestamp, to_timestamp)`` with the range of samples in it and
their bytes (one read per contiguous run). The window rule is the demuxer path's
(``SourceVideoReader.window``): samples whose time lies in ``[from - TS_EPS, to - TS_EPS)``.

It takes only files whose timing it reproduces exactly as FFmpeg reads it: samples stored in
presentation order (no ``ctts``) and no edit list, or one edit that starts at media time 0 at
normal rate and covers the track; no empty samples; durations that fit 32-bit headers. ``UnsupportedTiming`` (or a ``FormatError``) sends the
caller to the demuxer path.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import Mp4Track, read_track, trivial_edits
from lerobot_shards.core.format.limits import MAX_MOOV_BYTES, MAX_MP4_BOXES
from lerobot_shards.packer.errors import VideoCutError
from lerobot_shards.packer.source.video import TS_EPS


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

    def __init__(self, path: Path, *, max_samples: int | None = None, max_sample_bytes: int | None = None):
        self.path = path
        try:
            moov, size = read_moov(path)
        except OSError as err:
            raise VideoCutError(f"{path}: cannot read ({err})") from None
        # Bounded before any per-sample table exists: the samples the file's episodes can use,
        # and a generous multiple of a raw frame per sample (a sparse file's apparent size is
        # no bound).
        track = read_track(moov, where=str(path), file_size=size, max_samples=max_samples, max_sample_bytes=max_sample_bytes)
        self.track: Mp4Track = track
        self.layout = track.layout
        if track.composition is not None or not self.layout.in_order:
            raise UnsupportedTiming(f"{path}: composition offsets (ctts) or an edit list that shifts the media")
        if track.timescale <= 0:
            raise UnsupportedTiming(f"{path}: no media timescale")
        if bool((self.layout.sample_sizes == 0).any()):
            raise UnsupportedTiming(f"{path}: empty samples (the demuxer skips them)")
        media_ticks = int(track.durations.sum())
        if media_ticks * 1000 // track.timescale >= 1 << 32 or media_ticks >= 1 << 32:
            raise UnsupportedTiming(f"{path}: a duration beyond 32-bit mp4 headers")
        if not trivial_edits(
            track.edits, media_ticks=media_ticks, timescale=track.timescale, movie_timescale=track.movie_timescale
        ):
            raise UnsupportedTiming(f"{path}: edit list {track.edits}")
        self.seconds = (np.cumsum(track.durations) - track.durations) / track.timescale
        self.keyframes = self.layout.keyframes  # ascending sample numbers
        self._fd = os.open(path, os.O_RDONLY)
        self.ended_early = False
        self.last_seconds = 0.0

    def is_keyframe(self, sample: int) -> bool:
        """Whether ``sample`` is a sync sample."""
        at = int(np.searchsorted(self.keyframes, sample))
        return at < len(self.keyframes) and int(self.keyframes[at]) == sample

    def keyframe_at_or_before(self, sample: int) -> int | None:
        """The last sync sample at or before ``sample``, or None when there is none."""
        at = int(np.searchsorted(self.keyframes, sample, side="right")) - 1
        return int(self.keyframes[at]) if at >= 0 else None

    def keyframes_in(self, samples: range) -> list[int]:
        """The sync samples in ``samples``, ascending."""
        lo, hi = np.searchsorted(self.keyframes, [samples.start, samples.stop])
        return self.keyframes[lo:hi].tolist()

    def window(self, from_ts: float, to_ts: float) -> range:
        """Samples whose time lies in [from_ts, to_ts) (decode order = presentation order)."""
        first, stop = (int(i) for i in np.searchsorted(self.seconds, [from_ts - TS_EPS, to_ts - TS_EPS], side="left"))
        self.ended_early = stop == len(self.seconds)
        if stop > 0:
            self.last_seconds = max(self.last_seconds, float(self.seconds[stop - 1]))
        return range(first, max(first, stop))

    def read(self, samples: range) -> bytes:
        """The bytes of ``samples``, back to back: one read per run of adjacent samples.

        Raises:
            VideoCutError: the file is shorter than its tables say, or cannot be read.
        """
        offsets, sizes = (
            self.layout.sample_offsets[samples.start : samples.stop].tolist(),
            self.layout.sample_sizes[samples.start : samples.stop].tolist(),
        )
        runs: list[list[int]] = []  # [start, end) of adjacent samples
        for offset, size in zip(offsets, sizes):
            if runs and offset == runs[-1][1]:
                runs[-1][1] += size
            else:
                runs.append([offset, offset + size])
        return b"".join(self._pread(start, end) for start, end in runs)

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
