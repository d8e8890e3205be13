"""``bench``: run the reader benchmark (benchmarks/bench_read.py) from a source checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click


@click.command("bench", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def bench(ctx):
    """Reader benchmark vs the decode ceiling and LeRobot; options as benchmarks/bench_read.py."""
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_read.py"
    if not script.exists():
        raise click.ClickException(f"{script} not found: `bench` runs from a source checkout of lerobot-shards")
    raise SystemExit(subprocess.call([sys.executable, str(script), *ctx.args]))
