"""``mixture create``, ``report``, ``sources`` and ``task``: a thin layer over ``lerobot_shards.packer.mixture``."""

from __future__ import annotations

import json
import shlex

import click

from lerobot_shards.cli.boundary import BoundaryGroup
from lerobot_shards.cli.flags import PACK_FIELDS, click_option, storage_option
from lerobot_shards.cli.text import printable


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
    click.option(
        "--name",
        "name_items",
        multiple=True,
        metavar="NAME=PATH",
        help="A dataset to include (repeatable); PATH relative to DST, or absolute/URL. Default: every DST/*/.",
    ),
    click.option(
        "--sources",
        "sources_file",
        default=None,
        type=click.Path(dir_okay=False),
        help="The sources file of the packing array: its datasets, in its order (reports ones never packed).",
    ),
]


def _with_datasets_options(command):
    for option in reversed(_datasets_options):
        command = option(command)
    return command


def _echo_problems(report) -> None:
    from lerobot_shards.packer.mixture.create import format_report

    for line in format_report(report):
        click.echo(printable(line), err=True)


@click.group("mixture", cls=BoundaryGroup)
def mixture() -> None:
    """Build and inspect mixtures of packed datasets (DST/mixture.json)."""


def _key_maps(items: tuple[str, ...]) -> dict[str, dict[str, str | None]]:
    """``--key-map DATASET:OLD=NEW`` items as ``{DATASET: {OLD: NEW}}`` (``OLD=``: None)."""
    from lerobot_shards.packer.errors import SourcesError
    from lerobot_shards.packer.mixture.sources import parse_key_maps

    out: dict[str, dict[str, str | None]] = {}
    for item in items:
        name, sep, mapping = item.partition(":")
        if not sep or not name or "=" not in mapping:
            raise click.BadParameter(f"expected DATASET:OLD=NEW, got {item!r}", param_hint="--key-map")
        try:
            parsed = parse_key_maps([mapping], where=name)
        except SourcesError as err:
            raise click.BadParameter(printable(str(err)), param_hint="--key-map") from None
        if set(parsed) & set(out.get(name, {})):
            raise click.BadParameter(f"{item!r}: {name}'s key {next(iter(parsed))!r} is mapped twice", param_hint="--key-map")
        out.setdefault(name, {}).update(parsed)
    return out


@mixture.command("create")
@click.argument("dst")
@_with_datasets_options
@click.option("--where", default=None, help="DuckDB predicate over index/samples.parquet: anchors are the matching rows.")
@click.option(
    "--key-map",
    "key_map_items",
    multiple=True,
    metavar="DATASET:OLD=NEW",
    help="Rename a dataset's feature in the mixture (repeatable; OLD= leaves it out): a camera recorded under "
    "another name, or at another size under the same one. Recorded in mixture.json for every reader.",
)
@click.option(
    "--allow-partial",
    is_flag=True,
    help="Write the mixture even when datasets are left out (failed, incomplete, missing, invalid, unmixable).",
)
@click.option("--verify", "verify_datasets", is_flag=True, help="Also run `verify` on every dataset (reads all shards).")
@click.option("--strict", is_flag=True, hidden=True, help="The default: exit non-zero when any dataset is left out.")
@click.option(
    "--allow-duplicates",
    is_flag=True,
    help="Keep a pack that is listed twice (same manifest) under two names: it is then drawn twice as often.",
)
@storage_option
def create(
    dst, name_items, sources_file, where, key_map_items, allow_partial, verify_datasets, strict, allow_duplicates, storage_options
):
    """Write DST/mixture.json from the packed datasets; exit 1, writing nothing, when any would be
    left out (each listed with its error) unless --allow-partial."""
    from lerobot_shards.packer.errors import MixtureError, SourcesError
    from lerobot_shards.packer.mixture.create import create_mixture

    if strict and allow_partial:
        raise click.UsageError("--strict (the default) and --allow-partial contradict each other")
    try:
        report = create_mixture(
            dst,
            names=_names(name_items),
            sources_file=sources_file,
            where=where,
            verify=verify_datasets,
            storage_options=storage_options,
            allow_duplicates=allow_duplicates,
            key_map=_key_maps(key_map_items),
            allow_partial=allow_partial,
        )
    except MixtureError as err:
        if err.report is not None:
            _echo_problems(err.report)
        raise click.ClickException(printable(str(err))) from None
    except SourcesError as err:
        raise click.BadParameter(str(err), param_hint="--sources") from None
    spec = report.spec
    if spec is None:  # create_mixture raises when no dataset is complete; a report without a spec wrote nothing
        raise click.ClickException("no mixture.json written: no dataset is complete")
    mapped = sum(bool(d.key_map) for d in spec.datasets)
    click.echo(
        f"mixture.json: {len(spec.datasets)} datasets, {spec.total_anchors} anchors"
        + (f", key maps for {mapped}" if mapped else "")
        + f" -> {report.written_to}"
    )
    # The mixture's pin on a line of its own, to copy (MixtureDataset(..., manifest_sha256=PIN)).
    click.echo(f"pin {report.pin}")
    _echo_problems(report)
    if not report.ok:  # --allow-partial: written, and said so
        click.echo(f"{len(report.failures)} dataset(s) left out (--allow-partial)", err=True)


