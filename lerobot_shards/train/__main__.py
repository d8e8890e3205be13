"""``python -m lerobot_shards.train [lerobot-train flags] [--shards.* flags]``: LeRobot's trainer
on a pack or a mixture (``lerobot_shards/train/lerobot_train.py`` says how); the form ``accelerate launch -m``
needs. It is ``lerobot-shards train``: the same command through the same error boundary (ours
leave as one line and their exit code, LeRobot's keep their traceback)."""

import sys

from lerobot_shards.cli.commands import main

if __name__ == "__main__":
    main(["train", *sys.argv[1:]], prog_name="lerobot-shards")
