"""Mixtures of packs: the sources file of a packing array, the array task, ``mixture.json``."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.mixture.compile": ["table_to_parquet"],
    "lerobot_shards.packer.mixture.create": ["create_mixture", "scan_datasets"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
