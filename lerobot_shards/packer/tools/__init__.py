"""Tools over finished packs: ``verify``, ``info``/``sql`` (DuckDB) and ``preview`` (HTML)."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.tools.preview": ["svg_plot", "line_colours"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
