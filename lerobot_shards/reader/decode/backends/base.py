"""The interface every decode backend implements, and the pieces backends share.

A backend turns opened members into frames on one kind of device. ``DecodeStage`` (the
scheduler) owns everything else: which members are opened and kept, the threads, the
output buffers and their layout. Per batch it opens the members it does not hold
(``open``), allocates each camera's output, and hands each thread a list of ``Job``s
(``decode``), whose frames the backend writes into the rows the job names.

A backend declares the format it writes: ``"rgb"`` (``(rows, 3, H, W)`` uint8) or ``"nv12"``
(``(rows, H * 3 // 2, W)`` uint8, converted by the stage with ``lerobot_shards.reader.decode.colour``);
``open`` may choose per member (``Opened.output``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.format import check_mp4
from lerobot_shards.reader.decode.colour import ColourSpec
from lerobot_shards.reader.decode.spec import FrameSpec
from lerobot_shards.reader.decode.wire import EncodedFrames

Output = Literal["rgb", "nv12"]


@dataclass(frozen=True)
class Opened:
    """A member a backend has checked and opened: what decodes it (``handle``, the backend's
    own), its frame size, the format it writes, and for NV12 the colour conversion."""

    backend: DecodeBackend
    handle: Any  # the backend's own decoder object: only the backend that opened it reads it
    height: int
    width: int
    output: Output = "rgb"
    colour: ColourSpec | None = None


@dataclass(frozen=True)
class Job:
    """Decode ``wanted`` (distinct, ascending) of a member; frame ``wanted[i]`` goes to rows
    ``rows[i]`` of ``out``."""

    member: EncodedFrames
    opened: Opened
    wanted: tuple[int, ...]
    rows: tuple[tuple[int, ...], ...]
    out: torch.Tensor


class DecodeBackend(ABC):
    """One way to decode members on one kind of device (see the module docstring).

    A backend object serves one ``DecodeStage``; ``decode`` is called from several threads
    at once, each with its own jobs.
    """

    name: ClassVar[str]
    device_type: ClassVar[str]  # "cpu" or "cuda"
    # The member codecs it decodes (None: any FFmpeg decodes); a dataset that ships another is
    # refused when it is made, not at its first batch.
    codecs: ClassVar[tuple[str, ...] | None] = None

    @classmethod
    def refuses_frames(cls, codec: str, height: int, width: int) -> str | None:
        """Why it cannot decode ``codec`` frames of this size (a hardware decoder's limits), or
        None; a dataset whose camera it refuses is refused when made, naming the camera."""
        return None

    def __init__(self, device: torch.device, **options):
        if options:
            raise ArgumentError(f"backend {self.name!r} takes no options, got {sorted(options)}")
        self.device = device

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this backend cannot run in this process (a library or device missing), or None."""
        return None

    def refuses(self, member: EncodedFrames) -> str | None:
        """Why this backend cannot decode ``member`` at all (its codec, say), before opening it."""
        return None

    @abstractmethod
    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        """Check ``member`` (its bytes, against ``spec`` when given) and open it.

        Raises:
            DecodeError, FormatError, DecodeStageError: the member is damaged, hostile, or not
                what the dataset records (the stage names the member).
        """

    @abstractmethod
    def decode(self, jobs: list[Job]) -> None:
        """Write every job's frames into its rows; complete when this returns (for CUDA, on the
        calling thread's current stream or synchronized).

        Raises:
            DecodeError, DecodeStageError: a frame that cannot be decoded, or that the
                decoder returns other than asked.
        """

    def counters(self) -> dict[str, int]:
        """Backend-specific counters, summed into ``DecodeStage.stats()``."""
        return {}

    def close(self) -> None:  # noqa: B027  (optional: most backends hold nothing to release)
        """Release what the backend holds (decoder sessions)."""


def frame_size(member: EncodedFrames, spec: FrameSpec | None, layout=None) -> tuple[int, int]:
    """``(height, width)`` of a member's frames: what the dataset records, else its sample entry."""
    if spec is not None:
        return spec.height, spec.width
    if member.frame_size is not None:
        height, width = member.frame_size
        return height, width
    layout = layout or check_mp4(member.member_bytes(), where=member.member_id)
    return layout.height, layout.width


def write_rows(job: Job, frames: torch.Tensor) -> None:
    """Put a per-member decode's ``(len(wanted), ...)`` frames into the job's rows (on the
    output's device, one copy per destination row)."""
    frames = frames.to(job.out.device, non_blocking=False)
    sources, targets = [], []
    for position, rows in enumerate(job.rows):
        sources.extend([position] * len(rows))
        targets.extend(rows)
    index = torch.tensor(targets, device=job.out.device)
    job.out.index_copy_(0, index, frames.index_select(0, torch.tensor(sources, device=job.out.device)))
