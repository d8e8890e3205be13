"""``mixture create``."""

from __future__ import annotations

import click


@click.group("mixture")
def mixture() -> None:
    """Build and inspect mixtures of packed datasets."""


@click.command("create")
@click.argument("dst")
@click.option("--strict", is_flag=True, help="Exit non-zero when any dataset failed or is incomplete.")
def create(dst, strict):
    """Write DST/mixture.json from every packed dataset under DST; list failures."""
    from packer.mixture import create_mixture

    report = create_mixture(dst)
    total = sum(d["anchors"] for d in report.datasets)
    click.echo(f"mixture.json: {len(report.datasets)} datasets, {total} anchors")
    for name, error in sorted(report.failures.items()):
        click.echo(f"FAILED {name}: {error}", err=True)
    if strict and report.failures:
        raise click.ClickException(f"{len(report.failures)} dataset(s) failed")


mixture.add_command(create)
