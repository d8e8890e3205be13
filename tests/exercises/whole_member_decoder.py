"""Change exercise: a new CPU decoder, written as a newcomer would, in one file.

``WholeMemberBackend`` decodes a member's every frame once, on the first call, and serves later
calls from memory: a decoder for short episodes read many times (no seek, no decoder state
across calls). It uses FFmpeg through PyAV's plain API, not the project's PyAV decoder, so the
test that runs it shows the seam (``CpuDecoderBackend`` + one row of
``lerobot_shards.reader.decode.backends.table.BACKENDS``) is all a decoder needs: its name becomes
a ``decoder=`` choice, the workers' decoders and a ``DecodeStage`` both open members through it,
and its frames are checked against the dataset's record before any is served.

The row, as ``docs/ARCHITECTURE.md`` says to add it::

    BACKENDS[("whole", "cpu")] = WholeMemberBackend
"""

from __future__ import annotations

import io

import numpy as np
import torch

from lerobot_shards.core.errors import DecodeError
from lerobot_shards.reader.decode import EpisodeDecoder, FrameSpec, check_frame_spec
from lerobot_shards.reader.decode.backends import CpuDecoderBackend, PyAVBackend


class WholeMemberDecoder:
    """Every frame of one member as ``(H, W, 3)`` uint8 arrays, decoded on the first call."""

    decoded_members = 0  # members this class has decoded (the test counts the work)

    def __init__(self, data: bytes, spec: FrameSpec | None):
        self._data, self._spec = data, spec
        self._frames: list[np.ndarray] | None = None

    def _decode(self) -> list[np.ndarray]:
        import av
        from av.error import FFmpegError

        try:
            with av.open(io.BytesIO(self._data), mode="r") as container:
                frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        except (FFmpegError, IndexError) as err:
            raise DecodeError(f"the member does not decode ({err})") from None
        height, width = frames[0].shape[:2] if frames else (0, 0)
        check_frame_spec((height, width, len(frames)), self._spec)  # the record's size and count, before use
        WholeMemberDecoder.decoded_members += 1
        return frames

    def frames(self, indices: list[int]) -> torch.Tensor:
        """uint8 ``(len(indices), 3, H, W)``, in the order asked.

        Raises:
            IndexError: an index outside the member.
        """
        if self._frames is None:
            self._frames = self._decode()
        beyond = [i for i in indices if not 0 <= i < len(self._frames)]
        if beyond:
            raise IndexError(f"frames {beyond} beyond the end of the video")
        return torch.from_numpy(np.stack([self._frames[i] for i in indices])).permute(0, 3, 1, 2)

    def close(self) -> None:
        self._frames = None


class WholeMemberBackend(CpuDecoderBackend):
    """The table row's class: a name, whether it can run here, and how a member's decoder is made."""

    name = "whole"

    @classmethod
    def unavailable(cls) -> str | None:
        return PyAVBackend.unavailable()  # it needs what PyAV's backend needs: PyAV

    @classmethod
    def member_decoder(cls, data: bytes, spec: FrameSpec | None, *, depth: bool = False) -> EpisodeDecoder:
        return WholeMemberDecoder(data, spec)