@mixture.command("report")
@click.argument("dst")
@_with_datasets_options
@storage_option
def report_command(dst, name_items, sources_file, storage_options):
    """List every dataset with its status (ok, failed, incomplete, missing, invalid); exit 1 unless all are ok."""
    from lerobot_shards.packer.errors import SourcesError
    from lerobot_shards.packer.mixture.create import scan_datasets

    spec, unreadable = _mixture_spec(dst, storage_options)
    mixed = None if spec is None else {d.name: d.anchors for d in spec.datasets}
    try:
        # Judged as the mixture's readers read it: with the key maps it records, and the same
        # pack twice when it was written with --allow-duplicates.
        report, _ = scan_datasets(
            dst,
            names=_names(name_items),
            sources_file=sources_file,
            storage_options=storage_options,
            recorded_key_map=None if spec is None else {d.name: dict(d.key_map) for d in spec.datasets if d.key_map},
            allow_duplicates=spec is not None and len({d.manifest_sha256 for d in spec.datasets}) < len(spec.datasets),
        )
    except SourcesError as err:
        raise click.BadParameter(str(err), param_hint="--sources") from None
    width = max([len(r.name) for r in report.rows] + [7])
    click.echo(f"{'dataset':<{width}}  {'status':<10}  {'anchors':>9}  error or what the pack left out")
    for row in report.rows:
        anchors, note = (row.anchors if row.status == "ok" else ""), row.error or row.left_out
        if mixed is not None and row.status == "ok":
            # The mixture's anchors (its --where applied), as MixtureDataset draws them.
            anchors = mixed.get(row.name, "")
            note = note or ("" if row.name in mixed else "not in mixture.json: re-run `mixture create`")
        click.echo(printable(f"{row.name:<{width}}  {row.status:<10}  {anchors:>9}  {note}"))
    bad = sum(r.status != "ok" for r in report.rows)
    partial = sum(r.status == "ok" and bool(r.left_out) for r in report.rows)
    click.echo(
        f"{len(report.rows) - bad} ok, {bad} not ok" + (f" ({partial} ok without some of their source)" if partial else "")
    )
    if unreadable:  # the datasets may all be fine, and still no trainer reads this mixture
        raise click.ClickException(
            f"{printable(unreadable)}; a trainer cannot read this mixture: write it again with "
            f"`lerobot-shards mixture create {printable(shlex.quote(dst))}`"
        )
    if bad:
        raise SystemExit(1)


def _mixture_spec(dst: str, storage_options: dict | None):
    """``(spec, None)`` of DST/mixture.json (a ``MixtureSpec``); ``(None, None)`` when there is
    none; ``(None, why)`` when there is one a trainer could not read (it does not parse, too large)."""
    from lerobot_shards.core.errors import LeRobotShardsError
    from lerobot_shards.core.format.limits import MAX_RECORD_BYTES
    from lerobot_shards.core.format.mixture import MIXTURE_FILE, MixtureSpec
    from lerobot_shards.core.storage import Storage

    root = Storage(dst, storage_options)
    if not root.exists(MIXTURE_FILE):
        return None, None
    try:
        size = root.size(MIXTURE_FILE)
        if size > MAX_RECORD_BYTES:
            return None, f"{root.describe(MIXTURE_FILE)}: {size:,} bytes; at most {MAX_RECORD_BYTES:,} are read"
        spec = MixtureSpec.from_json(root.read_bytes(MIXTURE_FILE), where=root.describe(MIXTURE_FILE))
    except LeRobotShardsError as err:
        return None, str(err)
    return spec, None


