"""Tests of ``lerobot_shards.packer``: sources, shards, runs, verify, mixtures, SLURM."""
