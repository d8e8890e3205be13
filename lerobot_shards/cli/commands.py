"""The ``lerobot-shards`` command group: every command, added to ``main``."""

from __future__ import annotations

import click

from lerobot_shards.cli.boundary import BoundaryGroup


# Every command's errors leave through one boundary (cli/boundary.py): one line and an exit code.
@click.group(cls=BoundaryGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lerobot-shards")
def main() -> None:
    """Pack LeRobot v3 datasets into episode-aligned shards, inspect and stream them."""


from lerobot_shards.cli.sample import make_sample  # noqa: E402

main.add_command(make_sample)

from lerobot_shards.cli.check import check_command  # noqa: E402
from lerobot_shards.cli.finalize import finalize_command  # noqa: E402
from lerobot_shards.cli.info import info_command  # noqa: E402
from lerobot_shards.cli.pack import pack  # noqa: E402
from lerobot_shards.cli.sql import sql_command  # noqa: E402
from lerobot_shards.cli.verify import verify_command  # noqa: E402

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
