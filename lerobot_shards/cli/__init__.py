"""The ``lerobot-shards`` command line: a thin layer over library functions (``main``, the
click group, in ``lerobot_shards.cli.commands``; each command in its own module)."""

from lerobot_shards.core.address_space import fit_reservations_to_limit
from lerobot_shards.core.exports import lazy_exports

# Before any command loads pyarrow: under ``ulimit -v`` the allocators reserve only what they
# use (core/address_space.py), so the limit goes to work, not to reservations.
fit_reservations_to_limit()

_EXPORTS = {
    "lerobot_shards.cli.commands": ["main"],
    "lerobot_shards.cli.script": ["run"],
    "lerobot_shards.cli.progress": ["progress_line", "PackProgressLog"],
    "lerobot_shards.cli.text": ["printable"],
    "lerobot_shards.cli.pack": ["parse_pack_args"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
