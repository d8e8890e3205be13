"""``mixture create`` and ``mixture report``: a thin layer over ``packer.mixture.create``."""

from __future__ import annotations

import click

from packer.cli.pack import _storage_options, printable, storage_option


def _names(items: tuple[str, ...]) -> dict[str, str]:
    names: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"expected NAME=PATH, got {item!r}", param_hint="--name")
        if name in names:
            raise click.BadParameter(f"name {name!r} given twice", param_hint="--name")
        names[name] = path
    return names


_datasets_options = [
    click.option("--name", "name_items", multiple=True, metavar="NAME=PATH",
                 help="A dataset to include (repeatable); PATH relative to DST, or absolute/URL. Default: every DST/*/."),
    click.option("--sources", "sources_file", default=None, type=click.Path(dir_okay=False),
                 help="The sources file of the packing array: its datasets, in its order (reports ones never packed)."),
]


def _with_datasets_options(command):
    for option in reversed(_datasets_options):
        command = option(command)
    return command


def _echo_problems(report) -> None:
    from packer.mixture.create import format_report

    for line in format_report(report):
        click.echo(printable(line), err=True)


@click.group("mixture")
def mixture() -> None:
    """Build and inspect mixtures of packed datasets (DST/mixture.json)."""


@mixture.command("create")
@click.argument("dst")
@_with_datasets_options
@click.option("--where", default=None, help="DuckDB predicate over index/samples.parquet: anchors are the matching rows.")
@click.option("--verify", "verify_datasets", is_flag=True, help="Also run `verify` on every dataset (reads all shards).")
@click.option("--strict", is_flag=True, help="Exit non-zero when any dataset failed, is incomplete or missing.")
@storage_option
def create(dst, name_items, sources_file, where, verify_datasets, strict, storage_options):
    """Write DST/mixture.json from the complete packed datasets; list the others with their errors."""
    from packer.mixture.create import MixtureError, create_mixture
    from packer.mixture.sources import SourcesError

    try:
        report = create_mixture(
            dst, names=_names(name_items), sources_file=sources_file, where=where, verify=verify_datasets,
            storage_options=_storage_options(storage_options),
        )
    except MixtureError as err:
        if err.report is not None:
            _echo_problems(err.report)
        raise click.ClickException(printable(str(err))) from None
    except SourcesError as err:
        raise click.BadParameter(str(err), param_hint="--sources") from None
    spec = report.spec
    click.echo(f"mixture.json: {len(spec.datasets)} datasets, {spec.total_anchors} anchors -> {report.written_to}")
    _echo_problems(report)
    if strict and not report.ok:
        raise click.ClickException(f"{len(report.failures)} dataset(s) failed, incomplete or missing (--strict)")


@mixture.command("report")
@click.argument("dst")
@_with_datasets_options
@storage_option
def report_command(dst, name_items, sources_file, storage_options):
    """List every dataset with its status (ok, failed, incomplete, missing, invalid); exit 1 unless all are ok."""
    from packer.mixture.create import MixtureError, scan_datasets
    from packer.mixture.sources import SourcesError

    try:
        report, _ = scan_datasets(dst, names=_names(name_items), sources_file=sources_file, storage_options=_storage_options(storage_options))
    except MixtureError as err:
        raise click.ClickException(printable(str(err))) from None
    except SourcesError as err:
        raise click.BadParameter(str(err), param_hint="--sources") from None
    width = max([len(r.name) for r in report.rows] + [7])
    click.echo(f"{'dataset':<{width}}  {'status':<10}  {'anchors':>9}  error")
    for row in report.rows:
        click.echo(printable(f"{row.name:<{width}}  {row.status:<10}  {row.anchors if row.status == 'ok' else '':>9}  {row.error}"))
    bad = sum(r.status != "ok" for r in report.rows)
    click.echo(f"{len(report.rows) - bad} ok, {bad} not ok")
    if bad:
        raise SystemExit(1)
