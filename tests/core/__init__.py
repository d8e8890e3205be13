"""Tests of ``lerobot_shards.core``: the format's bounded readers, the storage layer and its backends, errors."""
