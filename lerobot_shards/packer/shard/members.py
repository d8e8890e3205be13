"""Per-episode mp4 members: cut by stream copy, or re-encoded for NVDEC.

Both produce a self-contained mp4 in memory whose first frame has pts 0 and whose frame
``j`` is the frame LeRobot decodes for the episode's row ``j``: the frame whose pts is
``from_timestamp + j / fps`` in LeRobot's concatenated per-camera file. The source's packets
and frames come from ``lerobot_shards.packer.source.video``.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import cast

import av
from av.container import OutputContainer
from av.error import FFmpegError
from av.video.stream import VideoStream

from lerobot_shards.core.address_space import limit_error
from lerobot_shards.core.format import gop_within_bound, longest_gop
from lerobot_shards.core.format.lerobot_reading import video_rate
from lerobot_shards.packer.errors import VideoCutError
from lerobot_shards.packer.shard.encoder_room import ensure_encoder_room
from lerobot_shards.packer.shard.mp4_writer import write_member
from lerobot_shards.packer.source.samples import SourceSampleReader
from lerobot_shards.packer.source.video import SourceFrameDecoder, SourceVideoReader, VideoLocation

# Frames whose shorter side is below this are encoded on one thread: the encoders' frame
# threads bring nothing on a few macroblock rows, and x264 on 32x32 and 48x64 frames was seen
# to give bytes that depended on the process and the machine's load (1 run in 10 on a loaded
# 2-core machine; a parallel pack then differed from a sequential one). Real cameras are larger.
SMALL_FRAME_SIDE = 128


def x265_ctu(height: int, width: int) -> int:
    """x265's CTU size for frames of ``height`` x ``width``: the largest of 64, 32 and 16 that fits
    twice into the shorter side (see ``EncodeSettings.options``)."""
    side = min(height, width)
    return 64 if side >= 128 else 32 if side >= 64 else 16


def reencode_pixel_format(source_format: str | None, height: int, width: int, *, depth: bool = False) -> str:
    """The pixel format a re-encode writes, from the source's and the output size.

    ``yuv420p`` (what NVDEC decodes everywhere) unless that would lose what the source has or
    cannot hold the size: a source with full-resolution chroma (``yuv444*``, ``gbr*``) keeps
    it (``yuv444p``: 4:2:0 cost such a source's frames up to 35 dB); an odd side is
    ``yuv444p`` too (4:2:0 chroma and the codecs' cropping work in pairs of pixels, so an odd
    size cannot be coded in 4:2:0 at all); a depth map is ``gray12le``, coded losslessly
    (LeRobot's own depth format: its 12-bit codes survive exactly).
    """
    if depth:
        return "gray12le"
    chroma_full = bool(source_format) and source_format.startswith(("yuv444", "yuvj444", "gbr"))
    return "yuv444p" if chroma_full or height % 2 or width % 2 else "yuv420p"


@dataclass(frozen=True)
class EncodeSettings:
    """Re-encode settings: codec ``hevc`` or ``h264``, GOP, CRF, preset, optional resize;
    ``depth``: the camera holds depth maps, coded losslessly (``hevc``, ``gray12le``, never
    resized: its values are quantized codes, not pixels to interpolate)."""

    codec: str
    gop: int = 2
    crf: int | None = None
    preset: str | None = None
    resize: tuple[int, int] | None = None  # (height, width)
    depth: bool = False

    def encoder_name(self) -> str:
        return {"hevc": "libx265", "h264": "libx264"}["hevc" if self.depth else self.codec]

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """(height, width) of the encoded frames of a ``height`` x ``width`` source."""
        return (height, width) if self.depth or self.resize is None else self.resize

    def stretches(self, height: int, width: int) -> bool:
        """Whether ``resize`` changes a ``height`` x ``width`` camera's aspect ratio (by more
        than the rounding an even size needs: 2 pixels on a side)."""
        if self.depth or self.resize is None:
            return False
        to_height, to_width = self.resize
        return abs(to_height * width - to_width * height) > 2 * max(height, width)

    def options(self, width: int, height: int | None = None) -> dict[str, str]:
        """Encoder options for frames of ``height`` x ``width`` (after any resize; a height of
        None is taken as the width).

        Raises:
            VideoCutError: hevc frames at most 16 pixels wide (see below); use h264.
        """
        crf = str(self.crf if self.crf is not None else (23 if self.codec == "hevc" else 20))
        # ultrafast: 2.7x the frames per core of "fast" at >= 41 dB on every ALOHA frame (docs/BENCHMARKS.md "x265 presets").
        preset = self.preset or ("ultrafast" if self.codec == "hevc" or self.depth else "veryfast")
        if self.codec == "hevc" or self.depth:
            # Closed GOP and no B-frames: x265's default open GOP makes fast seeks return wrong frames.
            # Small frames: x265 corrupts its heap (glibc aborts, or bytes depend on heap
            # contents) when a frame is less than two CTUs across either side, and in its
            # cu-tree lookahead on narrow frames (34-48 pixels wide with 16-pixel CTUs), found
            # by encoding every size from 18x18 to 132x268 in its own process: the CTU is the
            # largest that fits twice into the shorter side and cu-tree is off (0 of 1,134
            # sizes abort; with x265's defaults 48x64 frames did). 16 is x265's smallest CTU.
            if width <= 16:
                raise VideoCutError(
                    f"hevc cannot encode {width}-pixel-wide frames reproducibly (x265 needs at least two 16-pixel "
                    "CTUs per row); use --video h264 or --resize to a wider size"
                )
            ctu = x265_ctu(height if height is not None else width, width)
            params = f"keyint={self.gop}:min-keyint={self.gop}:scenecut=0:bframes=0:open-gop=0:ctu={ctu}:cutree=0:log-level=error"
            if min(height if height is not None else width, width) < SMALL_FRAME_SIDE:
                params += ":pools=none:frame-threads=1"
            if self.depth:
                return {"preset": preset, "x265-params": params + ":lossless=1"}
            return {"crf": crf, "preset": preset, "x265-params": params}
        single = {"threads": "1"} if min(height if height is not None else width, width) < SMALL_FRAME_SIDE else {}
        return {
            **single,
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
        frames: frames of the episode in ``data`` (at most the ``max_frames`` asked for).
        preroll: frames ``data`` holds before the episode's first (a cut from the keyframe
            before an episode that does not start on one); readers skip them.
        found: frames the source window held (may exceed ``frames`` when trimmed).
        codec: ``av1``, ``hevc`` or ``h264``.
        reencoded: the member was encoded here rather than cut by stream copy.
        source_bytes: compressed bytes of the source window's packets.
        rows: how the rows' timestamps placed their frames (``row_frames_verdict``): None (row
            ``j`` reads frame ``j``), ``"reorder"`` (re-encoded with each row's frame in row
            order), ``"pad"`` / ``"drop"`` (rows without a frame, packed by the policy).
    """

    data: bytes
    frames: int
    found: int
    codec: str
    reencoded: bool
    height: int
    width: int
    source_bytes: int
    preroll: int = 0
    rows: str | None = None


def cut_episode(
    location: VideoLocation, reader: SourceVideoReader | SourceSampleReader | None = None, *, max_frames: int | None = None
) -> tuple[EpisodeVideo | None, int]:
    """Cut one episode out of a concatenated file by stream copy (no decode).

    Args:
        location: the file and the episode's [from_timestamp, to_timestamp) in it.
        reader: an open reader of ``location.path``: a ``SourceSampleReader`` (the member is
            written from the samples' byte ranges) or a ``SourceVideoReader`` (demuxed and
            remuxed packet by packet, for files whose timing the former does not take);
            without it the file is opened with a ``SourceVideoReader`` for this cut alone.
        max_frames: keep at most this many frames (the episode's length); trailing packets
            are dropped, which is lossless when decode order equals presentation order.

    Returns:
        ``(video, found)``: ``found`` is the number of frames in the window; ``video`` is None
        when the window is empty, does not start on a keyframe, must be trimmed but has
        reordered frames, or has a GOP too long for readers (``MAX_GOP_PIXELS``): the caller
        re-encodes those.

    Raises:
        VideoCutError: the file cannot be opened or demuxed.
    """
    if isinstance(reader, SourceSampleReader):
        return _cut_samples(location, reader, max_frames)
    owned = reader is None
    reader = reader or SourceVideoReader(location.path)
    try:
        packets = reader.window(location.from_timestamp, location.to_timestamp)
        found = len(packets)
        cut = _cuttable_packets(reader, packets, max_frames)
        if cut is None:
            return None, found
        packets, preroll, decode_order = cut
        stream = reader.stream
        video = EpisodeVideo(
            data=_remux(stream, packets, decode_order),
            frames=len(packets) - preroll,
            found=found,
            codec=_canonical_codec(stream.codec_context.name),
            reencoded=False,
            height=stream.codec_context.height,
            width=stream.codec_context.width,
            source_bytes=sum(p.size for p in packets),
            preroll=preroll,
        )
        return video, found
    finally:
        if owned:
            reader.close()


def _cuttable_packets(reader: SourceVideoReader, packets: list, max_frames: int | None) -> tuple[list, int, list | None] | None:
    """The window's packets as one member takes them (with a pre-roll from the keyframe before,
    trimmed to ``max_frames``), how many are pre-roll, and their decode order when it is not
    their presentation order (B-frames); None when the window cannot be cut on its own: empty,
    a frame that needs packets outside it, a reordered window to trim or to start between
    keyframes, or a GOP too long for readers."""
    if not packets:
        return None
    decode_order = sorted(packets, key=lambda p: p.dts if p.dts is not None else p.pts or 0)  # packets all have a pts
    reordered = decode_order != packets  # B-frames: decode order is not presentation order
    if not reader.decode_contiguous or decode_order[0] is not packets[0]:
        # A packet outside the window lies between its packets in decode order (a B-frame's
        # later reference, a neighbour's frame), or its first frame is not decoded first: the
        # window's frames may need packets it does not hold, so it is not cut on its own.
        return None
    preroll: list = []
    if not packets[0].is_keyframe:
        # Between keyframes: cut from the one before (the pre-roll, skipped on read), when the
        # stream is in presentation order and the packets since that keyframe run on unbroken.
        if reordered or not reader.preroll:
            return None
        preroll = reader.preroll
    if max_frames is not None and len(packets) > max_frames:
        if reordered:
            return None
        packets = packets[:max_frames]
    packets = preroll + packets
    keyframes = [i for i, p in enumerate(packets) if p.is_keyframe]
    if not gop_within_bound(
        longest_gop(keyframes, len(packets)), reader.stream.codec_context.height, reader.stream.codec_context.width
    ):
        # Readers refuse members whose GOP costs more than MAX_GOP_PIXELS decoded pixels
        # to reach one frame (lerobot_shards/core/format/mp4.py): re-encode with short GOPs instead.
        return None
    return packets, len(preroll), decode_order if reordered else None


def _remux(stream, packets: list, decode_order: list | None) -> bytes:
    """The packets muxed into a plain mp4 whose first frame is at pts 0 (stream copy). With
    ``decode_order`` (B-frames) they are muxed in that order: earlier decode times are then
    negative, which mp4 carries as signed composition offsets (ctts version 1)."""
    buffer = io.BytesIO()
    if decode_order is not None:
        shift, options = packets[0].pts, {"fflags": "+bitexact", "movflags": "+negative_cts_offsets"}
        packets = decode_order
    else:
        first_dts = packets[0].dts if packets[0].dts is not None else packets[0].pts
        shift, options = min(packets[0].pts, first_dts), {"fflags": "+bitexact"}
    with av.open(buffer, "w", format="mp4", options=options) as sink:
        out = sink.add_stream_from_template(template=stream, opaque=True)
        out.time_base = stream.time_base
        for packet in packets:
            pts, dts = packet.pts, packet.dts
            packet.pts -= shift
            if packet.dts is not None:
                packet.dts -= shift
            packet.stream = out
            sink.mux(packet)
            # The reader keeps the packets since the last keyframe as the next window's
            # pre-roll: they go back as they were demuxed.
            packet.pts, packet.dts, packet.stream = pts, dts, stream
    return buffer.getvalue()


def _cut_samples(location: VideoLocation, reader: SourceSampleReader, max_frames: int | None) -> tuple[EpisodeVideo | None, int]:
    """``cut_episode`` from byte ranges: the same window, checks and trimming as the demuxer
    path, the member written by ``write_member`` around the samples' bytes.

    A window that does not start on a keyframe (one stream for many episodes, LeRobot's image to
    video converter) is cut from the keyframe before it: the frames in between are the member's
    pre-roll, decoded but never read, so the episode's frames are the source's bit for bit
    (samples stored in presentation order, which this reader requires, decode from the
    keyframe on). The GOP bound then covers the pre-roll too."""
    window = reader.window(location.from_timestamp, location.to_timestamp)
    found = len(window)
    if not found:
        return None, found
    key = reader.keyframe_at_or_before(window.start)
    if key is None:
        return None, found  # nothing before it to decode from: re-encoded
    rows = window[:max_frames] if max_frames is not None else window
    keep = range(key, rows.stop)
    keyframes = [j - keep.start for j in reader.keyframes_in(keep)]
    layout = reader.layout
    if not gop_within_bound(longest_gop(keyframes, len(keep)), layout.height, layout.width):
        return None, found  # readers refuse such a GOP (lerobot_shards/core/format/mp4.py): re-encode instead
    data = reader.read(keep)
    member = write_member(
        sample_entry=reader.track.sample_entry,
        timescale=reader.track.timescale,
        durations=reader.track.durations[keep.start : keep.stop].tolist(),
        sizes=layout.sample_sizes[keep.start : keep.stop].tolist(),
        keyframes=keyframes,
        width=layout.width,
        height=layout.height,
        data=data,
    )
    video = EpisodeVideo(
        data=member,
        frames=len(rows),
        found=found,
        codec=layout.codec,
        reencoded=False,
        height=layout.height,
        width=layout.width,
        source_bytes=len(data),
        preroll=window.start - key,
    )
    return video, found


def encode_frames(
    frames: Iterable[av.VideoFrame], fps: float, settings: EncodeSettings, *, max_frames: int | None = None
) -> EpisodeVideo | None:
    """Encode frames into a closed-GOP, B-frame-free mp4 (hevc tagged ``hvc1``), streaming.

    Every frame of ``frames`` is consumed and counted (``found``); the first ``max_frames``
    are encoded, converted to ``reencode_pixel_format`` of the first frame's format and size
    (and resized with ``settings.resize``).

    Returns:
        The member, or None when ``frames`` is empty.
    """
    buffer = io.BytesIO()
    sink: OutputContainer | None = None
    stream: VideoStream | None = None
    height = width = 0
    pixel_format = ""
    found = encoded = 0
    codec = "hevc" if settings.depth else settings.codec
    rate = video_rate(fps)  # a fractional fps (29.97) as the encoder's rational rate
    try:
        for frame in frames:
            found += 1
            if max_frames is not None and encoded >= max_frames:
                continue
            if sink is None or stream is None:
                height, width = settings.output_size(frame.height, frame.width)
                pixel_format = reencode_pixel_format(frame.format.name, height, width, depth=settings.depth)
                sink = av.open(buffer, "w", format="mp4", options={"fflags": "+bitexact"})
                # A video encoder's name gives a video stream; PyAV types it as any kind of stream.
                options = settings.options(width, height)
                stream = cast(VideoStream, sink.add_stream(settings.encoder_name(), rate=rate, options=options))
                stream.pix_fmt = pixel_format
                stream.height, stream.width = height, width
                if codec == "hevc":
                    stream.codec_tag = "hvc1"
                open_encoder(stream, settings.encoder_name(), options, height, width)
            converted = frame.reformat(width=width, height=height, format=pixel_format)
            converted.pts = encoded
            converted.time_base = 1 / rate
            for packet in stream.encode(converted):
                sink.mux(packet)
            encoded += 1
        if sink is None or stream is None:
            return None
        for packet in stream.encode():
            sink.mux(packet)
    finally:
        if sink is not None:
            sink.close()
    return EpisodeVideo(
        data=buffer.getvalue(),
        frames=encoded,
        found=found,
        codec=codec,
        reencoded=True,
        height=height,
        width=width,
        source_bytes=0,
    )


MAX_REORDER_FRAMES = 32
"""The most decoded frames held back to give rows their frames in row order (``in_row_order``):
timestamps swapped between neighbours need one or two; a map that needs more is refused."""


def open_encoder(stream: VideoStream, encoder: str, options: dict[str, str], height: int, width: int) -> None:
    """Open ``stream``'s encoder once there is room for it (``encoder_room``): under an
    address-space limit too small for its threads, x265 would wait forever for a thread that
    never started, and x264 fails with a bare "Generic error in an external library".

    Raises:
        ResourceLimitError: the process's address-space limit has no room for the encoder.
    """
    ensure_encoder_room(encoder, options, height, width)
    try:
        stream.codec_context.open()
    except (FFmpegError, OSError, MemoryError) as err:
        # Only a limit is worded as one (another thread took the room, or the encoder wanted
        # more); any other failure keeps its own message.
        limited = limit_error(err, f"opening the {encoder} encoder")
        if limited is None:
            raise
        raise limited from err


def in_row_order(frames: Iterable[av.VideoFrame], positions: Sequence[int], *, where: str) -> Iterator[av.VideoFrame]:
    """The frames of a window at ``positions`` (each row's frame, ``lerobot_frame_positions``),
    in row order: a frame is held only until the last row that reads it, at most
    ``MAX_REORDER_FRAMES`` at once. ``frames`` is consumed to its end.

    Raises:
        VideoCutError: rows read frames further out of order than the bound, or past the
            window's end (names ``where``).
    """
    uses: dict[int, int] = {}
    for position in positions:
        uses[position] = uses.get(position, 0) + 1
    held: dict[int, av.VideoFrame] = {}
    row = 0
    for index, frame in enumerate(frames):
        if index not in uses:
            continue
        held[index] = frame
        if len(held) > MAX_REORDER_FRAMES:
            raise VideoCutError(
                f"{where}: rows read frames more than {MAX_REORDER_FRAMES} frames out of order; re-time the rows' timestamps"
            )
        while row < len(positions) and positions[row] in held:
            position = positions[row]
            yield held[position]
            uses[position] -= 1
            if not uses[position]:
                del held[position]
            row += 1
    if row < len(positions):
        raise VideoCutError(f"{where}: row {row} reads frame {positions[row]}, past the window's end")


def reencode_episode(
    location: VideoLocation,
    fps: float,
    settings: EncodeSettings,
    decoder: SourceFrameDecoder | None = None,
    *,
    max_frames: int | None = None,
    positions: Sequence[int] | None = None,
) -> tuple[EpisodeVideo | None, int]:
    """Decode the episode's window (from its keyframe) and re-encode it.

    ``decoder`` is an open ``SourceFrameDecoder`` of ``location.path`` to continue from;
    without it the file is opened for this episode alone. ``positions`` (one per row: the
    window frame LeRobot reads for it) re-encodes those frames in row order, so member frame
    ``j`` is row ``j``'s; ``found`` is then the rows given a frame.

    Returns:
        ``(video, found)`` as ``cut_episode``; ``video`` is None when the window is empty.

    Raises:
        VideoCutError: the file cannot be opened or decoded.
    """
    owned = decoder is None
    decoder = decoder or SourceFrameDecoder(location.path)
    try:
        frames: Iterable[av.VideoFrame] = decoder.window(location.from_timestamp, location.to_timestamp)
        if positions is not None:
            frames = in_row_order(frames, positions, where=f"{location.path} [{location.from_timestamp:.4f} s]")
        video = encode_frames(frames, fps, settings, max_frames=max_frames)
        if video is None:
            return None, 0
        return replace(video, source_bytes=decoder.window_bytes), video.found
    finally:
        if owned:
            decoder.close()


def count_frames(data: bytes) -> int:
    """Decode an mp4 member fully and return its frame count (used by ``verify --decode``)."""
    with av.open(io.BytesIO(data), mode="r") as container:
        return sum(1 for _ in container.decode(video=0))


def _canonical_codec(name: str) -> str:
    return {"libdav1d": "av1", "libaom-av1": "av1", "av1": "av1", "hevc": "hevc", "h264": "h264"}.get(name, name)
