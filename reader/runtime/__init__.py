"""What runs inside one consumer: building samples (and batches) from admitted episodes,
mixture harmonization, and the counters workers publish."""

from reader.exports import lazy_exports

_EXPORTS = {
    "reader.runtime.environment": ["decode_threads_for", "detect_world"],
    "reader.runtime.harmonize": ["DatasetFeatures", "FeatureHarmonizer"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
