"""Bytes and rows in: storage with retries, the local disk cache, the checked index of a
packed dataset, and the episode pool that fetches episodes ahead of need."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.fetch.disk_cache": ["DiskCache", "range_key"],
    "lerobot_shards.reader.fetch.catalog": ["CatalogPack", "EpisodeCatalog"],
    "lerobot_shards.reader.fetch.packed_index": ["PackedIndex"],
    "lerobot_shards.reader.fetch.episode_pool": ["EpisodeFetcher", "column_values"],
    "lerobot_shards.reader.fetch.prefetch": ["Prefetcher", "PrefetchError"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
