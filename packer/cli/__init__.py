"""The ``lerobot-shards`` command line: a thin layer over library functions."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="lerobot-shards")
def main() -> None:
    """Pack LeRobot v3 datasets into episode-aligned shards, inspect and stream them."""


from packer.cli.sample import make_sample  # noqa: E402

main.add_command(make_sample)
