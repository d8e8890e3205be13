"""Mixtures of packs: the sources file of a packing array, the array task, ``mixture.json``."""

from reader.exports import lazy_exports

_EXPORTS = {
    "packer.mixture.compile": ["table_to_parquet"],
    "packer.mixture.create": ["create_mixture", "scan_datasets"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
