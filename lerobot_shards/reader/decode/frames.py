"""The decode stage: compressed per-episode mp4 bytes + frame indices -> uint8 CHW frames.

Kept separate and swappable: CPU decode runs in DataLoader workers today; a GPU (NVDEC)
stage can take the same inputs (bytes, indices) in the training process later. torchcodec
decodes from memory; PyAV is the fallback when torchcodec cannot be imported.
"""

from __future__ import annotations

import bisect
import io
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import torch

from lerobot_shards.core.errors import ArgumentError, DecodeError
from lerobot_shards.core.format import check_mp4


@dataclass(frozen=True)
class FrameSpec:
    """What a member must decode to, from the manifest and the index: ``frames`` frames of
    ``height`` x ``width``. A decoder checks it when it opens the member, before any frame
    is materialized, so a member that claims other sizes cannot allocate beyond them."""

    height: int
    width: int
    frames: int


class EpisodeDecoder(Protocol):
    """Decodes frames of one in-memory episode mp4."""

    def frames(self, indices: list[int]) -> torch.Tensor:
        """Return uint8 frames (len(indices), C, H, W) in the order asked."""
        ...


def check_frame_spec(found: tuple[int, int, int], spec: FrameSpec | None) -> None:
    """Raise unless a member holding ``found`` = (height, width, frames) matches ``spec``.

    Raises:
        DecodeError: names both, the one rule every decoder (CPU and GPU) applies.
    """
    if spec is not None and found != (spec.height, spec.width, spec.frames):
        raise DecodeError(
            f"the member holds {found[2]} frames of {found[0]}x{found[1]}; the dataset records "
            f"{spec.frames} frames of {spec.height}x{spec.width} (damaged or altered member)"
        )


class TorchCodecDecoder:
    """torchcodec's decoder over one member's bytes, on the CPU or on ``device`` (CUDA):
    ``spec`` checked when it opens, each decode checked for the frame size."""

    def __init__(self, data: bytes, spec: FrameSpec | None, device: str = "cpu"):
        from torchcodec.decoders import VideoDecoder

        # "exact" scans the (small, per-episode) member once, so frame j is exactly row j.
        self._decoder = VideoDecoder(data, seek_mode="exact", device=device)
        metadata = self._decoder.metadata
        check_frame_spec((metadata.height, metadata.width, metadata.num_frames), spec)
        self._spec = spec

    def frames(self, indices: list[int]) -> torch.Tensor:
        data = self._decoder.get_frames_at(indices=indices).data
        if self._spec is not None and tuple(data.shape[-2:]) != (self._spec.height, self._spec.width):
            raise DecodeError(f"decoded frames are {tuple(data.shape[-2:])}, expected {(self._spec.height, self._spec.width)}")
        return data


class _PyAVDecoder:
    """PyAV fallback: frame j is decoded from the keyframe at or before it (the GOP bound of
    ``check_mp4`` caps that cost), not from the start of the member. ``pixel_format`` is what
    frames are converted to: ``rgb24`` (uint8 ``(T, 3, H, W)``) or ``gray12le`` (a depth
    video's codes, uint16 ``(T, 1, H, W)``, as LeRobot decodes depth)."""

    def __init__(self, data: bytes, spec: FrameSpec | None, pixel_format: str = "rgb24"):
        import av

        self._data = data
        self._spec = spec
        self._format = pixel_format
        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            packets = [(p.pts, p.is_keyframe) for p in container.demux(stream) if p.size]
            check_frame_spec((stream.codec_context.height, stream.codec_context.width, len(packets)), spec)
        if any(pts is None for pts, _ in packets):
            self._pts, self._keys = None, None  # no timestamps to seek by: decode from the start
        else:
            self._pts = sorted(pts for pts, _ in packets)  # frame j is the j-th presentation time
            self._keys = sorted(pts for pts, key in packets if key)

    def _check_frame(self, frame, position) -> None:
        if self._spec is not None and (frame.height, frame.width) != (self._spec.height, self._spec.width):
            raise DecodeError(f"frame {position} is {frame.height}x{frame.width}, expected {self._spec.height}x{self._spec.width}")

    def _from_start(self, container, wanted: list[int], found: dict[int, np.ndarray]) -> None:
        container.seek(0)
        for position, frame in enumerate(container.decode(video=0)):
            self._check_frame(frame, position)
            if position in wanted:
                found[position] = frame.to_ndarray(format=self._format)
            if position >= wanted[-1]:
                break

    def frames(self, indices: list[int]) -> torch.Tensor:
        import av

        wanted = sorted(set(indices))
        if self._pts is not None and wanted and (wanted[0] < 0 or wanted[-1] >= len(self._pts)):
            raise IndexError(f"frames {[i for i in wanted if not 0 <= i < len(self._pts)]} beyond the end of the video")
        found: dict[int, np.ndarray] = {}
        with av.open(io.BytesIO(self._data)) as container:
            stream = container.streams.video[0]
            if self._pts is None:
                self._from_start(container, wanted, found)
            else:
                position_of = {pts: j for j, pts in enumerate(self._pts)}
                groups: dict[int, list[int]] = {}
                for j in wanted:
                    key = self._keys[max(bisect.bisect_right(self._keys, self._pts[j]) - 1, 0)]
                    groups.setdefault(key, []).append(j)
                for key, members in sorted(groups.items()):
                    container.seek(key, stream=stream, backward=True, any_frame=False)
                    last = self._pts[members[-1]]
                    for frame in container.decode(stream):
                        position = position_of.get(frame.pts)
                        self._check_frame(frame, position)
                        if position in members:
                            found[position] = frame.to_ndarray(format=self._format)
                        if frame.pts is None or frame.pts >= last:
                            break
                missing = [i for i in wanted if i not in found]
                if missing:  # a stream the seek did not land as expected on: decode from the start
                    self._from_start(container, missing, found)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise IndexError(f"frames {missing} beyond the end of the video")
        stacked = torch.from_numpy(np.stack([found[i] for i in indices]))
        if stacked.dim() == 3:  # one plane (gray formats): (T, H, W) -> (T, 1, H, W)
            return stacked.unsqueeze(1)
        return stacked.permute(0, 3, 1, 2).contiguous()


