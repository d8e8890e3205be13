"""What the reader and the packer share, and nothing else: the packed format (``format``: the
one place its names, limits and records are written), the storage layer (``storage``), the one
error hierarchy (``errors``), options as dataclass fields (``option_fields``) and the lazy
faces (``exports``). Imports neither the reader nor the packer, and never torch.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.core.format": ["FORMAT_VERSION", "Manifest"],
    "lerobot_shards.core.storage": ["RetryPolicy", "Storage"],
    "lerobot_shards.core.errors": ["LeRobotShardsError", "FormatError", "StorageError", "ArgumentError"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
