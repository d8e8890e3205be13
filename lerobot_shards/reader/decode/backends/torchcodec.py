"""torchcodec (FFmpeg) on the CPU: LeRobot's own decoder, so its frames are LeRobot's."""

from __future__ import annotations

from lerobot_shards.reader.decode.backends.cpu import CpuDecoderBackend
from lerobot_shards.reader.decode.frames import available_backend


class TorchCodecBackend(CpuDecoderBackend):
    name = decoder = "torchcodec"

    @classmethod
    def unavailable(cls) -> str | None:
        if available_backend() != "torchcodec":
            return "torchcodec cannot be imported (it needs FFmpeg's shared libraries); pip install torchcodec"
        return None
