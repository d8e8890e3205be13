"""Tests of ``lerobot_shards.tools``: info, sql, preview."""
