"""``lerobot-shards sql``: DuckDB SQL over a pack's views."""

from __future__ import annotations

import json
import sys

import click

from lerobot_shards.cli.flags import count_option, storage_option
from lerobot_shards.cli.text import printable


@click.command("sql")
@click.argument("dst")
@click.argument("queries", nargs=-1, required=True, metavar="QUERY...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table for reading; csv, or json (an array of one object per row), for other tools (every row).",
)
@count_option(
    "--limit", default=50, minimum=0, help="Rows of each statement the table shows (the rest are counted); 0 shows all."
)
@storage_option
def sql_command(dst, queries, fmt, limit, storage_options):
    """Run DuckDB SQL over views `episodes`, `samples`, `tasks` and `frames`: every statement
    given, in one argument (`;` between them) or several."""
    from lerobot_shards.tools.sql import run_statements

    # A SqlSyntaxError (the user's own query) keeps DuckDB's lines and ^ pointer (cli/boundary.py).
    query = ";\n".join(q.strip().rstrip(";") for q in queries)
    results = run_statements(dst, query, storage_options=storage_options, max_rows=limit or None if fmt == "table" else None)
    for number, result in enumerate(results):
        if len(results) > 1 and fmt == "table":
            click.echo(printable(f"-- statement {number + 1} of {len(results)}: {result.statement}"))
        if fmt == "json":
            # json.dumps escapes control characters itself (ensure_ascii): safe for a terminal.
            click.echo(json.dumps([dict(zip(result.columns, row)) for row in result.rows], default=str))
        elif fmt == "csv":
            import csv

            writer = csv.writer(sys.stdout)
            writer.writerow([printable(c) for c in result.columns])
            writer.writerows([[printable(str(v)) if isinstance(v, str) else v for v in row] for row in result.rows])
        elif result.columns:
            _print_rows(result.columns, result.rows)
            if result.total_rows > len(result.rows):
                click.echo(
                    f"... {result.total_rows - len(result.rows):,} more rows ({result.total_rows:,} in all; --limit 0 shows all)"
                )


def _print_rows(columns: list[str], rows: list[tuple]) -> None:
    """A table when it fits the terminal; else one block per row (``column  value`` lines), so
    no column name is split mid-word and no value is cut."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    cells = [[printable(str(v)) for v in row] for row in rows]
    names = [printable(c) for c in columns]
    widths = [max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)]
    if sum(widths) + 3 * len(widths) + 1 <= console.width:
        table = Table()
        for name in names:
            table.add_column(Text(name), no_wrap=True)
        for row in cells:
            table.add_row(*(Text(v) for v in row))
        console.print(table)
        return
    pad = max(len(n) for n in names)
    for number, row in enumerate(cells):
        click.echo(f"-[ row {number + 1} ]" + "-" * max(0, min(console.width, 60) - 12))
        for name, value in zip(names, row):
            click.echo(f"{name:<{pad}}  {value}")


__all__ = ["sql_command"]
