"""What runs inside one consumer: building samples (and batches) from admitted episodes,
mixture harmonization, and the counters workers publish."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.runtime.environment": ["decode_threads_for", "detect_world", "split_threads"],
    "lerobot_shards.reader.runtime.side_by_side": ["SideBySide"],
    "lerobot_shards.reader.runtime.sample_builder": ["SampleBuilder"],
    "lerobot_shards.reader.runtime.consumer": ["Consumer", "make_sample_builder"],
    "lerobot_shards.reader.runtime.stats": ["SharedStats"],
    "lerobot_shards.reader.runtime.harmonize": ["DatasetFeatures", "FeatureHarmonizer"],
    "lerobot_shards.reader.runtime.batching": ["batches", "collate_batch"],
    "lerobot_shards.reader.runtime.build_ahead": ["BuiltAhead"],
    "lerobot_shards.reader.runtime.frame_ring": ["FrameRing", "SlotFlags"],
    "lerobot_shards.reader.runtime.map_batches": ["MapBatches", "SamplerOrder"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
