"""``lerobot-shards make-sample``: write a synthetic LeRobot v3.0 dataset."""

from __future__ import annotations

import sys

import click

from lerobot_shards.cli.flags import count_option
from lerobot_shards.cli.progress import ProgressLog

# lerobot_shards.testing (pandas: ~0.75 s) is imported when make-sample runs, not by every command.


def _parse_cameras(text: str) -> tuple:
    from lerobot_shards.testing.dataset import CameraSpec

    cameras = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            key, size = item.rsplit(":", 1)
            height, width = (int(v) for v in size.lower().split("x"))
        except ValueError:
            raise click.BadParameter(f"expected KEY:HxW[,KEY:HxW...], got {item!r}") from None
        cameras.append(CameraSpec(key, height, width))
    return tuple(cameras)


@click.command("make-sample")
@click.argument("out", type=click.Path(file_okay=False))
@click.option("--episodes", default=6, show_default=True, help="Number of episodes.")
@count_option("--fps", default=30, minimum=1, help="Frames per second of every episode.")
@count_option("--min-length", default=8, minimum=1, help="Shortest episode (frames).")
@count_option("--max-length", default=40, minimum=1, help="Longest episode (frames).")
@click.option(
    "--cameras",
    default="observation.images.top:48x64,observation.images.wrist:32x32",
    show_default=True,
    help="Comma-separated KEY:HxW camera streams (empty for none).",
)
@click.option("--data-file-mb", default=100.0, show_default=True, help="Data parquet rollover size (MB).")
@click.option("--video-file-mb", default=200.0, show_default=True, help="Video file rollover size (MB).")
@click.option("--chunks-size", default=1000, show_default=True, help="Files per chunk directory.")
@click.option(
    "--seed",
    default=0,
    show_default=True,
    help="Seed of episode lengths, tasks and values: the same seed writes the same dataset.",
)
def make_sample(out, episodes, fps, min_length, max_length, cameras, data_file_mb, video_file_mb, chunks_size, seed):
    """Write a synthetic LeRobot v3.0 dataset to OUT (AV1 video, frames carry their identity)."""
    from lerobot_shards.testing.dataset import SampleSpec, write_sample_dataset

    if episodes < 1:
        raise click.BadParameter(f"must be >= 1, got {episodes}", param_hint="--episodes")
    if max_length < min_length:
        raise click.BadParameter(f"{max_length} is shorter than --min-length {min_length}", param_hint="--max-length")
    spec = SampleSpec(
        episodes=episodes,
        fps=fps,
        min_length=min_length,
        max_length=max_length,
        cameras=_parse_cameras(cameras),
        data_files_size_in_mb=data_file_mb,
        video_files_size_in_mb=video_file_mb,
        chunks_size=chunks_size,
        seed=seed,
    )
    # A dataset already there, a read-only folder, a spec it cannot write: one line (cli/boundary.py).
    if sys.stderr.isatty():
        with click.progressbar(length=episodes, label="encoding episodes", file=sys.stderr) as bar:
            report = write_sample_dataset(out, spec, progress=lambda done, total: bar.update(1))
    else:  # a log: periodic lines with counts and ETA
        log = ProgressLog("make-sample", unit="episodes")
        try:
            report = write_sample_dataset(out, spec, progress=lambda done, total: log.update(done, total))
        finally:
            log.close()
    click.echo(
        f"wrote {report.episodes} episodes, {report.frames} frames, {report.data_files} data files, "
        f"video files {report.video_files}, {report.bytes / 1e6:.2f} MB to {report.root}"
    )
