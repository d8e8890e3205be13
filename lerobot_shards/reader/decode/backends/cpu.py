"""What the CPU backends share. A CPU backend is a class with a ``member_decoder``: the workers'
decoders (``lerobot_shards.reader.decode.frames.CpuDecoders``) and ``DecodeStage`` both take it
from the one table (``table.BACKENDS``), open members through ``open_member`` (the bounds of
``check_mp4`` first, errors named) and decode through ``decode_frames``."""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import torch

from lerobot_shards.core.errors import DecodeError, FormatError
from lerobot_shards.core.format import check_mp4
from lerobot_shards.reader.decode.backends.base import DecodeBackend, Job, Opened, frame_size, write_rows
from lerobot_shards.reader.decode.spec import EpisodeDecoder, FrameSpec
from lerobot_shards.reader.decode.wire import EncodedFrames


class CpuDecoderBackend(DecodeBackend):
    """A backend decoding one member at a time on the CPU (frames written to their rows on the
    stage's device: the CPU, or the GPU for a CUDA stage's fallback). A subclass names itself
    and says how a member's decoder is made."""

    device_type = "cpu"
    # Whether it decodes depth videos to their 12-bit codes (uint16 (T, 1, H, W), as LeRobot
    # does); depth members go to a backend that does, whichever decodes colour.
    depth: ClassVar[bool] = False

    @classmethod
    @abstractmethod
    def member_decoder(cls, data: bytes, spec: FrameSpec | None, *, depth: bool = False) -> EpisodeDecoder:
        """A decoder over one member's bytes (already checked by ``open_member``); ``spec`` is
        checked before any frame is decoded."""

    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        decoder = open_member(type(self), member.member_bytes(), where=member.member_id, spec=spec)
        return Opened(self, decoder, *frame_size(member, spec))

    def decode(self, jobs: list[Job]) -> None:
        for job in jobs:
            write_rows(job, decode_frames(job.opened.handle, list(job.wanted), where=job.member.member_id))


def open_member(
    backend: type[CpuDecoderBackend], data: bytes, *, where: str, spec: FrameSpec | None = None, depth: bool = False
) -> EpisodeDecoder:
    """``backend``'s decoder over one member's bytes, after the format's bounds.

    Raises:
        FormatError: the member's mp4 boxes claim more than the format allows (named).
        DecodeError: the member does not open, or holds other frames than ``spec``.
    """
    # Before FFmpeg sees the bytes: sample tables bounded by what they expand to, and the GOP
    # (frames decoded per requested frame) bounded (lerobot_shards/core/format/mp4.py).
    if spec is not None:
        check_mp4(data, where=where, frames=spec.frames, height=spec.height, width=spec.width)
    else:
        check_mp4(data, where=where)
    try:
        return backend.member_decoder(data, spec, depth=depth)
    except (DecodeError, FormatError) as err:  # what the member is, named with where it is
        raise type(err)(f"{where}: {err}") from None
    except Exception as err:
        raise DecodeError(f"{where}: cannot open video ({type(err).__name__}: {err})") from err


def decode_frames(decoder: EpisodeDecoder, indices: list[int], *, where: str) -> torch.Tensor:
    """``decoder``'s frames at ``indices`` (uint8 ``(T, C, H, W)``, in the order asked).

    Raises:
        DecodeError: names the member and the frames.
    """
    try:
        return decoder.frames(indices)
    except Exception as err:
        raise DecodeError(f"{where}: cannot decode frames {indices} ({type(err).__name__}: {err})") from err
