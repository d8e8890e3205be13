"""Tests of ``lerobot_shards.train``: LeRobot's trainer on packs."""
