"""``lerobot-shards verify``: sizes, sha256, index consistency (and decoding) of a pack, and the
fix that fits what it found (a repair only where a repair helps)."""

from __future__ import annotations

import shlex

import click

from lerobot_shards.cli.advice import pack_command
from lerobot_shards.cli.flags import storage_option
from lerobot_shards.cli.progress import ProgressLog
from lerobot_shards.cli.text import printable
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.format.fields import check_pin
from lerobot_shards.packer.options import PackOptions, options_as_flags


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
    command, note = pack_command(source, dst, [*flags, "--repair"], storage_options=storage_options)
    line = command + note
    if unflagged:
        line += f" (pack_dataset(..., {', '.join(unflagged)}, repair=True) from Python)"
    return "to repair it: " + line


def _being_written(dst: str, storage_options: dict | None) -> str:
    """Who packs into ``dst`` now (``running_packs``), or ``""``."""
    from lerobot_shards.core.storage import Storage
    from lerobot_shards.packer.run.lease import running_packs

    try:
        return "; ".join(holder.describe() for holder in running_packs(Storage(dst, storage_options)))
    except Exception:  # advice is best effort: the verify result stands
        return ""


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
    if report.failure == "lerobot":
        return "nothing to repair: it is a LeRobot dataset, not a pack (the line above says how to pack it)"
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
        running = _being_written(dst, storage_options)
        if running:
            return f"it is being written now ({running}): wait for that run to end, then verify it"
        if report.ready_to_finalize:
            return f"every shard is packed; publish it with `lerobot-shards finalize {quoted}`"
        return f"finish packing it: re-run the pack command (every --part job of it), then `lerobot-shards finalize {quoted}`"
    return repair_hint(dst, report.source, report.options, storage_options is not None, report.options_error)


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


__all__ = ["repair_hint", "verify_advice", "verify_command"]
