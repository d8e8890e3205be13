"""torchcodec (FFmpeg) on the CPU: LeRobot's own decoder, so its frames are LeRobot's (the
default on the CPU). ``TorchCodecDecoder`` also serves a CUDA build (``torchcodec_cuda``)."""

from __future__ import annotations

import torch

from lerobot_shards.core.errors import DecodeError
from lerobot_shards.reader.decode.backends.cpu import CpuDecoderBackend
from lerobot_shards.reader.decode.spec import EpisodeDecoder, FrameSpec, check_frame_spec


class TorchCodecDecoder:
    """torchcodec's decoder over one member's bytes, on the CPU or on ``device`` (CUDA):
    ``spec`` checked when it opens, each decode checked for the frame size."""

    def __init__(self, data: bytes, spec: FrameSpec | None, device: str = "cpu"):
        # torchcodec's public name; its package re-exports it without listing it in __all__.
        from torchcodec.decoders import VideoDecoder  # pyright: ignore[reportPrivateImportUsage]

        # "exact" scans the (small, per-episode) member once, so frame j is exactly row j.
        self._decoder = VideoDecoder(data, seek_mode="exact", device=device)
        metadata = self._decoder.metadata
        height, width, frames = metadata.height, metadata.width, metadata.num_frames
        if height is None or width is None or frames is None:
            raise DecodeError(f"torchcodec reads no frame size or count from the member ({height}x{width}, {frames} frames)")
        check_frame_spec((height, width, frames), spec)
        self._spec = spec

    def frames(self, indices: list[int]) -> torch.Tensor:
        data = self._decoder.get_frames_at(indices=indices).data
        if self._spec is not None and tuple(data.shape[-2:]) != (self._spec.height, self._spec.width):
            raise DecodeError(f"decoded frames are {tuple(data.shape[-2:])}, expected {(self._spec.height, self._spec.width)}")
        return data


def torchcodec_imports() -> bool:
    """Whether torchcodec's decoders import here (they need FFmpeg's shared libraries)."""
    try:
        import torchcodec.decoders  # noqa: F401

        return True
    except Exception:  # torchcodec raises RuntimeError/OSError when FFmpeg libraries are missing
        return False


class TorchCodecBackend(CpuDecoderBackend):
    name = "torchcodec"

    @classmethod
    def unavailable(cls) -> str | None:
        if not torchcodec_imports():
            return "torchcodec cannot be imported (it needs FFmpeg's shared libraries); pip install torchcodec"
        return None

    @classmethod
    def member_decoder(cls, data: bytes, spec: FrameSpec | None, *, depth: bool = False) -> EpisodeDecoder:
        return TorchCodecDecoder(data, spec)
