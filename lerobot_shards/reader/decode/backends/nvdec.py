"""NVDEC decode of H.264/HEVC members through PyNvVideoCodec's core decoder.

Random access through a container decoder (PyNvVideoCodec's ``SimpleDecoder``, torchcodec's
CUDA decoder) costs a demuxer seek and a decoder flush per jump: measured on an H100, that
CPU work held the 7 NVDEC engines 70-80% idle. Here the decoder is fed an elementary stream
instead (``lerobot_shards/reader/decode/annexb.py``): each member converted once to Annex-B, and per batch
the runs of samples that reach the wanted frames, one packet per picture, the batch's members
back to back through one session per thread and frame format, one end-of-stream per batch.
No demuxer, no seek, no flush per access.

Frames come out as NV12, NVDEC's own format, and the stage converts a camera's whole batch at
once with FFmpeg's arithmetic (``lerobot_shards/reader/decode/colour.py``): bit-identical to the CPU path,
where PyNvVideoCodec's planar-RGB conversion differs by up to 2 levels. A member whose colour
signalling that conversion cannot match exactly (``colour.resolve``), or a stage made with
``backend_options={"colour": "nvdec"}``, gets PyNvVideoCodec's RGB instead.

Each frame is tagged with the timestamp sent with its packet (member and frame): every
returned frame must be the next one sent, or the batch is refused (``DecodeStageError``),
never shifted. Frames are copied to their rows by the CUDA driver's asynchronous copy, a
ctypes call that releases the GIL (``from_dlpack`` + ``copy_`` cost ~55 us of Python under it).

Needs a CUDA device, the driver's ``libnvcuvid`` and ``pip install pynvvideocodec``;
``nvdec_unavailable()`` says which is missing. Nothing here runs without a GPU: the stream it
sends is tested on CPU by decoding the same packets with FFmpeg, the colour conversion against
FFmpeg's own.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from lerobot_shards.core.errors import ArgumentError, DecodeStageError, FormatError
from lerobot_shards.core.format.mp4 import Mp4Layout
from lerobot_shards.reader.decode import colour as colour_conversion
from lerobot_shards.reader.decode.annexb import ElementaryStream, elementary_stream, packets, stream_config
from lerobot_shards.reader.decode.backends.base import DecodeBackend, Job, Opened, Output, frame_size
from lerobot_shards.reader.decode.nvdec_rules import CODECS, nvdec_refusal, nvdec_size_refusal
from lerobot_shards.reader.decode.spec import FrameSpec, check_frame_spec
from lerobot_shards.reader.decode.sps import signal_type
from lerobot_shards.reader.decode.wire import EncodedFrames

_lock = threading.Lock()
_module = None


def _nvc():
    global _module
    with _lock:
        if _module is None:
            import PyNvVideoCodec  # pyright: ignore[reportMissingImports]  (the optional GPU wheel; absent on CPU machines)

            _module = PyNvVideoCodec
    return _module


_copy_function: Any = None  # the ctypes function once looked up; False where the driver lacks it


def _device_copy() -> Callable[..., int] | None:
    """The CUDA driver's asynchronous device-to-device copy (``cuMemcpyDtoDAsync``), or None.

    Measured on an H100: handing each decoded frame to torch (``from_dlpack`` + ``copy_``)
    cost ~55 us of Python under the GIL per frame and capped 4 threads at ~4,000 frames/s,
    while NVDEC alone fed ~14,000. A ctypes call releases the GIL and costs ~2 us."""
    global _copy_function
    with _lock:
        if _copy_function is None:
            try:
                function = ctypes.CDLL("libcuda.so.1").cuMemcpyDtoDAsync_v2
                function.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p]
                function.restype = ctypes.c_int
                _copy_function = function
            except (OSError, AttributeError):
                _copy_function = False
    return _copy_function or None


def nvdec_unavailable() -> str | None:
    """Why NVDEC cannot decode in this process, or ``None`` when it can: no CUDA device, no
    ``libnvcuvid`` (a container started without the ``video`` driver capability), or
    PyNvVideoCodec not importable."""
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        ctypes.CDLL("libnvcuvid.so.1")
    except OSError as err:
        return (
            f"the NVIDIA video decode library libnvcuvid.so.1 cannot be loaded ({err}); in a container, start it "
            "with NVIDIA_DRIVER_CAPABILITIES=compute,utility,video"
        )
    try:
        _nvc()
    except Exception as err:  # ImportError, or RuntimeError from its driver check
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return f"PyNvVideoCodec cannot be imported ({type(err).__name__}: {first}); pip install pynvvideocodec"
    return None


@dataclass(frozen=True)
class MemberStream:
    """A checked member ready to feed: its layout (keyframes, samples) and its samples as one
    Annex-B buffer (``annexb.elementary_stream``)."""

    where: str
    layout: Mp4Layout
    stream: ElementaryStream


class NvdecSession:
    """One NVDEC decoder for members of one codec and frame size, writing one frame format
    (``"nv12"`` or ``"rgb"``), used by one thread, on its own CUDA stream.

    A batch's members go through it back to back (``decode``): NVDEC works ahead of the
    frames handed back (display delay), and one end-of-stream per batch hands over the rest.
    Each packet's timestamp names its member and frame, and frames must come back in the order
    sent: the check that no frame is ever attributed to another.

    Raises:
        DecodeStageError: the decoder cannot be created (named, with the library's message).
    """

    def __init__(self, codec: str, height: int, width: int, output: Literal["nv12", "rgb"], device: torch.device):
        nvc = _nvc()
        self.codec, self.height, self.width, self.output, self.device = codec, height, width, output, device
        self.stream = torch.cuda.Stream(device=device)
        try:
            self._decoder = nvc.CreateDecoder(
                gpuid=device.index or 0,
                codec=getattr(nvc.cudaVideoCodec, "HEVC" if codec == "hevc" else "H264"),
                cudacontext=0,
                cudastream=self.stream.cuda_stream,
                usedevicememory=True,
                outputColorType=nvc.OutputColorType.NATIVE if output == "nv12" else nvc.OutputColorType.RGBP,
                latency=nvc.DisplayDecodeLatencyType.NATIVE,
            )
        except Exception as err:
            raise DecodeStageError(f"cannot create an NVDEC {codec} decoder on {device} ({type(err).__name__}: {err})") from err
        self._packet = nvc.PacketData
        self._end_of_picture = nvc.VideoPacketFlag.ENDOFPICTURE
        self._end_of_stream = nvc.VideoPacketFlag.ENDOFSTREAM
        self.counters = {"frames_fed": 0, "flushes": 0, "driver_copies": 0}
        # One frame's bytes as a row of the output: NV12 (H + H/2 rows of W) or planar RGB.
        self._shape = (height * 3 // 2, width) if output == "nv12" else (3, height, width)
        self._frame_bytes = height * width * 3 // 2 if output == "nv12" else 3 * height * width
        # Frames are copied with the driver's copy once the first frame shows it is safe
        # (``_can_copy_directly``); through torch otherwise.
        self._direct: bool | None = None if _device_copy() is not None else False

    def _send(self, address: int, size: int, pts: int) -> list:
        packet = self._packet()
        packet.bsl_data = address
        packet.bsl = size
        packet.pts = pts
        packet.decode_flag = self._end_of_picture  # one whole picture per packet
        return self._decoder.Decode(packet)

    def _flush(self) -> list:
        packet = self._packet()
        packet.bsl_data = 0
        packet.bsl = 0
        packet.decode_flag = self._end_of_stream  # hands over every frame it still holds
        self.counters["flushes"] += 1
        return self._decoder.Decode(packet)

    def _frame(self, decoded) -> torch.Tensor:
        """A decoded frame as a tensor of one output row's shape, refused unless it is exactly
        that (planar RGB may come as (3H, W))."""
        tensor = torch.from_dlpack(decoded)
        shape = tuple(tensor.shape)
        accepted = {self._shape} if self.output == "nv12" else {self._shape, (3 * self.height, self.width)}
        if tensor.dtype != torch.uint8 or shape not in accepted:
            hint = "; backend_options={'colour': 'nvdec'} takes NVDEC's RGB instead" if self.output == "nv12" else ""
            raise DecodeStageError(
                f"NVDEC returned a {shape} {tensor.dtype} frame; expected {self._shape} uint8 for a "
                f"{self.height}x{self.width} {self.output} frame (parameter sets and sample entry disagree?){hint}"
            )
        return tensor.reshape(self._shape)

    def _size_matches(self) -> bool:
        """Whether the decoder's current picture size is the session's (a member's parameter
        sets may claim another size than its sample entry)."""
        return (int(self._decoder.GetWidth()), int(self._decoder.GetHeight())) == (self.width, self.height)

    def decode(self, jobs: list[Job]) -> None:
        """Write every job's frames into its output rows on ``self.stream`` (synchronize it
        before reading them). Each job's ``out`` holds rows of this session's format.

        Raises:
            DecodeStageError: a frame returned out of the order sent, missing, or of another
                size than the member records.
            IndexError: a wanted frame outside its member.
        """
        sent: list[int] = []
        seen: list[int] = []
        route: dict[int, tuple[torch.Tensor, tuple[int, ...]]] = {}
        keep = []  # buffers Decode reads from, alive until it returns
        flushed = False
        for number, job in enumerate(jobs):
            for frame, rows in zip(job.wanted, job.rows):
                route[(number << 32) | frame] = (job.out, rows)
        with torch.cuda.stream(self.stream):
            try:
                for number, job in enumerate(jobs):
                    member: MemberStream = job.opened.handle
                    stream = member.stream
                    buffer = np.frombuffer(stream.data, dtype=np.uint8)
                    keep.append(buffer)
                    base, starts = buffer.ctypes.data, stream.starts
                    for j, first in packets(member.layout, job.wanted):
                        if first:  # behind the parameter sets: a small copy per GOP run
                            packet = np.frombuffer(stream.packet(j, first=True), dtype=np.uint8)
                            keep.append(packet)
                            address, size = packet.ctypes.data, packet.size
                        else:
                            address, size = base + starts[j], starts[j + 1] - starts[j]
                        pts = (number << 32) | j
                        sent.append(pts)
                        self._take(self._send(address, size, pts), seen, route)
                flushed = True
                self._take(self._flush(), seen, route)
            finally:
                if not flushed:  # an error mid-batch: drain the decoder so the next batch starts clean
                    try:
                        self._flush()
                    except Exception:
                        pass
        self.counters["frames_fed"] += len(sent)
        if seen != sent:
            where = jobs[0].member.member_id if jobs else "?"
            raise DecodeStageError(
                f"{where} (+{len(jobs) - 1} members): NVDEC returned {len(seen)} frames for {len(sent)} sent, first difference at "
                f"{next((i for i, (a, b) in enumerate(zip(seen, sent)) if a != b), min(len(seen), len(sent)))}; "
                "refusing to guess which frame is which"
            )

    def _take(self, frames, seen: list[int], route: dict) -> None:
        if frames and self._direct and not self._size_matches():
            raise DecodeStageError(
                f"NVDEC decodes {self._decoder.GetWidth()}x{self._decoder.GetHeight()} (WxH) pictures; the "
                f"member records {self.width}x{self.height} (its parameter sets and sample entry disagree)"
            )
        for decoded in frames:
            pts = int(decoded.getPTS())
            seen.append(pts)
            target = route.get(pts)
            if target is None:
                continue  # a GOP lead-in frame: decoded to reach a wanted one, not kept
            out, rows = target
            if self._direct is None:
                self._direct = self._can_copy_directly(decoded)
            copy = _device_copy() if self._direct else None  # _direct is True only where the copy exists
            if copy is not None:
                source = int(decoded.GetPtrToPlane(0))
                for row in rows:
                    status = copy(out.data_ptr() + row * self._frame_bytes, source, self._frame_bytes, self.stream.cuda_stream)
                    if status != 0:
                        raise DecodeStageError(f"copying a decoded frame failed (CUDA driver error {status})")
                self.counters["driver_copies"] += len(rows)
            else:
                frame = self._frame(decoded)
                for row in rows:
                    out[row].copy_(frame)

    def _can_copy_directly(self, decoded) -> bool:
        """Decided on a session's first frame: the frame is one contiguous block of exactly one
        output row's bytes at ``GetPtrToPlane(0)``, and the decoder reports its picture size
        (checked after every ``Decode`` from then on). Otherwise frames go through torch, each
        checked for its size."""
        tensor = self._frame(decoded)  # raises on a frame of another size
        try:
            sized = self._size_matches()
        except (AttributeError, TypeError, ValueError):
            return False
        return sized and tensor.is_contiguous() and tensor.data_ptr() == int(decoded.GetPtrToPlane(0))


class NvdecBackend(DecodeBackend):
    """NVDEC through PyNvVideoCodec (module docstring).

    Decodes ``CODECS`` (H.264 and HEVC: NVDEC on A100/H100/H200 has no AV1).

    Options:
        colour: ``"exact"`` (default): NV12 converted with FFmpeg's arithmetic where the
            member's colour signalling allows it, else NVDEC's RGB; ``"nvdec"``: always
            NVDEC's RGB (PyNvVideoCodec's conversion, up to 2 levels from the CPU path's).
    """

    name = "nvdec"
    device_type = "cuda"

    def __init__(self, device: torch.device, *, colour: Literal["exact", "nvdec"] = "exact"):
        super().__init__(device)
        if colour not in ("exact", "nvdec"):
            raise ArgumentError(f"nvdec option colour={colour!r} is not one of 'exact', 'nvdec'")
        self.colour = colour
        self._local = threading.local()
        # Sessions live in their thread's storage and go with the thread (a wrap() thread per
        # epoch): only weakly listed here for their counters, which outlive them.
        self._sessions: weakref.WeakSet[NvdecSession] = weakref.WeakSet()
        self._retired = {"frames_fed": 0, "flushes": 0, "driver_copies": 0}
        self._lock = threading.Lock()
        self._inexact = 0  # members given NVDEC's RGB because their colour cannot be matched exactly

    @classmethod
    def unavailable(cls) -> str | None:
        reason = nvdec_unavailable()
        return None if reason is None else f"NVDEC cannot decode here: {reason}"

    codecs = CODECS

    @classmethod
    def refuses_frames(cls, codec: str, height: int, width: int) -> str | None:
        return nvdec_size_refusal(codec, height, width, where=f"{codec} {height}x{width}") if codec in CODECS else None

    def refuses(self, member: EncodedFrames) -> str | None:
        if member.codec not in CODECS:
            return (
                f"codec {member.codec!r} cannot be decoded by NVDEC on A100/H100; "
                "repack with `lerobot-shards pack --video hevc` (or h264)"
            )
        return None

    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        where = member.member_id
        height, width = member.frame_size if member.frame_size is not None else (None, None)
        # The one set of rules `lerobot-shards info` says NVDEC's verdict from (nvdec_rules.py).
        refusal, layout = nvdec_refusal(
            member.member_bytes(), member.codec, where=where, frames=member.frames, height=height, width=width
        )
        if refusal is not None:
            raise DecodeStageError(refusal)
        assert layout is not None
        check_frame_spec((layout.height, layout.width, layout.samples), spec)
        config = stream_config(layout.codec, layout.codec_config, where=where)
        stream = elementary_stream(member.member_bytes(), layout, config, where=where)
        height, width = frame_size(member, spec, layout)
        exact = self._colour(layout, config, stream, height, width, where) if self.colour == "exact" else None
        if exact is None:
            with self._lock:
                self._inexact += 1
        return Opened(
            self,
            MemberStream(where=where, layout=layout, stream=stream),
            height,
            width,
            output="nv12" if exact is not None else "rgb",
            colour=exact,
        )

    @staticmethod
    def _colour(layout: Mp4Layout, config, stream: ElementaryStream, height: int, width: int, where: str):
        """The member's exact colour conversion, or None (see ``colour.resolve``)."""
        if stream.foreign_sps or len(config.sequence_parameter_sets) != 1:
            return None  # several sequence parameter sets: which one a frame uses is the stream's business
        try:
            signal = signal_type(layout.codec, config.sequence_parameter_sets[0], where=where)
        except FormatError:
            return None  # NVDEC's own parser decides; its RGB is then what the member gets
        spec, _ = colour_conversion.resolve(signal, layout.colour_boxes, height, width)
        return spec

    def _session(self, codec: str, height: int, width: int, output: Output) -> NvdecSession:
        """This thread's NVDEC session for the codec, frame size and output format."""
        sessions = getattr(self._local, "sessions", None)
        if sessions is None:
            sessions = self._local.sessions = {}
        key = (codec, height, width, output)
        if key not in sessions:
            session = sessions[key] = NvdecSession(codec, height, width, output, self.device)
            with self._lock:
                self._sessions.add(session)
            weakref.finalize(session, self._retire, session.counters)
        return sessions[key]

    def _retire(self, counters: dict[str, int]) -> None:
        with self._lock:
            for name, value in counters.items():
                self._retired[name] += value

    def decode(self, jobs: list[Job]) -> None:
        by_session: dict[NvdecSession, list[Job]] = {}
        for job in jobs:
            member: MemberStream = job.opened.handle
            session = self._session(member.layout.codec, job.opened.height, job.opened.width, job.opened.output)
            by_session.setdefault(session, []).append(job)
        for session, share in by_session.items():
            try:
                session.decode(share)
            finally:  # also after an error: no copy may still be writing when the caller frees the outputs
                session.stream.synchronize()

    def counters(self) -> dict[str, int]:
        with self._lock:
            totals = {**self._retired, "inexact_colour_members": self._inexact}
            live = list(self._sessions)
        for session in live:
            for name in ("frames_fed", "flushes", "driver_copies"):
                totals[name] += session.counters[name]
        return totals

    def close(self) -> None:
        """Drop the calling thread's sessions (other threads' go with their threads)."""
        self._local = threading.local()
