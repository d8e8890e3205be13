"""``python -m lerobot_shards``: the same commands as the ``lerobot-shards`` script (what the
SLURM scripts run with the environment's own Python)."""

from lerobot_shards.cli import run

run()
