"""Pure planning: which episodes a pack holds, how they fall into shards, which shards a
``--part`` packs. Numbers in, numbers out; no files, no processes (``tests/test_import_rules.py``)."""

from packer.plan.pack_plan import make_pack_plan, plan_differences, select_episodes
from packer.plan.shard_plan import plan_shards, shards_of_part

__all__ = ["make_pack_plan", "plan_differences", "plan_shards", "select_episodes", "shards_of_part"]
