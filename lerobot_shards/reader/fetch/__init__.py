"""Bytes and rows in: the local disk cache, and the episode pool that fetches episodes ahead
of need (a pack's checked index and the episode catalog are ``lerobot_shards.core.pack``'s)."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.fetch.disk_cache": ["DiskCache", "range_key"],
    "lerobot_shards.reader.fetch.episode_pool": ["EpisodeFetcher", "column_values"],
    "lerobot_shards.reader.fetch.prefetch": ["Prefetcher", "PrefetchError"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
