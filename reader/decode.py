"""The decode stage: compressed per-episode mp4 bytes + frame indices -> uint8 CHW frames.

Kept separate and swappable: CPU decode runs in DataLoader workers today; a GPU (NVDEC)
stage can take the same inputs (bytes, indices) in the training process later. torchcodec
decodes from memory; PyAV is the fallback when torchcodec cannot be imported.
"""

from __future__ import annotations

import io
from typing import Literal, Protocol

import numpy as np
import torch


class DecodeError(RuntimeError):
    """A member failed to decode; the message names shard, episode and camera."""


class EpisodeDecoder(Protocol):
    """Decodes frames of one in-memory episode mp4."""

    def frames(self, indices: list[int]) -> torch.Tensor:
        """Return uint8 frames (len(indices), C, H, W) in the order asked."""
        ...


class _TorchCodecDecoder:
    def __init__(self, data: bytes):
        from torchcodec.decoders import VideoDecoder

        # "exact" scans the (small, per-episode) member once, so frame j is exactly row j.
        self._decoder = VideoDecoder(data, seek_mode="exact")

    def frames(self, indices: list[int]) -> torch.Tensor:
        return self._decoder.get_frames_at(indices=indices).data


class _PyAVDecoder:
    def __init__(self, data: bytes):
        self._data = data

    def frames(self, indices: list[int]) -> torch.Tensor:
        import av

        wanted = sorted(set(indices))
        found: dict[int, np.ndarray] = {}
        with av.open(io.BytesIO(self._data)) as container:
            for position, frame in enumerate(container.decode(video=0)):
                if position in wanted:
                    found[position] = frame.to_ndarray(format="rgb24")
                if position >= wanted[-1]:
                    break
        missing = [i for i in wanted if i not in found]
        if missing:
            raise IndexError(f"frames {missing} beyond the end of the video")
        return torch.from_numpy(np.stack([found[i] for i in indices])).permute(0, 3, 1, 2).contiguous()


def available_backend() -> Literal["torchcodec", "pyav"]:
    """The backend ``"auto"`` picks: torchcodec when it imports, else PyAV."""
    try:
        import torchcodec.decoders  # noqa: F401

        return "torchcodec"
    except Exception:  # torchcodec raises RuntimeError/OSError when FFmpeg libraries are missing
        return "pyav"


class CpuDecodeStage:
    """Opens decoders on member bytes and decodes frame indices on the CPU.

    ``backend="auto"`` uses torchcodec (bit-identical to LeRobot's default decode) and falls
    back to PyAV; ``stage.backend`` says which is used.
    """

    def __init__(self, backend: Literal["auto", "torchcodec", "pyav"] = "auto"):
        if backend not in ("auto", "torchcodec", "pyav"):
            raise ValueError(f"decoder backend {backend!r} is not one of 'auto', 'torchcodec', 'pyav'")
        self.backend = available_backend() if backend == "auto" else backend

    def open(self, data: bytes, *, where: str) -> EpisodeDecoder:
        try:
            return _TorchCodecDecoder(data) if self.backend == "torchcodec" else _PyAVDecoder(data)
        except Exception as err:
            raise DecodeError(f"{where}: cannot open video ({type(err).__name__}: {err})") from err

    @staticmethod
    def decode(decoder: EpisodeDecoder, indices: list[int], *, where: str) -> torch.Tensor:
        try:
            return decoder.frames(indices)
        except Exception as err:
            raise DecodeError(f"{where}: cannot decode frames {indices} ({type(err).__name__}: {err})") from err
