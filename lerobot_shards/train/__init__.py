"""The LeRobot integration: ``lerobot-shards train`` / ``python -m lerobot_shards.train`` run
LeRobot's own trainer (``lerobot-train``) on a pack or a mixture (``lerobot_train`` says how).
Above the reader; imports LeRobot only when run.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.train.lerobot_train": ["main", "ShardsOptions", "known_flags", "shards_help"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
