"""PyAV (FFmpeg) on the CPU: the decoder every install has; frames bit-identical to torchcodec's."""

from __future__ import annotations

from lerobot_shards.reader.decode.backends.cpu import CpuDecoderBackend


class PyAVBackend(CpuDecoderBackend):
    name = decoder = "pyav"

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import av  # noqa: F401
        except ImportError as err:
            return f"PyAV cannot be imported ({err}); pip install av"
        return None
