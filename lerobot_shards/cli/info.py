"""``lerobot-shards info``: a pack's summary, and its pin on a line of its own."""

from __future__ import annotations

import json

import click

from lerobot_shards.cli.flags import storage_option
from lerobot_shards.cli.text import printable


@click.command("info")
@click.argument("dst")
@storage_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="table for reading; json for scripts (the pin included).",
)
def info_command(dst, storage_options, fmt):
    """Summary of a packed dataset, and its pin on a line of its own (to copy)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from lerobot_shards.cli.advice import nvdec_repack
    from lerobot_shards.tools.summary import summarize

    summary = summarize(dst, storage_options=storage_options)
    table = Table(show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")  # never cut a value (a pin, a path) to fit the terminal
    if fmt == "json":
        click.echo(json.dumps(summary.to_json(), indent=1, sort_keys=True))  # json.dumps escapes control characters
        return
    for name, value in summary.rows():
        table.add_row(Text(name), Text(printable(value)))  # Text: no markup from dataset strings
    Console().print(table)
    # Outside the table: a table folds long values at the terminal's width, and a pin and a
    # command are copied.
    repack = nvdec_repack(summary.manifest, [key for key, why in summary.nvdec if why], dst)
    if repack:
        click.echo(repack)
    click.echo(f"pin {summary.pin}")


__all__ = ["info_command"]
