"""Benchmarks of lerobot-shards, runnable from a checkout (``benchmarks/bench_*.py``) or an
installed package (``lerobot-shards bench [read|real] --help``). Numbers and commands:
docs/BENCHMARKS.md."""
