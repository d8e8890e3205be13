"""Reading a finished pack, for the reader, the packer and the tools alike: its manifest and
indexes checked against the manifest (``packed_index``: ``PackedIndex``, ``read_manifest``,
``verified_read``), and every episode of one or more packs as columns (``catalog``:
``EpisodeCatalog``, built from opened packs or from a compiled mixture's tables)."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.core.pack.catalog": ["CatalogPack", "EpisodeCatalog", "ShardRef"],
    "lerobot_shards.core.pack.packed_index": [
        "PackedIndex",
        "check_packed_metadata",
        "read_manifest",
        "verified_read",
        "load_tasks",
    ],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
