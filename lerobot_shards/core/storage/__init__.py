"""The one storage layer: objects under a root (a local path or any fsspec URL), read and
written with retries that end, by the reader and the packer alike.

- ``storage``: ``Storage``, one root's objects (reads, ranged reads, atomic writes, listings);
- ``backends``: what differs per storage system (client options, local or remote, which of its
  failures are transient, the fix a failure needs), a module each and one row per protocol
  (``backends/table.py``: ``BACKENDS``);
- ``retry``: ``RetryPolicy`` and the failure rules every system shares;
- ``ranges``: coalescing byte ranges into few requests (pure);
- ``local_files``: atomic local writes and the cleanup of their temp files.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.core.storage.backends.base": ["StorageBackend"],
    "lerobot_shards.core.storage.backends.table": [
        "BACKENDS",
        "GENERIC",
        "HUB",
        "LOCAL",
        "S3",
        "backend_for",
        "storage_protocol",
    ],
    "lerobot_shards.core.storage.local_files": ["TEMP_MARKER", "default_file_mode", "is_temp_name", "remove_stale_temp_files"],
    "lerobot_shards.core.storage.ranges": [
        "DEFAULT_MAX_GAP_BYTES",
        "DEFAULT_MAX_REQUEST_BYTES",
        "CoalescedRange",
        "coalesce_ranges",
    ],
    "lerobot_shards.core.storage.retry": [
        "RetryPolicy",
        "name_resolution_failed",
        "retry_after_s",
    ],
    "lerobot_shards.core.storage.storage": ["Storage", "StorageCounters", "bucket_of"],
    "lerobot_shards.core.storage.clients": ["clients_created"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
