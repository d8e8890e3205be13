"""Running a pack: the only code that writes to a destination or forks (claim, resume from
receipts, the process pool, finalize). Writes go through ``lerobot_shards.core.storage.Storage``."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.run.pack": ["PackProgress"],
    "lerobot_shards.packer.run.lease": ["destination_lease", "running_packs"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
