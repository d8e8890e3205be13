"""``pack``, ``finalize``, ``verify``, ``info`` and ``sql`` commands."""

from __future__ import annotations

import json
import logging
import shlex
import sys

import click

from lerobot_shards.cli.flags import PACK_FIELDS, storage_option, with_pack_flags
from lerobot_shards.cli.progress import ProgressLog, pack_progress
from lerobot_shards.cli.text import human_bytes, plural, printable, printable_lines
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.format.fields import check_pin
from lerobot_shards.core.storage import storage_protocol
from lerobot_shards.packer.options import PackOptions, flag_of, options_as_flags


def pack_summary(report, video: str = "copy") -> str:
    """One line on what a pack run did; rates only for work done in this run. "Re-encoded"
    means the packer encoded the episode's video: every episode with ``--video hevc|h264``;
    with ``copy`` only those whose source could not be cut at a keyframe (``info`` and the
    ``episodes`` view say the same)."""
    line = (
        f"packed {plural(report.episodes, 'episode')}, {plural(report.frames, 'frame')} into {plural(report.shards, 'shard')} "
        f"({report.shards_written} written, {report.shards_skipped} already done)"
    )
    if report.shards_written:
        line += (
            f"; read {human_bytes(report.bytes_in)} (video and rows), wrote {human_bytes(report.bytes_out)} "
            f"in {report.seconds:.1f} s ({human_bytes(report.bytes_in / max(report.seconds, 1e-9))}/s)"
        )
    elif report.shards_rehashed:
        line += f"; nothing left to pack (re-hashed {plural(report.shards_rehashed, 'kept shard')}: intact)"
    elif not report.shards_planned_here:
        line += "; this part has no shard to pack (the plan has fewer shards than parts)"
    else:
        line += "; nothing left to pack (kept shards checked by size; --repair re-hashes them)"
    if report.shards_repaired:
        line += f"; rebuilt {plural(len(report.shards_repaired), 'damaged shard')} ({report.shards_repaired[0]}"
        line += f", and {len(report.shards_repaired) - 1} more)" if len(report.shards_repaired) > 1 else ")"
    reencoded = len(report.reencoded_episodes)
    if video != "copy":
        line += f"; re-encoded {reencoded} of {plural(report.episodes, 'episode')} (--video {video})"
    elif reencoded:
        line += (
            f"; kept the source video of {report.episodes - reencoded} of {plural(report.episodes, 'episode')}, "
            f"re-encoded {reencoded} that could not be cut at a keyframe"
        )
    else:
        line += f"; kept the source video of all {plural(report.episodes, 'episode')} (copy mode)"
    line += f", dropped {len(report.dropped_episodes)}, padded {len(report.padded_episodes)}"
    if report.preroll_episodes:
        line += (
            f", cut {len(report.preroll_episodes)} that start between keyframes from the keyframe before "
            "(exact; readers skip those frames)"
        )
    if report.trimmed_episodes:
        line += (
            f", trimmed {len(report.trimmed_episodes)} (videos longer than their rows: the extra frames, which "
            "LeRobot never reads, are left out)"
        )
    if report.metadata_left_out:
        line += f"; left out {plural(len(report.metadata_left_out), 'metadata file')} LeRobot does not read"
    return line + ("" if report.finalized else "; run `lerobot-shards finalize` after all parts")


_with_pack_options = with_pack_flags()
_with_journal_options = with_pack_flags("journal", "trust_destination")


def pack_kwargs(params: dict) -> dict:
    """``pack_dataset`` keyword arguments from the parsed pack options (parsed by the fields'
    own parsers as click reads them).

    Raises:
        click.UsageError: options that do not go together.
    """
    if params["video"] == "copy" and (params["crf"] is not None or params["preset"] is not None):
        raise click.UsageError("--crf and --preset apply to re-encodes: add --video hevc or --video h264")
    return {name: params[name] for name in PACK_FIELDS}


