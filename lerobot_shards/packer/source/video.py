"""Reading a LeRobot source's concatenated per-camera mp4 files: probing, demuxing, decoding.

Source files are read in one pass per file: a shard packs a camera's episodes in file order,
so ``SourceVideoReader`` (packets, for copy mode) and ``SourceFrameDecoder`` (frames, for
re-encodes) continue from where the previous episode ended instead of re-opening and seeking.
Both yield what lies in an episode's window ``[from_timestamp, to_timestamp)``; making members
of it is ``lerobot_shards.packer.shard.members``'s job.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
from av.container import InputContainer
from av.error import FFmpegError
from av.video.stream import VideoStream

from lerobot_shards.core.address_space import limit_error
from lerobot_shards.packer.errors import SourceError, VideoCutError

# Half a frame at 1000 fps: smaller than any frame period, larger than timestamp rounding.
TS_EPS = 5e-4


@dataclass(frozen=True)
class VideoLocation:
    """Where one episode's frames live in LeRobot's concatenated per-camera mp4."""

    path: Path
    from_timestamp: float
    to_timestamp: float


def stream_time_base(stream: VideoStream, path: Path | str) -> Fraction:
    """The stream's time base: seconds per pts tick.

    Raises:
        VideoCutError: the file's stream declares none (its timestamps cannot be read as time).
    """
    if not stream.time_base:
        raise VideoCutError(f"{path}: the video stream declares no time base")
    return stream.time_base


def _seek_target(seconds: float, time_base: Fraction) -> int:
    start = Fraction(seconds).limit_denominator(1_000_000)
    return max(int(math.floor(float(start / time_base))), 0) if time_base else 0


def seek_keyframe(container, stream, seconds: float) -> None:
    """Seek ``stream`` to the keyframe at or before ``seconds`` (the file's start if the
    container cannot seek there).

    Raises:
        VideoCutError: the container can seek neither there nor to its start.
    """
    try:
        container.seek(
            _seek_target(seconds, stream_time_base(stream, container.name)), stream=stream, backward=True, any_frame=False
        )
    except FFmpegError:
        try:
            container.seek(0, stream=stream)
        except FFmpegError as err:  # a file FFmpeg cannot seek at all (damaged or hostile tables)
            raise VideoCutError(f"{container.name}: cannot seek to {seconds:.4f} s or to the start ({err})") from None


def _reraise_limit(err: BaseException, where: str) -> None:
    """Raise a limit of this process (``core.address_space.limit_error``: FFmpeg could not start
    its threads or allocate under ``ulimit -v``/``-u``) instead of calling the video corrupt."""
    limited = limit_error(err, where)
    if limited is not None:
        raise limited from err


def open_video(path: Path) -> tuple[InputContainer, VideoStream]:
    """``(container, first video stream)`` of ``path``.

    Raises:
        VideoCutError: the file does not open or holds no video stream.
    """
    try:
        container = av.open(str(path), mode="r")
    except Exception as err:
        _reraise_limit(err, f"{path}: opening")
        raise VideoCutError(f"{path}: cannot open video ({err})") from None
    if not container.streams.video:
        container.close()
        raise VideoCutError(f"{path}: no video stream")
    return container, container.streams.video[0]


@dataclass(frozen=True)
class StreamProbe:
    """What a video file's first stream says of itself, from its codec configuration (nothing
    decoded): ``codec`` as the format names members' codecs (``av1``, ``hevc``, ``h264``) where
    it is one of them, else FFmpeg's name (``mpeg4``, ``vp9``, ...); ``pix_fmt`` or None."""

    codec: str
    pix_fmt: str | None


# FFmpeg's codec ids (the decoder may be another: libdav1d decodes av1) to the format's names.
_FORMAT_CODECS = {"av1": "av1", "hevc": "hevc", "h264": "h264"}


def probe_stream(path: Path) -> StreamProbe:
    """The codec and pixel format of ``path``'s first video stream (one open, no decode).

    Raises:
        VideoCutError: the file does not open or holds no video stream.
    """
    container, stream = open_video(path)
    try:
        name = _codec_id_name(stream)
        return StreamProbe(_FORMAT_CODECS.get(name, name), stream.codec_context.pix_fmt)
    finally:
        container.close()


def _codec_id_name(stream: VideoStream) -> str:
    """FFmpeg's name of the stream's codec id (``av1`` whichever decoder PyAV picked: its
    decoder's name may be ``libdav1d``)."""
    tag = str(getattr(stream, "codec_tag", "") or "")
    by_tag = {"av01": "av1", "hvc1": "hevc", "hev1": "hevc", "avc1": "h264", "avc3": "h264", "mp4v": "mpeg4", "vp09": "vp9"}
    if tag in by_tag:
        return by_tag[tag]
    name = stream.codec_context.name or "unknown"
    return {"libdav1d": "av1", "libaom-av1": "av1", "av1_cuvid": "av1"}.get(name, name)


