"""lerobot-shards reader: stream packed LeRobot datasets into PyTorch.

Never imports ``packer``; the packed format is defined in ``reader.format``. Names are
imported lazily (PEP 562) so that ``reader.format`` and the planning modules load without
torch: the packer uses them on CPU nodes where importing torch is pure start-up cost.
"""

from importlib import import_module

_EXPORTS = {
    "PackedDataset": "reader.dataset",
    "AnchorSequence": "reader.dataset",
    "MixtureDataset": "reader.mixture",
    "BatchLoader": "reader.loader",
    "to_device": "reader.loader",
    "FORMAT_VERSION": "reader.format",
    "Manifest": "reader.format",
    "RetryPolicy": "reader.fetch.storage",
    # The one error hierarchy (reader.errors): catch LeRobotShardsError for all of ours.
    "LeRobotShardsError": "reader.errors",
    "FormatError": "reader.errors",
    "UnsupportedFormatVersionError": "reader.errors",
    "IntegrityError": "reader.errors",
    "PinMismatchError": "reader.errors",
    "EpisodeDataError": "reader.errors",
    "MixtureSpecError": "reader.errors",
    "StorageError": "reader.errors",
    "ObjectNotFoundError": "reader.errors",
    "PlanError": "reader.errors",
    "ResumeStateError": "reader.errors",
    "WindowError": "reader.errors",
    "DecodeError": "reader.errors",
    "DecodeStageError": "reader.errors",
    "PrefetchError": "reader.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'reader' has no attribute {name!r}")
