"""Bytes and rows in: storage with retries, the local disk cache, the checked index of a
packed dataset, and the episode pool that fetches episodes ahead of need."""

from reader.exports import lazy_exports

_EXPORTS = {
    "reader.fetch.disk_cache": ["DiskCache", "range_key"],
    "reader.fetch.catalog": ["CatalogPack", "EpisodeCatalog"],
    "reader.fetch.packed_index": ["PackedIndex"],
    "reader.fetch.episode_pool": ["EpisodeFetcher", "column_values"],
    "reader.fetch.prefetch": ["Prefetcher", "PrefetchError"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
