"""lerobot-shards reader: stream packed LeRobot datasets into PyTorch.

Never imports ``packer``; the packed format is defined in ``reader.format``. Names are
imported lazily (PEP 562) so that ``reader.format`` and the planning modules load without
torch: the packer uses them on CPU nodes where importing torch is pure start-up cost.
"""

from reader.exports import lazy_exports

_EXPORTS = {
    "reader.dataset": ["PackedDataset", "AnchorSequence"],
    "reader.mixture": ["MixtureDataset"],
    "reader.read_options": ["ReadOptions"],
    "reader.lerobot_meta": ["PackedMeta", "aggregate_stats"],
    "reader.loader": ["BatchLoader", "to_device"],
    "reader.decode.stage": ["DecodeStage"],
    "reader.format": ["FORMAT_VERSION", "Manifest"],
    "reader.storage": ["RetryPolicy"],
    # The one error hierarchy (reader.errors): catch LeRobotShardsError for all of ours.
    "reader.errors": [
        "LeRobotShardsError", "FormatError", "BoundExceededError", "UnsupportedFormatVersionError", "IntegrityError", "PinMismatchError",
        "EpisodeDataError", "MixtureSpecError", "StorageError", "ObjectNotFoundError", "PlanError",
        "ResumeStateError", "ResumeWarning", "WindowWarning", "MixtureFeatureWarning", "WindowError", "PredicateError", "LeRobotTrainError", "DecodeError", "DecodeStageError", "PrefetchError",
        "ResourceLimitError", "AccessDeniedError", "ShortReadError", "HarmonizeError", "ArgumentError",
    ],
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