@mixture.command("sources")
@click.argument("sources_file", type=click.Path(dir_okay=False))
@click.option("--list", "listing", is_flag=True, help="Print INDEX<TAB>NAME<TAB>SOURCE[<TAB>KEY MAPS] per dataset.")
@click.option("--count", "count_only", is_flag=True, help="Print only the number of datasets (for scripts).")
def sources_command(sources_file, listing, count_only):
    """Validate a sources file (one dataset per line) and say how many datasets it lists.

    Exit 2 with the file and line on a malformed file: submit_mixture.sh runs this first.
    """
    from lerobot_shards.packer.errors import SourcesError
    from lerobot_shards.packer.mixture.sources import read_sources

    try:
        sources = read_sources(sources_file)
    except SourcesError as err:
        raise click.BadParameter(printable(str(err)), param_hint="SOURCES_FILE") from None
    if listing:
        for i, source in enumerate(sources):
            maps = " ".join(f"{old}={new or ''}" for old, new in source.key_map.items())
            click.echo(f"{i}\t{printable(source.name)}\t{printable(source.source)}" + (f"\t{printable(maps)}" if maps else ""))
    elif count_only:
        click.echo(len(sources))
    else:
        hub = sum(s.is_hub for s in sources)
        mapped = sum(bool(s.key_map) for s in sources)
        click.echo(
            printable(
                f"{sources_file}: {len(sources)} dataset(s) ({hub} from the Hub, {len(sources) - hub} paths or URLs"
                + (f", {mapped} with key maps" if mapped else "")
                + "); valid"
            )
        )


@mixture.command("task")
@click.argument("dst")
@click.option("--sources", "sources_file", required=True, help="The sources file (see `mixture sources`).")
@click.option("--index", type=int, default=None, help="0-based dataset line (default: $SLURM_ARRAY_TASK_ID + --offset).")
@click.option(
    "--offset", type=int, default=0, show_default=True, help="Added to $SLURM_ARRAY_TASK_ID (arrays submitted in pieces)."
)
@click_option(PACK_FIELDS["video"], default=None, show_default=False, help="Shorthand for `-- --video MODE`.")
@click_option(PACK_FIELDS["workers"], default=None, show_default=False, help="Shorthand for `-- --workers N`.")
@click.option("--no-verify", is_flag=True, help="Do not verify after packing.")
@storage_option
@click.argument("pack_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def task_command(ctx: click.Context, dst, sources_file, index, offset, video, workers, no_verify, storage_options, pack_args):
    """Pack one line of a sources file into DST/<name> (one SLURM array task; pack options
    after `--`). A failed dataset is recorded in DST/_failures/<name>.json and the task
    exits 0 (143 after SIGTERM), so the array goes on; exit 2 on configuration errors."""
    from lerobot_shards.cli.pack import parse_pack_args
    from lerobot_shards.core.errors import ConfigurationError
    from lerobot_shards.packer.mixture.task import array_index, run

    line = array_index(index, offset)
    if line is None:
        raise ConfigurationError("give --index or run inside a SLURM array (SLURM_ARRAY_TASK_ID is not set)")
    args = list(pack_args)
    if video:
        args = ["--video", video, *args]
    if workers:
        args = ["--workers", str(workers), *args]
    if storage_options:
        args = ["--storage-options", json.dumps(storage_options), *args]
    try:
        options = parse_pack_args(args)
    except click.ClickException as err:
        raise ConfigurationError(f"pack options after --: {err.format_message()}") from None
    # One set of options for the pack and the task's own reads and writes at DST (failure
    # records, verify): `--storage-options` may come before `--` or among the pack options
    # (what slurm/pack_mixture.sbatch passes on).
    outcome = run(
        sources_file,
        line,
        dst,
        options,
        verify_after=not no_verify,
        storage_options=options.get("storage_options"),
        say=lambda text: click.echo(printable(text)),
    )
    if outcome.error:
        click.echo(printable(f"[{outcome.name}] FAILED: {outcome.error} (recorded in {outcome.record})"), err=True)
    ctx.exit(outcome.exit_code)
