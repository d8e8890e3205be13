"""``meta/info.json`` of a source: ``lerobot_shards.core.format.lerobot_info`` parses it (both halves
read it); the packer reports what it refuses as a ``SourceError``."""

from __future__ import annotations

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.lerobot_info import SUPPORTED_CODEBASE_VERSION, LeRobotInfo, parse_lerobot_info
from lerobot_shards.packer.errors import SourceError


def parse_info(data: bytes, *, where: str) -> LeRobotInfo:
    """``parse_lerobot_info`` for the packer.

    Raises:
        SourceError: what ``parse_lerobot_info`` raises as a ``FormatError``.
    """
    try:
        return parse_lerobot_info(data, where=where)
    except FormatError as err:
        raise SourceError(str(err)) from None


__all__ = ["SUPPORTED_CODEBASE_VERSION", "parse_info"]
