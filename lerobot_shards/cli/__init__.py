"""The ``lerobot-shards`` command line: a thin layer over library functions (``main``, the
click group, in ``lerobot_shards.cli.commands``; each command in its own module)."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.cli.commands": ["main"],
    "lerobot_shards.cli.script": ["run"],
    "lerobot_shards.cli.progress": ["progress_line", "PackProgressLog"],
    "lerobot_shards.cli.text": ["printable"],
    "lerobot_shards.cli.pack": ["parse_pack_args"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
