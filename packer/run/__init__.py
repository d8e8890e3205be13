"""Running a pack: the only code that writes to a destination or forks (claim, resume from
receipts, the process pool, finalize). Writes go through ``reader.storage.Storage``."""

from reader.exports import lazy_exports

_EXPORTS = {
    "packer.run.pack": ["PackProgress"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
