"""NVDEC decode of H.264/HEVC members through PyNvVideoCodec's core decoder.

Random access through a container decoder (PyNvVideoCodec's ``SimpleDecoder``, torchcodec's
CUDA decoder) costs a demuxer seek and a decoder flush per jump: measured on an H100, that
CPU work held the 7 NVDEC engines 70-80% idle. Here the decoder is fed an elementary stream
instead (``reader/decode/annexb.py``): each member converted once to Annex-B, and per batch
the runs of samples that reach the wanted frames, one packet per picture, the batch's members
back to back through one session per thread and frame format, one end-of-stream per batch.
No demuxer, no seek, no flush per access.

Frames come out as planar RGB (PyNvVideoCodec's conversion on the session's CUDA stream),
tagged with the timestamp sent with their packet (member and frame): every returned frame
must be the next one sent, or the batch is refused (``DecodeStageError``), never shifted.
Frames are copied out by the CUDA driver's asynchronous copy, a ctypes call that releases the
GIL (``from_dlpack`` + ``copy_`` cost ~55 us of Python per frame under it).

Needs a CUDA device, the driver's ``libnvcuvid`` and ``pip install pynvvideocodec``;
``nvdec_unavailable()`` says which is missing. Nothing here runs without a GPU, so the
stream it sends is tested on CPU by decoding the same packets with FFmpeg.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np
import torch

from reader.decode.annexb import ElementaryStream, packets
from reader.errors import DecodeStageError
from reader.format.mp4 import Mp4Layout

_lock = threading.Lock()
_module = None


def _nvc():
    global _module
    with _lock:
        if _module is None:
            import PyNvVideoCodec

            _module = PyNvVideoCodec
    return _module


_copy_function = None


def _device_copy():
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
        return (f"the NVIDIA video decode library libnvcuvid.so.1 cannot be loaded ({err}); in a container, start it "
                "with NVIDIA_DRIVER_CAPABILITIES=compute,utility,video")
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
    """One NVDEC decoder for members of one codec and frame size, used by one thread, on its
    own CUDA stream.

    A batch's members go through it back to back (``decode``): NVDEC works ahead of the
    frames handed back (display delay), and one end-of-stream per batch hands over the rest.
    Each packet's timestamp names its member and frame, and frames must come back in the order
    sent: the check that no frame is ever attributed to another.

    Raises:
        DecodeStageError: the decoder cannot be created (named, with the library's message).
    """

    def __init__(self, codec: str, height: int, width: int, device: torch.device):
        nvc = _nvc()
        self.codec, self.height, self.width, self.device = codec, height, width, device
        self.stream = torch.cuda.Stream(device=device)
        try:
            self._decoder = nvc.CreateDecoder(
                gpuid=device.index or 0,
                codec=getattr(nvc.cudaVideoCodec, "HEVC" if codec == "hevc" else "H264"),
                cudacontext=0,
                cudastream=self.stream.cuda_stream,
                usedevicememory=True,
                outputColorType=nvc.OutputColorType.RGBP,
                latency=nvc.DisplayDecodeLatencyType.NATIVE,
            )
        except Exception as err:
            raise DecodeStageError(f"cannot create an NVDEC {codec} decoder on {device} ({type(err).__name__}: {err})") from err
        self._packet = nvc.PacketData
        self._end_of_picture = nvc.VideoPacketFlag.ENDOFPICTURE
        self._end_of_stream = nvc.VideoPacketFlag.ENDOFSTREAM
        self.counters = {"frames_fed": 0, "flushes": 0, "driver_copies": 0}
        self._frame_bytes = 3 * height * width
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
        """A decoded frame as a (3, H, W) tensor, refused unless it is exactly that size."""
        tensor = torch.from_dlpack(decoded)
        shape = tuple(tensor.shape)
        if tensor.dtype != torch.uint8 or shape not in ((3, self.height, self.width), (3 * self.height, self.width)):
            raise DecodeStageError(f"NVDEC returned a {shape} {tensor.dtype} frame; the member records {self.height}x{self.width} "
                                   "(its parameter sets and its sample entry disagree)")
        return tensor.reshape(3, self.height, self.width)

    def _size_matches(self) -> bool:
        """Whether the decoder's current picture size is the session's (a member's parameter
        sets may claim another size than its sample entry)."""
        return (int(self._decoder.GetWidth()), int(self._decoder.GetHeight())) == (self.width, self.height)

    def decode(self, jobs: list[tuple[MemberStream, list[int]]]) -> list[torch.Tensor]:
        """For each ``(member, wanted)`` (frames distinct, ascending), its frames as a
        (len(wanted), 3, H, W) uint8 tensor on this session's device, allocated and written on
        ``self.stream`` (synchronize it before reading).

        Raises:
            DecodeStageError: a frame returned out of the order sent, missing, or of another
                size than the member records.
            IndexError: a wanted frame outside its member.
        """
        sent: list[int] = []
        seen: list[int] = []
        route: dict[int, tuple[torch.Tensor, int]] = {}
        outs = []
        keep = []  # buffers Decode reads from, alive until it returns
        flushed = False
        with torch.cuda.stream(self.stream):
            try:
                for number, (member, wanted) in enumerate(jobs):
                    # Allocated on the stream that writes it: its memory is reused only after that.
                    out = torch.empty((len(wanted), 3, self.height, self.width), dtype=torch.uint8, device=self.device)
                    outs.append(out)
                    for slot, j in enumerate(wanted):
                        route[(number << 32) | j] = (out, slot)
                for number, (member, wanted) in enumerate(jobs):
                    stream = member.stream
                    buffer = np.frombuffer(stream.data, dtype=np.uint8)
                    keep.append(buffer)
                    base, starts = buffer.ctypes.data, stream.starts
                    for j, first in packets(member.layout, wanted):
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
                    except Exception:  # noqa: BLE001 - the first error is the one raised
                        pass
        self.counters["frames_fed"] += len(sent)
        if seen != sent:
            where = jobs[0][0].where if jobs else "?"
            raise DecodeStageError(
                f"{where} (+{len(jobs) - 1} members): NVDEC returned {len(seen)} frames for {len(sent)} sent, first difference at "
                f"{next((i for i, (a, b) in enumerate(zip(seen, sent)) if a != b), min(len(seen), len(sent)))}; "
                "refusing to guess which frame is which"
            )
        return outs

    def _take(self, frames, seen: list[int], route: dict) -> None:
        if frames and self._direct and not self._size_matches():
            raise DecodeStageError(f"NVDEC decodes {self._decoder.GetWidth()}x{self._decoder.GetHeight()} (WxH) pictures; the "
                                   f"member records {self.width}x{self.height} (its parameter sets and sample entry disagree)")
        for decoded in frames:
            pts = int(decoded.getPTS())
            seen.append(pts)
            target = route.get(pts)
            if target is None:
                continue  # a GOP lead-in frame: decoded to reach a wanted one, not kept
            out, slot = target
            if self._direct is None:
                self._direct = self._can_copy_directly(decoded)
            if self._direct:
                status = _device_copy()(out.data_ptr() + slot * self._frame_bytes, int(decoded.GetPtrToPlane(0)),
                                        self._frame_bytes, self.stream.cuda_stream)
                if status != 0:
                    raise DecodeStageError(f"copying a decoded frame failed (CUDA driver error {status})")
                self.counters["driver_copies"] += 1
            else:
                out[slot].copy_(self._frame(decoded))

    def _can_copy_directly(self, decoded) -> bool:
        """Decided on a session's first frame: the library's planar RGB is one contiguous
        block of exactly 3 x H x W bytes at ``GetPtrToPlane(0)``, and the decoder reports its
        picture size (checked after every ``Decode`` from then on). Otherwise frames go through
        torch, each checked for its size."""
        tensor = self._frame(decoded)  # raises on a frame of another size
        try:
            sized = self._size_matches()
        except (AttributeError, TypeError, ValueError):
            return False
        return sized and tensor.is_contiguous() and tensor.data_ptr() == int(decoded.GetPtrToPlane(0))
