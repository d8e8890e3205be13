"""Tests of ``lerobot_shards.cli``: the command line as a new user meets it."""
