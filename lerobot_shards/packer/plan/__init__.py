"""Pure planning: which episodes a pack holds, how they fall into shards, which shards a
``--part`` packs. Numbers in, numbers out; no files, no processes (``tests/contracts/test_import_rules.py``)."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.plan.pack_plan": ["make_pack_plan", "plan_differences", "select_episodes"],
    "lerobot_shards.packer.plan.shard_plan": ["plan_shards", "shards_of_part"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
