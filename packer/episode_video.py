"""Per-episode mp4 members: cut by stream copy, or re-encoded for NVDEC.

Both produce a self-contained mp4 in memory whose first frame has pts 0 and whose frame
``j`` is the frame LeRobot decodes for the episode's row ``j``.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from packer.source import VideoLocation

# Half a frame at 1000 fps: smaller than any frame period, larger than timestamp rounding.
_TS_EPS = 5e-4


class VideoCutError(ValueError):
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

    def options(self) -> dict[str, str]:
        crf = str(self.crf if self.crf is not None else (23 if self.codec == "hevc" else 20))
        preset = self.preset or ("fast" if self.codec == "hevc" else "veryfast")
        if self.codec == "hevc":
            # Closed GOP and no B-frames: x265's default open GOP makes fast seeks return wrong frames.
            params = f"keyint={self.gop}:min-keyint={self.gop}:scenecut=0:bframes=0:open-gop=0:log-level=error"
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
    """An episode's mp4 member bytes and what they hold."""

    data: bytes
    frames: int
    codec: str
    reencoded: bool
    height: int
    width: int


class SourceVideoReader:
    """Packets of consecutive episode windows of one concatenated file, in one demux pass.

    LeRobot stores a camera's episodes back to back and a shard packs them in index order, so
    each window usually starts where the previous one ended: the reader keeps demuxing from
    there instead of re-opening and seeking per episode (the profile showed open + seek at
    about half of a cut). A window before the current position re-seeks.
    """

    def __init__(self, path: Path):
        self.path = path
        try:
            self.container = av.open(str(path))
        except Exception as err:
            raise VideoCutError(f"{path}: cannot open video ({err})") from None
        self.stream = self.container.streams.video[0]
        self._packets = None
        self._pending = None
        self._position = float("inf")  # seconds of the next unread packet; inf = must seek

    def _seek(self, seconds: float) -> None:
        time_base = self.stream.time_base
        start = Fraction(seconds).limit_denominator(1_000_000)
        target = int(math.floor(float(start / time_base))) if time_base else 0
        try:
            self.container.seek(max(target, 0), stream=self.stream, backward=True, any_frame=False)
        except av.error.FFmpegError:
            self.container.seek(0, stream=self.stream)
        self._packets = self.container.demux(self.stream)
        self._pending = None

    def window(self, from_ts: float, to_ts: float) -> list:
        """Packets whose pts lie in [from_ts, to_ts), in pts order."""
        if self._packets is None or from_ts < self._position - _TS_EPS:
            self._seek(from_ts)
        time_base = self.stream.time_base
        packets = []
        try:
            while True:
                packet = self._pending if self._pending is not None else next(self._packets, None)
                self._pending = None
                if packet is None:
                    break
                if packet.pts is None or packet.size == 0:
                    continue
                seconds = float(packet.pts * time_base)
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


def _window_packets(location: VideoLocation, reader: SourceVideoReader | None = None):
    """(reader, stream, packets) of the episode's [from, to) window, in pts order."""
    reader = reader or SourceVideoReader(location.path)
    return reader, reader.stream, reader.window(location.from_timestamp, location.to_timestamp)


def cut_episode(location: VideoLocation, reader: SourceVideoReader | None = None) -> tuple[EpisodeVideo | None, int]:
    """Cut one episode out of a concatenated file by stream copy (no decode).

    ``reader`` (optional) is an open ``SourceVideoReader`` of ``location.path`` to continue
    from; without it the file is opened for this cut alone.

    Returns:
        ``(video, packets)``: ``video`` is None when the episode does not start on a
        keyframe (the caller re-encodes it); ``packets`` is the number of frames found.

    Raises:
        VideoCutError: the file cannot be opened or demuxed.
    """
    owned = reader is None
    reader, stream, packets = _window_packets(location, reader)
    try:
        if not packets or not packets[0].is_keyframe:
            return None, len(packets)
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
        codec = stream.codec_context.name
        return (
            EpisodeVideo(
                data=buffer.getvalue(),
                frames=len(packets),
                codec=_canonical_codec(codec),
                reencoded=False,
                height=stream.codec_context.height,
                width=stream.codec_context.width,
            ),
            len(packets),
        )
    finally:
        if owned:
            reader.close()


def decode_episode_frames(location: VideoLocation) -> list[av.VideoFrame]:
    """Decode the episode's frames (pts in [from, to)) from its source file."""
    reader, stream, _ = _window_packets(location)
    container = reader.container
    try:
        # Decode from the start so references of the window's first frames resolve.
        container.seek(0, stream=stream)
        frames = []
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            seconds = float(frame.pts * stream.time_base)
            if seconds >= location.to_timestamp - _TS_EPS:
                break
            if seconds >= location.from_timestamp - _TS_EPS:
                frames.append(frame)
        return frames
    except av.error.FFmpegError as err:
        raise VideoCutError(f"{location.path}: corrupt video while decoding ({err})") from None
    finally:
        reader.close()


def encode_frames(frames: list[av.VideoFrame], fps: int, settings: EncodeSettings) -> EpisodeVideo:
    """Encode decoded frames into a closed-GOP, B-frame-free mp4 (hevc tagged ``hvc1``)."""
    if not frames:
        raise VideoCutError("no frames to encode")
    height, width = settings.resize or (frames[0].height, frames[0].width)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4", options={"fflags": "+bitexact"}) as sink:
        stream = sink.add_stream(settings.encoder_name(), rate=fps, options=settings.options())
        stream.pix_fmt = "yuv420p"
        stream.height, stream.width = height, width
        if settings.codec == "hevc":
            stream.codec_tag = "hvc1"
        for index, frame in enumerate(frames):
            converted = frame.reformat(width=width, height=height, format="yuv420p")
            converted.pts = index
            converted.time_base = Fraction(1, fps)
            for packet in stream.encode(converted):
                sink.mux(packet)
        for packet in stream.encode():
            sink.mux(packet)
    return EpisodeVideo(
        data=buffer.getvalue(), frames=len(frames), codec=settings.codec, reencoded=True, height=height, width=width
    )


def count_frames(data: bytes) -> int:
    """Decode an mp4 member fully and return its frame count (used by ``verify --decode``)."""
    with av.open(io.BytesIO(data)) as container:
        return sum(1 for _ in container.decode(video=0))


def _canonical_codec(name: str) -> str:
    return {"libdav1d": "av1", "libaom-av1": "av1", "av1": "av1", "hevc": "hevc", "h264": "h264"}.get(name, name)


def probe_member(path: Path) -> tuple[int, int]:
    """Return (height, width) of a video file."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return stream.codec_context.height, stream.codec_context.width
