"""``python -m lerobot_shards.train [lerobot-train flags] [--shards.* flags]``: LeRobot's trainer
on a pack or a mixture (``lerobot_shards/train/lerobot_train.py`` says how); the form ``accelerate launch -m``
needs. ``lerobot-shards train`` runs this module."""

import sys

from lerobot_shards.core.errors import LeRobotShardsError
from lerobot_shards.train.lerobot_train import main

if __name__ == "__main__":
    try:
        main()
    except LeRobotShardsError as err:  # what to fix, on one line; LeRobot's own errors keep their traceback
        print(f"Error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
