"""lerobot-shards reader: stream packed LeRobot datasets into PyTorch.

Never imports ``packer``; the packed format is defined in ``lerobot_shards.core.format``. Names are
imported lazily (PEP 562) so that ``lerobot_shards.core.format`` and the planning modules load without
torch: the packer uses them on CPU nodes where importing torch is pure start-up cost.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.dataset": ["PackedDataset", "AnchorSequence"],
    "lerobot_shards.reader.mixture": ["MixtureDataset"],
    "lerobot_shards.reader.map_dataset": ["PackedLeRobotDataset"],
    "lerobot_shards.reader.read_options": ["ReadOptions"],
    "lerobot_shards.reader.lerobot_meta": ["PackedMeta", "aggregate_stats"],
    "lerobot_shards.reader.loader": ["BatchLoader", "to_device", "first_batch_here_by_shape", "FIRST_BATCH_HERE_MAX_PIXELS"],
    "lerobot_shards.reader.decode.stage": ["DecodeStage"],
    "lerobot_shards.core.format": ["FORMAT_VERSION", "Manifest"],
    "lerobot_shards.core.storage": ["RetryPolicy"],
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
