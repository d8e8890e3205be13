"""Storage systems, one row per fsspec protocol (``table.BACKENDS``), each a ``StorageBackend``
(``base.py``) in its own module (``s3.py``, ``hub.py``): a new system is a module and a row."""

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
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
