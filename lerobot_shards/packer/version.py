"""The packer's version, as manifests record it (``packer_version``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def packer_version() -> str:
    """The installed ``lerobot-shards`` version, or ``0+unknown`` in a bare checkout."""
    try:
        return version("lerobot-shards")
    except PackageNotFoundError:
        return "0+unknown"
