"""``lerobot-shards check``: every problem packing a LeRobot dataset would meet, writing nothing."""

from __future__ import annotations

import click

from lerobot_shards.cli.flags import PACK_FIELDS, check_together, with_pack_flags
from lerobot_shards.cli.progress import ProgressLog
from lerobot_shards.cli.text import plural, printable

# Every pack option but those about the destination (OptionSpec.destination): a check reads the
# source as that pack would, and a new option joins it by being declared.
CHECK_FIELDS = tuple(name for name, f in PACK_FIELDS.items() if not f.spec.destination)
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
    run_check(src, repo_id, revision, params)


def run_check(src: str | None, repo_id: str | None, revision: str | None, params: dict) -> None:
    """Check a source as ``pack`` would read it and print each finding (``pack --check`` too).

    Raises:
        click.ClickException: the source has errors (the summary, and the fix when one fits).
    """
    from lerobot_shards.packer.run.check import check_dataset

    check_together(params)
    log = ProgressLog("check", unit="episodes")
    try:
        report = check_dataset(
            src, repo_id=repo_id, revision=revision, progress=lambda done, total: log.update(done, total), **params
        )
    finally:
        log.close()
    if report.source_format is not None:
        click.echo(f"source: {report.source_format}{_HOW_READ.get(report.source_format, '')}")
    for finding in report.findings:
        click.echo(printable(finding.line()), err=finding.level == "error")
    summary = (
        f"checked {plural(len(report.checked), 'episode')}, {plural(report.frames, 'frame')}: "
        f"{plural(len(report.errors), 'error')}, {plural(len(report.warnings), 'warning')}"
    )
    if report.reencoded:
        summary += f"; copy mode would re-encode {plural(len(report.reencoded), 'episode')}"
    if not report.ok:
        fix = report.fix()
        raise click.ClickException(summary + "; a pack would stop at the first error" + (f"; to pack: {fix}" if fix else ""))
    click.echo(summary + "; ok to pack")


# What a pack does with a source of each format, said before the findings.
_HOW_READ = {
    "LeRobot v2.1": (
        ", read directly: each episode's mp4 stream-copied as it is, its rows as LeRobot 0.6.1 reads them after its "
        "converter (convert_dataset_v21_to_v30), the pack's meta/ the v3 one that converter writes"
    ),
    "LeRobot v3": ", read as LeRobot 0.6.1 reads it",
}

__all__ = ["CHECK_FIELDS", "check_command", "run_check"]
