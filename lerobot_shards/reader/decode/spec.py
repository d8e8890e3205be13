"""What a member must decode to, and the one check every decoder (CPU and GPU) applies
before a frame is materialized; the interface of a member's decoder in the workers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from lerobot_shards.core.errors import DecodeError


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
