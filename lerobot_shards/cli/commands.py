"""The ``lerobot-shards`` command group: every command, added to ``main``."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lerobot-shards")
def main() -> None:
    """Pack LeRobot v3 datasets into episode-aligned shards, inspect and stream them."""


from lerobot_shards.cli.sample import make_sample  # noqa: E402

main.add_command(make_sample)

from lerobot_shards.cli.pack import (  # noqa: E402
    check_command,
    finalize_command,
    info_command,
    pack,
    sql_command,
    verify_command,
)

for _command in (pack, check_command, finalize_command, verify_command, info_command, sql_command):
    main.add_command(_command)

from lerobot_shards.cli.mixture import mixture  # noqa: E402

main.add_command(mixture)

from lerobot_shards.cli.bench import bench  # noqa: E402

main.add_command(bench)

from lerobot_shards.cli.preview import preview_command  # noqa: E402
from lerobot_shards.cli.train import train_command  # noqa: E402

main.add_command(preview_command)
main.add_command(train_command)

__all__ = ["main"]
