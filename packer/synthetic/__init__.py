"""Synthetic data for tests, the demo and benchmarks: a faithful LeRobot v3 writer whose frames
carry their identity, and tiny tabular packs."""
