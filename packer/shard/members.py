"""Per-episode mp4 members: cut by stream copy, or re-encoded for NVDEC.

Both produce a self-contained mp4 in memory whose first frame has pts 0 and whose frame
``j`` is the frame LeRobot decodes for the episode's row ``j``: the frame whose pts is
``from_timestamp + j / fps`` in LeRobot's concatenated per-camera file.

Source files are read in one pass per file: a shard packs a camera's episodes in file order,
so ``SourceVideoReader`` (packets, for copy mode) and ``SourceFrameDecoder`` (frames, for
re-encodes) continue from where the previous episode ended instead of re-opening and seeking.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

import av

from packer.source.lerobot import VideoLocation
from reader.errors import LeRobotShardsError

# Half a frame at 1000 fps: smaller than any frame period, larger than timestamp rounding.
_TS_EPS = 5e-4


class VideoCutError(LeRobotShardsError, ValueError):
    """A source video cannot be cut or decoded for an episode."""


@dataclass(frozen=True)
class EncodeSettings:
    """Re-encode settings: codec ``hevc`` or ``h264``, GOP, CRF, preset, optional resize."""

    codec: str
    gop: int = 2
    crf: int | None = None
    preset: str | None = None
    resize: tuple[int, int] | None = None  # (height, width)

    def encoder_name(self) -> str:
        return {"hevc": "libx265", "h264": "libx264"}[self.codec]

    def options(self, width: int) -> dict[str, str]:
        """Encoder options for frames ``width`` pixels wide (after any resize).

        Raises:
            VideoCutError: hevc frames at most 16 pixels wide (see below); use h264.
        """
        crf = str(self.crf if self.crf is not None else (23 if self.codec == "hevc" else 20))
        preset = self.preset or ("fast" if self.codec == "hevc" else "veryfast")
        if self.codec == "hevc":
            # Closed GOP and no B-frames: x265's default open GOP makes fast seeks return wrong frames.
            # The CTU size keeps every picture at least two CTUs wide: with a single CTU column
            # x265 leaves the right padding corners of reference frames uninitialized and motion
            # search reads them (seen under valgrind), so output bytes depended on heap contents
            # and the decoder's reconstruction checksum failed. 16 is x265's smallest CTU.
            if width <= 16:
                raise VideoCutError(
                    f"hevc cannot encode {width}-pixel-wide frames reproducibly (x265 needs at least two 16-pixel "
                    "CTUs per row); use --video h264 or --resize to a wider size"
                )
            ctu = 64 if width > 64 else 32 if width > 32 else 16
            params = f"keyint={self.gop}:min-keyint={self.gop}:scenecut=0:bframes=0:open-gop=0:ctu={ctu}:log-level=error"
            return {"crf": crf, "preset": preset, "x265-params": params}
        return {
            "crf": crf,
            "preset": preset,
            "bf": "0",
            "g": str(self.gop),
            "keyint_min": str(self.gop),
            "sc_threshold": "0",
            "flags": "+cgop",
        }


@dataclass(frozen=True)
class EpisodeVideo:
    """An episode's mp4 member bytes and what they hold.

    Attributes:
        data: the self-contained mp4.
        frames: frames in ``data`` (at most the ``max_frames`` asked for).
        found: frames the source window held (may exceed ``frames`` when trimmed).
        codec: ``av1``, ``hevc`` or ``h264``.
        reencoded: the member was encoded here rather than cut by stream copy.
        source_bytes: compressed bytes of the source window's packets.
    """

    data: bytes
    frames: int
    found: int
    codec: str
    reencoded: bool
    height: int
    width: int
    source_bytes: int


def _seek_target(seconds: float, time_base: Fraction) -> int:
    start = Fraction(seconds).limit_denominator(1_000_000)
    return max(int(math.floor(float(start / time_base))), 0) if time_base else 0


def _open_video(path: Path):
    """``(container, first video stream)`` of ``path``.

    Raises:
        VideoCutError: the file does not open or holds no video stream.
    """
    try:
        container = av.open(str(path))
    except Exception as err:
        raise VideoCutError(f"{path}: cannot open video ({err})") from None
    if not container.streams.video:
        container.close()
        raise VideoCutError(f"{path}: no video stream")
    return container, container.streams.video[0]


class SourceVideoReader:
    """Packets of consecutive episode windows of one concatenated file, in one demux pass.

    A window that does not start where the previous one ended re-seeks (to the keyframe at
    or before its start). After each ``window`` call, ``ended_early`` tells whether the
    file ended before the window's end (a truncated or short video).
    """

    def __init__(self, path: Path):
        self.path = path
        self.container, self.stream = _open_video(path)
        self._packets = None
        self._pending = None
        self._position = float("inf")  # seconds of the next unread packet; inf = must seek
        self.ended_early = False
        self.last_seconds = 0.0  # pts (s) of the last packet demuxed

    def _seek(self, seconds: float) -> None:
        try:
            self.container.seek(_seek_target(seconds, self.stream.time_base), stream=self.stream, backward=True, any_frame=False)
        except av.error.FFmpegError:
            self.container.seek(0, stream=self.stream)
        self._packets = self.container.demux(self.stream)
        self._pending = None

    def window(self, from_ts: float, to_ts: float) -> list[av.Packet]:
        """Packets whose pts lie in [from_ts, to_ts), in pts order.

        Raises:
            VideoCutError: the file is corrupt where it is demuxed.
        """
        if self._packets is None or abs(from_ts - self._position) > _TS_EPS:
            self._seek(from_ts)
        seconds_per_tick = float(self.stream.time_base)  # float math: Fractions per packet cost a fifth of a cut
        packets = []
        self.ended_early = False
        try:
            while True:
                packet = self._pending if self._pending is not None else next(self._packets, None)
                self._pending = None
                if packet is None:
                    self.ended_early = True
                    self._packets = None
                    break
                if packet.pts is None or packet.size == 0:
                    continue
                seconds = packet.pts * seconds_per_tick
                self.last_seconds = max(self.last_seconds, seconds)
                if seconds >= to_ts - _TS_EPS:
                    self._pending = packet  # the next window's first packet
                    break
                if seconds >= from_ts - _TS_EPS:
                    packets.append(packet)
        except av.error.FFmpegError as err:
            self._packets = None
            raise VideoCutError(f"{self.path}: corrupt video while demuxing ({err})") from None
        self._position = to_ts
        packets.sort(key=lambda p: p.pts)
        return packets

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
        self.container, self.stream = _open_video(path)
        self.stream.thread_type = "AUTO"
        self._frames: Iterator[av.VideoFrame] | None = None
        self._pending: av.VideoFrame | None = None
        self._packet_sizes: list[tuple[float, int]] = []  # (pts seconds, bytes) demuxed, not yet attributed
        self._position = float("inf")
        self.window_bytes = 0
        self.ended_early = False
        self.last_seconds = 0.0

    def _decoded(self) -> Iterator[av.VideoFrame]:
        seconds_per_tick = float(self.stream.time_base)
        for packet in self.container.demux(self.stream):
            if packet.size and packet.pts is not None:
                seconds = packet.pts * seconds_per_tick
                self.last_seconds = max(self.last_seconds, seconds)
                self._packet_sizes.append((seconds, packet.size))
            yield from packet.decode()  # the final empty packet flushes the decoder

    def _seek(self, seconds: float) -> None:
        try:
            self.container.seek(_seek_target(seconds, self.stream.time_base), stream=self.stream, backward=True, any_frame=False)
        except av.error.FFmpegError:
            self.container.seek(0, stream=self.stream)
        self._frames = self._decoded()
        self._pending = None
        self._packet_sizes.clear()

    def window(self, from_ts: float, to_ts: float) -> Iterator[av.VideoFrame]:
        """Yield the frames whose pts lie in [from_ts, to_ts), in presentation order.

        Raises:
            VideoCutError: the file is corrupt where it is decoded.
        """
        if self._frames is None or abs(from_ts - self._position) > _TS_EPS:
            self._seek(from_ts)
        seconds_per_tick = float(self.stream.time_base)
        self.ended_early = False
        finished = False
        try:
            while True:
                frame = self._pending if self._pending is not None else next(self._frames, None)
                self._pending = None
                if frame is None:
                    self.ended_early = True
                    break
                if frame.pts is None:
                    continue
                seconds = frame.pts * seconds_per_tick
                if seconds >= to_ts - _TS_EPS:
                    self._pending = frame
                    break
                if seconds >= from_ts - _TS_EPS:
                    yield frame
            finished = True
        except av.error.FFmpegError as err:
            raise VideoCutError(f"{self.path}: corrupt video while decoding ({err})") from None
        finally:
            if finished and not self.ended_early:
                self._position = to_ts
            else:  # abandoned, failed or at the end of the file: the next window seeks
                self._frames, self._position = None, float("inf")
            inside = [(s, n) for s, n in self._packet_sizes if from_ts - _TS_EPS <= s < to_ts - _TS_EPS]
            self.window_bytes = sum(n for _, n in inside)
            self._packet_sizes = [(s, n) for s, n in self._packet_sizes if s >= to_ts - _TS_EPS]

    def close(self) -> None:
        self.container.close()


def cut_episode(
    location: VideoLocation, reader: SourceVideoReader | None = None, *, max_frames: int | None = None
) -> tuple[EpisodeVideo | None, int]:
    """Cut one episode out of a concatenated file by stream copy (no decode).

    Args:
        location: the file and the episode's [from_timestamp, to_timestamp) in it.
        reader: an open ``SourceVideoReader`` of ``location.path`` to continue from; without
            it the file is opened for this cut alone.
        max_frames: keep at most this many frames (the episode's length); trailing packets
            are dropped, which is lossless when decode order equals presentation order.

    Returns:
        ``(video, found)``: ``found`` is the number of frames in the window; ``video`` is None
        when the window is empty, does not start on a keyframe, or must be trimmed but has
        reordered frames (the caller re-encodes those).

    Raises:
        VideoCutError: the file cannot be opened or demuxed.
    """
    owned = reader is None
    reader = reader or SourceVideoReader(location.path)
    try:
        packets = reader.window(location.from_timestamp, location.to_timestamp)
        found = len(packets)
        if not packets or not packets[0].is_keyframe:
            return None, found
        if max_frames is not None and found > max_frames:
            decode_order = sorted(packets, key=lambda p: p.dts if p.dts is not None else p.pts)
            if decode_order != packets:
                return None, found
            packets = packets[:max_frames]
        stream = reader.stream
        source_bytes = sum(p.size for p in packets)
        first_pts = packets[0].pts
        first_dts = packets[0].dts if packets[0].dts is not None else first_pts
        shift = min(first_pts, first_dts)
        buffer = io.BytesIO()
        with av.open(buffer, "w", format="mp4", options={"fflags": "+bitexact"}) as sink:
            out = sink.add_stream_from_template(template=stream, opaque=True)
            out.time_base = stream.time_base
            for packet in packets:
                packet.pts -= shift
                if packet.dts is not None:
                    packet.dts -= shift
                packet.stream = out
                sink.mux(packet)
        return (
            EpisodeVideo(
                data=buffer.getvalue(),
                frames=len(packets),
                found=found,
                codec=_canonical_codec(stream.codec_context.name),
                reencoded=False,
                height=stream.codec_context.height,
                width=stream.codec_context.width,
                source_bytes=source_bytes,
            ),
            found,
        )
    finally:
        if owned:
            reader.close()


def encode_frames(
    frames: Iterable[av.VideoFrame], fps: int, settings: EncodeSettings, *, max_frames: int | None = None
) -> EpisodeVideo | None:
    """Encode frames into a closed-GOP, B-frame-free mp4 (hevc tagged ``hvc1``), streaming.

    Every frame of ``frames`` is consumed and counted (``found``); the first ``max_frames``
    are encoded. Frames are converted to yuv420p (and resized with ``settings.resize``).

    Returns:
        The member, or None when ``frames`` is empty.
    """
    buffer = io.BytesIO()
    sink = stream = None
    height = width = 0
    found = encoded = 0
    try:
        for frame in frames:
            found += 1
            if max_frames is not None and encoded >= max_frames:
                continue
            if sink is None:
                height, width = settings.resize or (frame.height, frame.width)
                sink = av.open(buffer, "w", format="mp4", options={"fflags": "+bitexact"})
                stream = sink.add_stream(settings.encoder_name(), rate=fps, options=settings.options(width))
                stream.pix_fmt = "yuv420p"
                stream.height, stream.width = height, width
                if settings.codec == "hevc":
                    stream.codec_tag = "hvc1"
            converted = frame.reformat(width=width, height=height, format="yuv420p")
            converted.pts = encoded
            converted.time_base = Fraction(1, fps)
            for packet in stream.encode(converted):
                sink.mux(packet)
            encoded += 1
        if sink is None:
            return None
        for packet in stream.encode():
            sink.mux(packet)
    finally:
        if sink is not None:
            sink.close()
    return EpisodeVideo(
        data=buffer.getvalue(), frames=encoded, found=found, codec=settings.codec, reencoded=True,
        height=height, width=width, source_bytes=0,
    )


def reencode_episode(
    location: VideoLocation,
    fps: int,
    settings: EncodeSettings,
    decoder: SourceFrameDecoder | None = None,
    *,
    max_frames: int | None = None,
) -> tuple[EpisodeVideo | None, int]:
    """Decode the episode's window (from its keyframe) and re-encode it.

    ``decoder`` is an open ``SourceFrameDecoder`` of ``location.path`` to continue from;
    without it the file is opened for this episode alone.

    Returns:
        ``(video, found)`` as ``cut_episode``; ``video`` is None when the window is empty.

    Raises:
        VideoCutError: the file cannot be opened or decoded.
    """
    owned = decoder is None
    decoder = decoder or SourceFrameDecoder(location.path)
    try:
        video = encode_frames(decoder.window(location.from_timestamp, location.to_timestamp), fps, settings, max_frames=max_frames)
        if video is None:
            return None, 0
        return replace(video, source_bytes=decoder.window_bytes), video.found
    finally:
        if owned:
            decoder.close()


def count_frames(data: bytes) -> int:
    """Decode an mp4 member fully and return its frame count (used by ``verify --decode``)."""
    with av.open(io.BytesIO(data)) as container:
        return sum(1 for _ in container.decode(video=0))


def _canonical_codec(name: str) -> str:
    return {"libdav1d": "av1", "libaom-av1": "av1", "av1": "av1", "hevc": "hevc", "h264": "h264"}.get(name, name)
