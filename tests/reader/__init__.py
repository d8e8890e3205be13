"""Tests of ``lerobot_shards.reader``: planning, fetch, decode, runtime, the datasets and the loader."""
