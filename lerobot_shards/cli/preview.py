"""``preview``: a self-contained HTML page of a packed dataset (lerobot_shards/tools/preview.py)."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

import click

from lerobot_shards.cli.flags import count_option, storage_option
from lerobot_shards.cli.text import printable


@click.command("preview")
@click.argument("packed")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="HTML file to write.")
@count_option(
    "--episodes",
    "max_episodes",
    default=12,
    minimum=0,
    help="Episodes shown with frames and plots (the first ones; the summary covers all).",
)
@count_option(
    "--frames",
    "frames_per_episode",
    default=6,
    minimum=1,
    help="Frames per camera in each episode's contact sheet, evenly spaced.",
)
@storage_option
def preview_command(packed, output, max_episodes, frames_per_episode, storage_options):
    """Write one HTML file (images inlined) to look at PACKED: summary, cameras, tasks, window
    validity, and per episode a contact sheet and state/action plots."""
    from lerobot_shards.tools.preview import render_preview

    def progress(done: int, total: int) -> None:
        click.echo(f"preview: episode {done}/{total}", err=True)

    # Before decoding anything: the page's folder must exist (it was a traceback after the decode)
    # and take a file (a read-only folder failed only after every episode was decoded). The
    # page is written beside it and renamed over OUTPUT: a failed run leaves no half page.
    if not output.parent.is_dir():
        raise click.ClickException(f"{printable(str(output.parent))}: no such folder to write {printable(output.name)} in")
    prefix = f".{output.name}."
    _remove_killed_pages(output.parent, prefix)
    try:  # the writer's pid in the name: a later run knows a killed run's page from a live one's
        handle, partial = tempfile.mkstemp(prefix=f"{prefix}{os.getpid()}.", suffix=".tmp", dir=output.parent)
    except OSError as err:
        raise click.ClickException(f"{printable(str(output))}: cannot write it ({err.strerror})") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            page, report = render_preview(
                packed,
                storage_options=storage_options,
                max_episodes=max_episodes,
                frames_per_episode=frames_per_episode,
                progress=progress,
            )
            file.write(page)
        os.replace(partial, output)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    click.echo(
        f"wrote {output} ({report.html_bytes / 1e6:.2f} MB): {report.episodes_shown} of {report.episodes_total} episodes, "
        f"{report.frames_decoded} frames decoded, {report.seconds:.1f} s"
    )


def _remove_killed_pages(folder: Path, prefix: str) -> None:
    """Remove the half pages (``PREFIX<pid>.<random>.tmp``) that previews of the same page left
    when they were killed (their pid no longer runs); a running preview's page is kept."""
    for entry in folder.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = entry.name[len(prefix) :].split(".", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            entry.unlink(missing_ok=True)
        except PermissionError:
            pass  # another user's live process
