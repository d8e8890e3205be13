"""Encoding a synthetic episode like LeRobot (libsvtav1, yuv420p) and concatenating per-episode
files by stream copy into LeRobot's per-camera files."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from av.error import FFmpegError


def encode_episode_video(
    frames: np.ndarray,
    path: Path,
    fps: float | Fraction,
    *,
    crf: int,
    gop: int,
    preset: int,
    codec: str = "av1",
    pix_fmt: str = "yuv420p",
    bframes: int = 0,
) -> None:
    """Encode frames to an mp4 like LeRobot's writer: RGB (T, H, W, 3) uint8 with libsvtav1
    (``codec="av1"``, LeRobot's default), libx264 (``"h264"``) or libx265 (``"hevc"``) in
    ``pix_fmt``, or a depth map's 12-bit codes (T, H, W) uint16 as LeRobot's default depth
    encoder writes them (``pix_fmt="gray12le"``: lossless HEVC). ``bframes``: B-frames x264/x265
    may put between references (with a long ``gop`` they are real, as in LeRobot's h264 and
    hevc encodes, which keep the encoders' defaults).

    Once in many hundreds of test runs (never reproduced in 600 stress encodes) the muxer
    refused an SVT-AV1 packet with EINVAL; the encode is then redone once from scratch, with
    a warning, since this writes test data, and a second failure is raised.
    """
    for attempt in (1, 2):
        try:
            if codec == "av1":
                _encode_once(frames, path, fps, crf=crf, gop=gop, preset=preset)
            else:
                _encode_x26x(frames, path, fps, codec=codec, pix_fmt=pix_fmt, crf=crf, gop=gop, bframes=bframes)
            return
        except FFmpegError as err:
            # EINVAL from the muxer: av.error.ArgumentError in PyAV >= 16, av.error.ValueError in
            # the PyAV 15 LeRobot 0.6.1 installs; both are ValueErrors (named by neither, both import).
            if not isinstance(err, ValueError):
                raise
            path.unlink(missing_ok=True)
            if attempt == 2:
                raise
            warnings.warn(f"{path.name}: the muxer refused a packet ({err}); encoding it again", RuntimeWarning, stacklevel=2)


_REALTIME = {getattr(os, "SCHED_FIFO", -1), getattr(os, "SCHED_RR", -1)}


def _realtime_threads() -> set[int]:
    """This process's threads on a real-time scheduling policy (Linux; empty elsewhere)."""
    found = set()
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return found
    for tid in tids:
        try:
            if os.sched_getscheduler(tid) in _REALTIME:
                found.add(tid)
        except OSError:  # the thread ended
            continue
    return found


def _restore_scheduling(before: set[int]) -> None:
    """Put threads libsvtav1 moved to SCHED_FIFO back on SCHED_OTHER. Run as root, SVT-AV1 sets
    the thread that opens an encoder, and every thread it starts, to SCHED_FIFO at priority 99,
    and never sets the caller back: the process (and everything it forks: DataLoader workers,
    a browser, torchrun ranks) then ran real-time, and two busy such threads livelocked a
    2-core machine (found with strace: pthread_setschedparam in svt_av1_enc_init_handle)."""
    for tid in _realtime_threads() - before:
        try:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except OSError:
            continue


def _encode_once(frames: np.ndarray, path: Path, fps: float | Fraction, *, crf: int, gop: int, preset: int) -> None:
    before = _realtime_threads()
    try:
        _encode_svtav1(frames, path, fps, crf=crf, gop=gop, preset=preset, opened=lambda: _restore_scheduling(before))
    finally:
        _restore_scheduling(before)


def _encode_svtav1(frames: np.ndarray, path: Path, fps: float | Fraction, *, crf: int, gop: int, preset: int, opened) -> None:
    fps = _rate(fps)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(
            "libsvtav1", fps, options={"g": str(gop), "crf": str(crf), "preset": str(preset), "svtav1-params": "fast-decode=0"}
        )
        stream.pix_fmt = "yuv420p"
        stream.height, stream.width = frames.shape[1], frames.shape[2]
        stream.codec_context.time_base = 1 / fps
        for index, frame in enumerate(frames):
            # Explicit timestamps (the bytes are the same as the encoder's own numbering).
            picture = av.VideoFrame.from_ndarray(frame, format="rgb24")
            picture.pts, picture.time_base = index, 1 / fps
            for packet in stream.encode(picture):
                container.mux(packet)
            if index == 0:
                opened()  # the encoder (and its threads) exist from the first frame on
        for packet in stream.encode():
            container.mux(packet)


def _encode_x26x(
    frames: np.ndarray, path: Path, fps: float | Fraction, *, codec: str, pix_fmt: str, crf: int, gop: int, bframes: int
) -> None:
    fps = _rate(fps)
    if codec == "hevc":
        # cu-tree off and a CTU that fits twice: x265 corrupts its heap on small frames otherwise
        # (lerobot_shards.packer.shard.members.EncodeSettings.options).
        side = min(frames.shape[1], frames.shape[2])
        ctu = 64 if side >= 128 else 32 if side >= 64 else 16
        params = f"keyint={gop}:min-keyint={gop}:bframes={bframes}:ctu={ctu}:cutree=0:log-level=error"
        if pix_fmt.startswith("gray"):
            params += ":lossless=1"
        options = {"crf": str(crf), "preset": "ultrafast" if bframes == 0 else "medium", "x265-params": params}
    else:
        options = {"crf": str(crf), "preset": "medium", "g": str(gop), "bf": str(bframes)}
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx265" if codec == "hevc" else "libx264", fps, options=options)
        stream.pix_fmt = pix_fmt
        stream.height, stream.width = frames.shape[1], frames.shape[2]
        stream.codec_context.time_base = 1 / fps
        if codec == "hevc":
            stream.codec_tag = "hvc1"
        for index, frame in enumerate(frames):
            if frame.ndim == 2:
                picture = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="gray12le")
            else:
                picture = av.VideoFrame.from_ndarray(frame, format="rgb24").reformat(format=pix_fmt)
            picture.pts, picture.time_base = index, 1 / fps
            for packet in stream.encode(picture):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def concatenate_by_stream_copy(inputs: Sequence[Path], output: Path) -> None:
    """Concatenate mp4 files without re-encoding (ffmpeg concat demuxer + remux), like LeRobot."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "list.ffconcat"
        listing.write_text("ffconcat version 1.0\n" + "".join(f"file '{p.resolve()}'\n" for p in inputs))
        staged = Path(tmp) / "out.mp4"
        with (
            av.open(str(listing), "r", format="concat", options={"safe": "0"}) as source,
            av.open(str(staged), "w", options={"movflags": "faststart"}) as sink,
        ):
            mapping = {}
            for stream in source.streams:
                if stream.type == "video":
                    mapping[stream.index] = sink.add_stream_from_template(template=stream, opaque=True)
                    mapping[stream.index].time_base = stream.time_base
            for packet in source.demux():
                if packet.stream.index not in mapping or packet.dts is None:
                    continue
                packet.stream = mapping[packet.stream.index]
                sink.mux(packet)
        shutil.move(str(staged), str(output))


def tiny_member(
    frames: int, height: int = 16, width: int = 16, *, fps: int = 30, gop: int = 1, step: int = 37, crf: int = 30
) -> bytes:
    """A self-contained h264 mp4 of ``frames`` uniformly gray frames (frame i at level
    ``i * step % 256``; closed GOPs of ``gop``, no B-frames; samples before ``moov``): a valid
    member for tiny synthetic packs (``write_tabular_pack(camera=...)``), and a source whose
    frames are told apart by their level."""
    import io

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as sink:
        stream = sink.add_stream("libx264", rate=fps, options={"g": str(gop), "bf": "0", "crf": str(crf), "preset": "ultrafast"})
        stream.pix_fmt, stream.height, stream.width = "yuv420p", height, width
        for index in range(frames):
            picture = av.VideoFrame.from_ndarray(np.full((height, width, 3), (index * step) % 256, np.uint8), format="rgb24")
            picture.pts, picture.time_base = index, Fraction(1, fps)
            for packet in stream.encode(picture):
                sink.mux(packet)
        for packet in stream.encode():
            sink.mux(packet)
    return buffer.getvalue()


def _rate(fps: float | Fraction) -> Fraction:
    """A frame rate as the encoders take it: an exact fraction (30, or 30000/1001 for NTSC)."""
    return Fraction(fps).limit_denominator(1001) if not isinstance(fps, Fraction) else fps
