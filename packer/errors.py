"""The packer's errors (part of the one hierarchy rooted at ``reader.errors.LeRobotShardsError``)."""

from __future__ import annotations

from reader.errors import LeRobotShardsError


class PackError(LeRobotShardsError, RuntimeError):
    """Packing failed; the message names the episode(s), file or shard involved."""


class FrameMismatchError(PackError):
    """A video holds a different number of frames than its episode has rows."""


__all__ = ["FrameMismatchError", "PackError"]
