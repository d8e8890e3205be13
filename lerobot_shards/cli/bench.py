"""``bench``: run a reader benchmark (``benchmarks/bench_read.py`` or ``bench_real.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

_SCRIPTS = {"read": "benchmarks.bench_read", "real": "benchmarks.bench_real"}


@click.command("bench", add_help_option=False, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def bench(ctx):
    """Reader benchmarks vs the decode ceiling and LeRobot (docs/BENCHMARKS.md).

    \b
    lerobot-shards bench [read] [OPTIONS]   generated data, 3 codecs, S3 (benchmarks/bench_read.py)
    lerobot-shards bench real --source DIR  a real LeRobot v3 dataset, e.g. 480x640 footage (bench_real.py)
    lerobot-shards bench [read|real] --help lists each benchmark's options.
    """
    args = list(ctx.args)
    which = args.pop(0) if args and args[0] in _SCRIPTS else "read"
    # The benchmarks live in the repository, beside the packages (a wheel does not install them).
    script = Path(__file__).resolve().parents[2] / "benchmarks" / f"{_SCRIPTS[which].rsplit('.', 1)[1]}.py"
    if not script.is_file():
        raise click.ClickException(
            "the benchmarks ship with the repository, not the installed package: "
            "run `lerobot-shards bench` from a checkout (git clone, then make install)"
        )
    if args[:1] in (["-h"], ["--help"]) and which == "read" and not ctx.args[:1] == ["read"]:
        click.echo(ctx.get_help())
        click.echo("\nOptions of `bench read`:\n")
    raise SystemExit(subprocess.call([sys.executable, str(script), *args]))