class SourceVideoReader:
    """Packets of consecutive episode windows of one concatenated file, in one demux pass.

    A window that does not start where the previous one ended re-seeks (to the keyframe at
    or before its start). After each ``window`` call, ``ended_early`` tells whether the
    file ended before the window's end (a truncated or short video), and
    ``decode_contiguous`` whether the window's packets are one unbroken run of the file's
    decode order (with B-frames, a packet of another window between them means the window
    cannot be cut out on its own). ``preroll`` holds the packets from the keyframe before the
    window to its first packet when that one is no keyframe and they run on without a gap in
    decode order (what a cut from that keyframe needs), else nothing.
    """

    def __init__(self, path: Path):
        self.path = path
        self.container, self.stream = open_video(path)
        self._packets: Iterator[av.Packet] | None = None
        # Demuxed packets not in the last window, with their decode position: with B-frames a
        # later window's packet (a reference frame) comes before this window's last ones.
        self._pending: list[tuple[int, av.Packet]] = []
        self._sequence = 0
        self._position = float("inf")  # seconds of the next unread packet; inf = must seek
        self.ended_early = False
        self.decode_contiguous = True
        self.last_seconds = 0.0  # pts (s) of the last packet demuxed
        # Packets taken since the last keyframe, in the order demuxed (decode order): the pre-roll
        # of a window that starts after it.
        self._run: list[tuple[int, av.Packet]] = []
        self.preroll: list[av.Packet] = []

    def _seek(self, seconds: float) -> None:
        seek_keyframe(self.container, self.stream, seconds)
        self._packets = self.container.demux(self.stream)
        self._pending = []
        self._run = []

    def _taken(self, item: tuple[int, av.Packet]) -> None:
        if item[1].is_keyframe:
            self._run = []
        self._run.append(item)

    def _next(self) -> tuple[int, av.Packet] | None:
        """The next packet with data and a timestamp, numbered in decode order."""
        if self._packets is None:
            return None
        for packet in self._packets:
            if packet.pts is not None and packet.size:
                self._sequence += 1
                return self._sequence, packet
        return None

    def window(self, from_ts: float, to_ts: float) -> list[av.Packet]:
        """Packets whose pts lie in [from_ts, to_ts), in pts order.

        Demuxing stops at the first packet whose *decode* time reaches ``to_ts`` (no later
        packet can be presented before it); packets met on the way that belong after the
        window wait for the next one.

        Raises:
            VideoCutError: the file is corrupt where it is demuxed.
        """
        if self._packets is None or abs(from_ts - self._position) > TS_EPS:
            self._seek(from_ts)
        seconds_per_tick = float(
            stream_time_base(self.stream, self.path)
        )  # float math: Fractions per packet cost a fifth of a cut
        found: list[tuple[int, av.Packet]] = []
        later: list[tuple[int, av.Packet]] = []
        queued, self._pending = self._pending, []
        self.ended_early = False
        before: list[tuple[int, av.Packet]] | None = None  # the run as the window's first packet came
        try:
            while True:
                item = queued.pop(0) if queued else self._next()
                if item is None:
                    self.ended_early = True
                    self._packets = None
                    break
                packet = item[1]
                pts = packet.pts or 0  # _next keeps only packets with a pts
                seconds = pts * seconds_per_tick
                self.last_seconds = max(self.last_seconds, seconds)
                if seconds >= to_ts - TS_EPS:
                    later.append(item)  # a later window's packet
                    decode_seconds = (packet.dts if packet.dts is not None else pts) * seconds_per_tick
                    if decode_seconds >= to_ts - TS_EPS:
                        break  # decode order has passed the window: nothing later is presented in it
                elif seconds >= from_ts - TS_EPS:
                    if before is None:
                        before = list(self._run)
                    found.append(item)
                    self._taken(item)
                else:
                    self._taken(item)  # before the window: part of the run to the next keyframe
        except FFmpegError as err:
            self._packets = None
            _reraise_limit(err, f"{self.path}: demuxing")
            raise VideoCutError(f"{self.path}: corrupt video while demuxing ({err})") from None
        self._pending = later + queued
        self._position = to_ts
        positions = [sequence for sequence, _ in found]
        # Any packet of the file between the window's first and last in decode order (a
        # neighbour's frame, or one before the window) breaks the run.
        self.decode_contiguous = not found or positions[-1] - positions[0] + 1 == len(found)
        self.preroll = []
        if found and not found[0][1].is_keyframe and before and before[0][1].is_keyframe:
            run = [sequence for sequence, _ in before] + positions
            if run == list(range(run[0], run[0] + len(run))):
                self.preroll = [packet for _, packet in before]
        return sorted((packet for _, packet in found), key=lambda p: p.pts or 0)  # _next kept only packets with a pts

    def close(self) -> None:
        self.container.close()


