"""The one storage layer: objects under a root (a local path or any fsspec URL), read and
written with retries that end, by the reader and the packer alike.

- ``storage``: ``Storage``, one root's objects (reads, ranged reads, atomic writes, listings);
- ``backends``: what differs per storage system, one row per protocol (``BACKENDS``);
- ``retry``: ``RetryPolicy`` and which failures are transient;
- ``ranges``: coalescing byte ranges into few requests (pure);
- ``local_files``: atomic local writes and the cleanup of their temp files.
"""

from reader.storage.backends import BACKENDS, StorageBackend, backend_for
from reader.storage.local_files import TEMP_MARKER, default_file_mode, is_temp_name, remove_stale_temp_files
from reader.storage.ranges import DEFAULT_MAX_GAP_BYTES, DEFAULT_MAX_REQUEST_BYTES, CoalescedRange, coalesce_ranges
from reader.storage.retry import RetryPolicy, http_status, is_transient
from reader.storage.storage import Storage, StorageCounters, bucket_of

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_GAP_BYTES",
    "DEFAULT_MAX_REQUEST_BYTES",
    "TEMP_MARKER",
    "CoalescedRange",
    "RetryPolicy",
    "Storage",
    "StorageBackend",
    "StorageCounters",
    "backend_for",
    "bucket_of",
    "coalesce_ranges",
    "default_file_mode",
    "http_status",
    "is_temp_name",
    "is_transient",
    "remove_stale_temp_files",
]