def parse_pack_args(args: list[str]) -> dict:
    """``pack_dataset`` keyword arguments from ``lerobot-shards pack`` options given as
    strings (what a SLURM task passes after ``--``); the same parsing and checks as ``pack``.

    Raises:
        click.ClickException: options that do not parse (click's message).
    """

    @_with_pack_options
    def options_only(**params):
        return params

    params = getattr(options_only, "__click_params__")  # noqa: B009 (set by click's decorators; not in the function's type)
    command = click.Command("pack", params=params[::-1], add_help_option=False)
    with command.make_context("lerobot-shards pack", list(args)) as ctx:
        return pack_kwargs(ctx.params)


def repair_hint(
    dst: str, source: dict, options: PackOptions | None, storage_options: bool, options_error: str | None = None
) -> str:
    """What repairs a damaged pack: ``lerobot-shards pack SRC DST <its options> --repair``,
    with the source and options the pack records (parsed: ``PackOptions.from_recorded``; a
    local source is recorded by its folder's name only: ``SRC`` then stands for it). The
    recorded text comes from the pack, so each word is shell-quoted and shown printable;
    nothing of it is run."""
    if options is None:
        why = f" (its recorded options cannot be read: {options_error})" if options_error else ""
        return printable("re-run the `lerobot-shards pack` command that made it, with --repair" + why)
    flags, unflagged = options_as_flags(options)
    repo_id, uri = source.get("repo_id"), source.get("uri")
    words, note = ["lerobot-shards", "pack"], ""
    if isinstance(repo_id, str):
        words += ["--repo-id", repo_id] + (["--revision", source["revision"]] if isinstance(source.get("revision"), str) else [])
    elif isinstance(uri, str) and storage_protocol(uri) is not None:
        words.append(uri)
    else:
        words.append("SRC")
        note = f" (SRC: the LeRobot dataset folder {uri!r} it was packed from)" if isinstance(uri, str) else " (SRC: its source)"
    words += [dst, *flags, "--repair"]
    if storage_options:
        note += " with your --storage-options"
    if unflagged:
        note += f" (pack_dataset(..., {', '.join(unflagged)}, repair=True) from Python)"
    return "to repair it: " + printable(" ".join(shlex.quote(str(w)) for w in words)) + printable(note)


def _pin_flag(value: str | None) -> str | None:
    """``--manifest-sha256``: a pin, or a usage error (bad input, not a pack that changed)."""
    if value is None:
        return None
    try:
        return check_pin(value, what="--manifest-sha256")
    except ArgumentError as err:
        raise click.BadParameter(str(err).removeprefix("--manifest-sha256 ")) from None


def verify_advice(dst: str, report, storage_options: dict | None) -> str:
    """What fixes what ``verify`` found: the fix for this failure (``report.failure``), never a
    repair where a repair cannot help (a path with no pack, a pin, a pack that only needs its
    ``finalize``)."""
    quoted = printable(shlex.quote(dst))
    if report.failure == "missing":
        return "nothing to repair: check the path (a typo?) or the repo id"
    if report.failure == "bucket":
        return "nothing to repair: check the bucket name and the endpoint (--storage-options)"
    if report.failure == "file":
        return "give the folder that holds manifest.json"
    if report.failure == "mixture":
        return "a mixture is checked pack by pack: `lerobot-shards verify FOLDER/NAME` for each of its datasets"
    if report.failure == "pin":
        return (
            "a repair cannot change a pin: get the pack that was pinned again, or, if this one is the pack you "
            f"want, pin it as it is (`lerobot-shards info {quoted}` prints its pin)"
        )
    if report.failure == "storage":
        return "the storage failed, not the pack: check access and credentials, then verify again"
    if report.failure == "unfinished":
        if report.ready_to_finalize:
            return f"every shard is packed; publish it with `lerobot-shards finalize {quoted}`"
        return f"finish packing it: re-run the pack command (every --part job of it), then `lerobot-shards finalize {quoted}`"
    return repair_hint(dst, report.source, report.options, storage_options is not None, report.options_error)


def library_error(err: Exception) -> click.ClickException:
    """A library error as one line for the terminal; an option's error names its flag."""
    option = getattr(err, "option", None)
    suffix = f" ({flag_of(option)})" if option else ""
    return click.ClickException(printable(str(err)) + suffix)


