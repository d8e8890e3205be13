"""lerobot-shards reader: stream packed LeRobot datasets into PyTorch.

Never imports ``packer``; the packed format is defined in ``reader.format``. Names are
imported lazily (PEP 562) so that ``reader.format`` and the planning modules load without
torch: the packer uses them on CPU nodes where importing torch is pure start-up cost.
"""

from importlib import import_module

_EXPORTS = {
    "PackedDataset": "reader.dataset",
    "AnchorSequence": "reader.dataset",
    "DecodeError": "reader.decode",
    "EpisodeDataError": "reader.episode_pool",
    "PrefetchError": "reader.prefetch",
    "MixtureDataset": "reader.mixture",
    "FORMAT_VERSION": "reader.format",
    "FormatError": "reader.format",
    "Manifest": "reader.format",
    "UnsupportedFormatVersionError": "reader.format",
    "ObjectNotFoundError": "reader.storage",
    "RetryPolicy": "reader.storage",
    "StorageError": "reader.storage",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reader' has no attribute {name!r}")
