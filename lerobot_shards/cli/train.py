"""``train``: LeRobot's trainer (``lerobot-train``) on a pack or a mixture (``lerobot_shards/train/lerobot_train.py``)."""

from __future__ import annotations

import click


@click.command("train", add_help_option=False, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def train_command(ctx):
    """Train with LeRobot's own trainer on packed data: every lerobot-train flag as is.

    \b
    lerobot-shards train --dataset.root=PACK|MIXTURE.json --policy.type=act [lerobot-train flags] [--shards.NAME=VALUE]
    accelerate launch --multi_gpu --num_processes=N -m lerobot_shards.train (the same flags)
    --resume=true --config_path=OUT/checkpoints/last/pretrained_model/train_config.json continues
    the exact sample sequence. Runs where LeRobot is installed (tested: 0.6.1). Options of our
    own: --shards.storage_options='{"endpoint_url": ...}' (a bucket), --shards.decode_device=cuda,
    --shards.episode_pool_size, --shards.log_samples=PATH, ... (README, "Train with lerobot-train").
    `lerobot-shards train --help` lists every --shards.* flag, then lerobot-train's own help.
    """
    if not ctx.args:
        click.echo(ctx.get_help())
        return
    # Imported here: every other command stays free of torch and LeRobot.
    from lerobot_shards.train import main

    # Ours leave as one line through the boundary (cli/boundary.py); LeRobot's keep their traceback.
    main(ctx.args)
