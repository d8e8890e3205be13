"""The ``lerobot-shards`` command line: a thin layer over library functions (``main``, the
click group, in ``packer.cli.commands``; each command in its own module)."""

from reader.exports import lazy_exports

_EXPORTS = {
    "packer.cli.commands": ["main"],
    "packer.cli.progress": ["progress_line", "PackProgressLog"],
    "packer.cli.text": ["printable"],
    "packer.cli.pack": ["parse_pack_args"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