class SourceFrameDecoder:
    """Decoded frames of consecutive episode windows of one concatenated file, in one pass.

    Decoding a window that does not continue the previous one starts at the keyframe at or
    before its start (never at the start of the file: a 200 MB file holds hundreds of
    episodes). ``window`` is a generator and must be consumed to its end; then
    ``window_bytes`` holds the compressed bytes of the window's packets and ``ended_early``
    whether the file ended before the window did.
    """

    def __init__(self, path: Path):
        self.path = path
        self.container, self.stream = open_video(path)
        self.stream.thread_type = "AUTO"
        self._frames: Iterator[av.VideoFrame] | None = None
        self._pending: av.VideoFrame | None = None
        self._packet_sizes: list[tuple[float, int]] = []  # (pts seconds, bytes) demuxed, not yet attributed
        self._position = float("inf")
        self.window_bytes = 0
        self.ended_early = False
        self.last_seconds = 0.0

    def _decoded(self) -> Iterator[av.VideoFrame]:
        seconds_per_tick = float(stream_time_base(self.stream, self.path))
        for packet in self.container.demux(self.stream):
            if packet.size and packet.pts is not None:
                seconds = packet.pts * seconds_per_tick
                self.last_seconds = max(self.last_seconds, seconds)
                self._packet_sizes.append((seconds, packet.size))
            yield from packet.decode()  # the final empty packet flushes the decoder

    def _seek(self, seconds: float) -> None:
        seek_keyframe(self.container, self.stream, seconds)
        self._frames = self._decoded()
        self._pending = None
        self._packet_sizes.clear()

    def window(self, from_ts: float, to_ts: float) -> Iterator[av.VideoFrame]:
        """Yield the frames whose pts lie in [from_ts, to_ts), in presentation order.

        Raises:
            VideoCutError: the file is corrupt where it is decoded.
        """
        if self._frames is None or abs(from_ts - self._position) > TS_EPS:
            self._seek(from_ts)
        seconds_per_tick = float(stream_time_base(self.stream, self.path))
        self.ended_early = False
        finished = False
        try:
            while True:
                frame = (
                    self._pending if self._pending is not None else next(self._frames, None) if self._frames is not None else None
                )
                self._pending = None
                if frame is None:
                    self.ended_early = True
                    break
                if frame.pts is None:
                    continue
                seconds = frame.pts * seconds_per_tick
                if seconds >= to_ts - TS_EPS:
                    self._pending = frame
                    break
                if seconds >= from_ts - TS_EPS:
                    yield frame
            finished = True
        except FFmpegError as err:
            _reraise_limit(err, f"{self.path}: decoding")
            raise VideoCutError(f"{self.path}: corrupt video while decoding ({err})") from None
        finally:
            if finished and not self.ended_early:
                self._position = to_ts
            else:  # abandoned, failed or at the end of the file: the next window seeks
                self._frames, self._position = None, float("inf")
            inside = [(s, n) for s, n in self._packet_sizes if from_ts - TS_EPS <= s < to_ts - TS_EPS]
            self.window_bytes = sum(n for _, n in inside)
            self._packet_sizes = [(s, n) for s, n in self._packet_sizes if s >= to_ts - TS_EPS]

    def close(self) -> None:
        self.container.close()


# Probes keyed by (path, size, mtime), so an edited file is probed again.
_DURATION_CACHE: dict[tuple, float] = {}


def video_duration_s(path: Path) -> float:
    """The duration in seconds of a file's first video stream (cached per file version).

    Raises:
        SourceError: the file does not open as a video.
    """
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DURATION_CACHE:
        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                if stream.duration is not None and stream.time_base:
                    _DURATION_CACHE[key] = float(stream.duration * stream.time_base)
                else:
                    _DURATION_CACHE[key] = float((container.duration or 0) / av.time_base)
        except Exception as err:  # PyAV raises several types for foreign or truncated files
            _reraise_limit(err, f"{path}: opening")
            raise SourceError(f"{path}: cannot open video ({err})") from None
    return _DURATION_CACHE[key]
