"""``python -m packer.cli``: the same commands as the ``lerobot-shards`` script."""

from packer.cli import main

main()
