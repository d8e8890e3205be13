"""Tools over finished packs, above both halves: ``info``/``sql`` (DuckDB over a pack's
indexes), the summary ``info`` prints, and ``preview`` (an HTML page that decodes frames with
the reader's decoders). ``verify`` is the packer's (``lerobot_shards.packer.verify_pack``): a
mixture task verifies what it packed."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.tools.preview": ["svg_plot", "line_colours"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