def available_backend() -> Literal["torchcodec", "pyav"]:
    """The backend ``"auto"`` picks: torchcodec when it imports, else PyAV."""
    try:
        import torchcodec.decoders  # noqa: F401

        return "torchcodec"
    except Exception:  # torchcodec raises RuntimeError/OSError when FFmpeg libraries are missing
        return "pyav"


class CpuDecoders:
    """Opens decoders on member bytes and decodes frame indices on the CPU, in the consumer
    (a factory of ``EpisodeDecoder``s; the ``DecodeStage`` decodes outside the workers).

    ``backend="auto"`` uses torchcodec (bit-identical to LeRobot's default decode) and falls
    back to PyAV; ``decoders.backend`` says which is used.
    """

    def __init__(self, backend: Literal["auto", "torchcodec", "pyav"] = "auto"):
        if backend not in ("auto", "torchcodec", "pyav"):
            raise ArgumentError(f"decoder backend {backend!r} is not one of 'auto', 'torchcodec', 'pyav'")
        self.backend = available_backend() if backend == "auto" else backend

    def open(self, data: bytes, *, where: str, spec: FrameSpec | None = None, depth: bool = False) -> EpisodeDecoder:
        """A decoder over one member's bytes; ``spec`` (frames and size it must hold) is
        checked before any frame is decoded. ``depth``: the member is a depth video, decoded
        to its 12-bit codes (uint16 ``(T, 1, H, W)``) with PyAV whatever the backend, as
        LeRobot decodes depth (torchcodec gives only RGB).

        Raises:
            FormatError: the member's mp4 boxes claim more than the format allows (named).
            DecodeError: the member does not open, or holds other frames than ``spec``.
        """
        # Before FFmpeg sees the bytes: sample tables bounded by what they expand to, and the
        # GOP (frames decoded per requested frame) bounded (lerobot_shards/core/format/mp4.py).
        if spec is not None:
            check_mp4(data, where=where, frames=spec.frames, height=spec.height, width=spec.width)
        else:
            check_mp4(data, where=where)
        try:
            if depth:
                return _PyAVDecoder(data, spec, pixel_format="gray12le")
            return TorchCodecDecoder(data, spec) if self.backend == "torchcodec" else _PyAVDecoder(data, spec)
        except DecodeError as err:
            raise DecodeError(f"{where}: {err}") from None
        except Exception as err:
            raise DecodeError(f"{where}: cannot open video ({type(err).__name__}: {err})") from err

    @staticmethod
    def decode(decoder: EpisodeDecoder, indices: list[int], *, where: str) -> torch.Tensor:
        try:
            return decoder.frames(indices)
        except Exception as err:
            raise DecodeError(f"{where}: cannot decode frames {indices} ({type(err).__name__}: {err})") from err