@click.command("pack")
@click.argument("paths", nargs=-1, metavar="[SRC] DST")
@click.option("--repo-id", default=None, help="Hugging Face Hub dataset ORG/NAME (instead of SRC).")
@click.option("--revision", default=None, help="Hub branch, tag or commit SHA.")
@click.option(
    "--check",
    "check_only",
    is_flag=True,
    help="Only check the source as this pack would read it and list every problem; write nothing (DST optional).",
)
@_with_pack_options
def pack(paths, repo_id, revision, check_only, **params):
    """Pack a LeRobot v3.0 dataset (SRC path/URL or --repo-id) into episode-aligned shards at DST."""
    from lerobot_shards.core.errors import LeRobotShardsError
    from lerobot_shards.packer.run.pack import pack_dataset

    if check_only:
        if len(paths) > 2 or (repo_id is not None and len(paths) > 1):
            raise click.UsageError(f"expected [SRC] [DST], got {len(paths)} paths: {' '.join(paths)}")
        src = None if repo_id is not None else (paths[0] if paths else None)
        if (repo_id is None) == (src is None):
            raise click.UsageError("give SRC or --repo-id ORG/NAME (one of them)")
        _run_check(src, repo_id, revision, {k: params[k] for k in CHECK_FIELDS})
        return
    # One optional positional before a required one: click would give a lone DST to SRC,
    # so `pack --repo-id ORG/NAME DST` is parsed here.
    if len(paths) > 2:
        raise click.UsageError(f"expected [SRC] DST, got {len(paths)} paths: {' '.join(paths)}")
    src, dst = (None, paths[0]) if len(paths) == 1 else (paths + (None, None))[:2]
    if dst is None:
        raise click.UsageError("give SRC and DST, or --repo-id ORG/NAME and DST")
    if repo_id is None and src is None:
        raise click.UsageError("give SRC and DST, or --repo-id ORG/NAME and DST")
    if repo_id is not None and src is not None:
        raise click.UsageError(f"give SRC ({src}) or --repo-id ({repo_id}), not both")
    kwargs = pack_kwargs(params)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    display = pack_progress(sys.stderr.isatty())
    try:
        report = pack_dataset(src, dst, repo_id=repo_id, revision=revision, progress=display, **kwargs)
    except LeRobotShardsError as err:
        raise library_error(err) from None
    except KeyboardInterrupt:
        display.close()
        click.echo("interrupted: shards already written are kept; re-run the same command to resume", err=True)
        raise SystemExit(130) from None
    finally:
        display.close()
    click.echo(pack_summary(report, kwargs["video"]))


CHECK_FIELDS = (
    "video",
    "episodes",
    "resize",
    "on_frame_mismatch",
    "tolerance_s",
    "cache_dir",
    "src_storage_options",
    "follow_symlinks",
)
_with_check_options = with_pack_flags(*CHECK_FIELDS)


@click.command("check")
@click.argument("src", required=False)
@click.option("--repo-id", default=None, help="Hugging Face Hub dataset ORG/NAME (instead of SRC).")
@click.option("--revision", default=None, help="Hub branch, tag or commit SHA.")
@_with_check_options
def check_command(src, repo_id, revision, **params):
    """List every problem packing a LeRobot dataset would meet, writing nothing (exit 1 on errors).

    Reads what a pack reads: every episode's rows (tasks, pictures, values) and each camera's
    window cut as copy mode cuts it; reports frame counts that differ from the rows, episodes
    that would be padded, dropped or re-encoded, timestamps LeRobot would refuse, and cameras a
    re-encode cannot code. Give the pack's own options (--video, --episodes, ...).
    """
    if (repo_id is None) == (src is None):
        raise click.UsageError("give SRC or --repo-id ORG/NAME (one of them)")
    _run_check(src, repo_id, revision, params)


def _run_check(src, repo_id, revision, params) -> None:
    from lerobot_shards.core.errors import LeRobotShardsError
    from lerobot_shards.packer.run.check import check_dataset

    log = ProgressLog("check", unit="episodes")
    try:
        report = check_dataset(
            src, repo_id=repo_id, revision=revision, progress=lambda done, total: log.update(done, total), **params
        )
    except LeRobotShardsError as err:
        raise library_error(err) from None
    finally:
        log.close()
    for finding in report.findings:
        click.echo(printable(finding.line()), err=finding.level == "error")
    summary = (
        f"checked {plural(report.episodes, 'episode')}, {plural(report.frames, 'frame')}: "
        f"{plural(len(report.errors), 'error')}, {plural(len(report.warnings), 'warning')}"
    )
    if report.reencoded:
        summary += f"; copy mode would re-encode {plural(len(report.reencoded), 'episode')}"
    if not report.ok:
        fix = report.fix()
        raise click.ClickException(summary + "; a pack would stop at the first error" + (f"; to pack: {fix}" if fix else ""))
    click.echo(summary + "; ok to pack")


