"""``python -m lerobot_shards.cli``: the same commands as the ``lerobot-shards`` script."""

from lerobot_shards.cli import run

run()
