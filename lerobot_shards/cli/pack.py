"""``lerobot-shards pack``: a LeRobot dataset into episode-aligned shards (``--check``: only check)."""

from __future__ import annotations

import logging
import sys

import click

from lerobot_shards.cli.check import CHECK_FIELDS, run_check
from lerobot_shards.cli.flags import PACK_FIELDS, check_together, with_pack_flags
from lerobot_shards.cli.progress import pack_progress
from lerobot_shards.cli.text import human_bytes, plural
from lerobot_shards.packer.options import episode_ranges_text


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
    dropped = sorted(report.dropped_episodes)
    named = f" (episodes {episode_ranges_text(dropped)}, not in the pack)" if dropped else ""
    line += f", dropped {len(dropped)}{named}, padded {len(report.padded_episodes)}"
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


def pack_kwargs(params: dict) -> dict:
    """``pack_dataset`` keyword arguments from the parsed pack options (parsed by the fields'
    own parsers as click reads them).

    Raises:
        click.UsageError: options that do not go together.
    """
    check_together(params)
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
    from lerobot_shards.packer.run.pack import pack_dataset

    if check_only:
        if len(paths) > 2 or (repo_id is not None and len(paths) > 1):
            raise click.UsageError(f"expected [SRC] [DST], got {len(paths)} paths: {' '.join(paths)}")
        src = None if repo_id is not None else (paths[0] if paths else None)
        if (repo_id is None) == (src is None):
            raise click.UsageError("give SRC or --repo-id ORG/NAME (one of them)")
        ignored = [PACK_FIELDS[k].flag for k in params if k not in CHECK_FIELDS and params[k] != PACK_FIELDS[k].default]
        if ignored:  # never dropped in silence: a check writes nothing, so these would mean nothing
            raise click.UsageError(f"{', '.join(map(str, ignored))}: only a pack that writes uses it; --check writes nothing")
        run_check(src, repo_id, revision, {k: params[k] for k in CHECK_FIELDS})
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
    finally:
        display.close()  # the progress line ends before the boundary's message (cli/boundary.py)
    click.echo(pack_summary(report, kwargs["video"]))


__all__ = ["pack", "pack_kwargs", "pack_summary", "parse_pack_args"]