@click.command("finalize")
@click.argument("dst")
@storage_option
@_with_journal_options
def finalize_command(dst, storage_options, journal, trust_destination):
    """Write the global index and manifest once every --part has finished."""
    from lerobot_shards.packer.errors import PackError
    from lerobot_shards.packer.run.finalize import finalize

    try:
        log = ProgressLog("finalize", unit="shards")
        manifest = finalize(
            dst,
            storage_options=storage_options,
            journal=journal,
            trust_destination=trust_destination,
            progress=lambda done, total: log.update(done, total),
        )
        log.close()
    except PackError as err:
        raise click.ClickException(printable(str(err))) from None
    click.echo(f"finalized {manifest.totals['episodes']} episodes in {manifest.totals['shards']} shards")


@click.command("verify")
@click.argument("dst")
@click.option("--decode", is_flag=True, help="Also decode every member and check its frame count and frame size.")
@click.option(
    "--manifest-sha256",
    "pin",
    default=None,
    callback=lambda ctx, param, value: _pin_flag(value),
    metavar="sha256:HEX",
    help="Pin: fail unless manifest.json is exactly this one (as `info` prints it).",
)
@storage_option
def verify_command(dst, decode, pin, storage_options):
    """Check sizes, sha256, index consistency (and decoding); non-zero exit on any problem."""
    from lerobot_shards.packer.verify_pack import verify

    log = ProgressLog("verify", unit="shards")
    report = verify(
        dst,
        decode=decode,
        storage_options=storage_options,
        manifest_sha256=pin,
        progress=lambda done, total, episodes: log.update(done, total, note=f"{episodes} episodes checked"),
    )
    log.close()
    if not report.ok:
        for problem in report.problems:
            click.echo(f"FAIL {printable(problem)}", err=True)
        raise click.ClickException(
            f"{len(report.problems)} problem(s) in {printable(dst)}; " + verify_advice(dst, report, storage_options)
        )
    click.echo(
        f"ok: {report.shards_checked} shards, {report.episodes_checked} episodes"
        + (f", {report.members_decoded} members decoded" if decode else "")
        + f"; manifest {report.manifest_sha256}"
    )


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

    from lerobot_shards.packer.errors import InspectError
    from lerobot_shards.tools.summary import summarize

    try:
        summary = summarize(dst, storage_options=storage_options)
    except InspectError as err:
        raise click.ClickException(printable(str(err))) from None
    table = Table(show_header=False)
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")  # never cut a value (a pin, a path) to fit the terminal
    if fmt == "json":
        click.echo(json.dumps(summary.to_json(), indent=1, sort_keys=True))  # json.dumps escapes control characters
        return
    for name, value in summary.rows():
        table.add_row(Text(name), Text(printable(value)))  # Text: no markup from dataset strings
    Console().print(table)
    # Outside the table: a table folds long values at the terminal's width, and a pin is copied.
    click.echo(f"pin {summary.pin}")


@click.command("sql")
@click.argument("dst")
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table for reading; csv, or json (an array of one object per row), for other tools (every row).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Rows of each statement the table shows (the rest are counted); 0 shows all.",
)
@storage_option
def sql_command(dst, query, fmt, limit, storage_options):
    """Run DuckDB SQL over views `episodes`, `samples`, `tasks` and `frames` (every statement given)."""
    from lerobot_shards.packer.errors import InspectError, SqlSyntaxError
    from lerobot_shards.tools.sql import run_statements

    try:
        results = run_statements(dst, query, storage_options=storage_options, max_rows=limit or None if fmt == "table" else None)
    except SqlSyntaxError as err:  # the user's own query: DuckDB's lines and ^ pointer kept
        raise click.ClickException(printable_lines(str(err))) from None
    except InspectError as err:
        raise click.ClickException(printable(str(err))) from None
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
