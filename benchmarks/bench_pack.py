"""Packer benchmark: copy-mode MB/s vs a plain file copy, re-encode frames/s vs the ffmpeg CLI,
and scaling with --workers 1,2, on one generated source on the same disk.

    .venv/bin/python benchmarks/bench_pack.py --source bench-out/source --out bench-out/pack
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lerobot_shards import pack_dataset
from lerobot_shards.packer.shard import EncodeSettings
from lerobot_shards.packer.source import LeRobotSource


def _timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def ffmpeg_reencode_seconds(source: LeRobotSource, codec: str) -> tuple[float, int]:
    """The ffmpeg CLI re-encoding each episode's frames with our settings (same GOP, CRF,
    preset, closed GOP, no B-frames); returns (seconds, frames)."""
    settings = EncodeSettings(codec=codec)

    def encoder_args(height: int, width: int) -> list[str]:
        options = settings.options(width, height)
        args = ["-c:v", settings.encoder_name(), "-pix_fmt", "yuv420p", "-crf", options["crf"], "-preset", options["preset"]]
        if codec == "hevc":
            return args + ["-x265-params", options["x265-params"], "-tag:v", "hvc1"]
        return args + [
            "-bf",
            "0",
            "-g",
            options["g"],
            "-keyint_min",
            options["keyint_min"],
            "-sc_threshold",
            "0",
            "-flags",
            "+cgop",
        ]

    frames, seconds = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for episode in source.episode_indices:
            for key in source.video_keys:
                args = encoder_args(int(source.features[key]["shape"][0]), int(source.features[key]["shape"][1]))
                location = source.video_location(episode, key)
                command = [
                    "ffmpeg",
                    "-v",
                    "error",
                    "-y",
                    "-ss",
                    f"{location.from_timestamp:.6f}",
                    "-to",
                    f"{location.to_timestamp:.6f}",
                    "-i",
                    str(location.path),
                    *args,
                    "-an",
                    f"{tmp}/out.mp4",
                ]
                seconds += _timed(lambda: subprocess.run(command, check=True))
                frames += source.episodes[episode].length
    return seconds, frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=Path("bench-out/source"))
    parser.add_argument("--out", type=Path, default=Path("bench-out/pack"))
    parser.add_argument("--codecs", default="hevc,h264", help="re-encode modes to measure ('' for copy only)")
    args = parser.parse_args()
    codecs = [c for c in args.codecs.split(",") if c]
    args.out.mkdir(parents=True, exist_ok=True)
    source = LeRobotSource(args.source)
    source_bytes = sum(p.stat().st_size for p in args.source.rglob("*") if p.is_file())
    frames = sum(int(e["length"]) for e in source.episodes.values()) * len(source.video_keys)
    results: dict = {"source_mb": source_bytes / 1e6, "video_frames": frames}

    copy_dir = args.out / "plain-copy"
    shutil.rmtree(copy_dir, ignore_errors=True)
    results["plain_copy_mb_s"] = source_bytes / 1e6 / _timed(lambda: shutil.copytree(args.source, copy_dir))
    for workers in (1, 2):
        dst = args.out / f"copy-w{workers}"
        shutil.rmtree(dst, ignore_errors=True)
        seconds = _timed(lambda: pack_dataset(str(args.source), str(dst), workers=workers, shard_size_mb=4))
        results[f"copy_w{workers}_mb_s"] = source_bytes / 1e6 / seconds
    for codec in codecs:
        for workers in (1, 2):
            dst = args.out / f"{codec}-w{workers}"
            shutil.rmtree(dst, ignore_errors=True)
            seconds = _timed(lambda: pack_dataset(str(args.source), str(dst), video=codec, workers=workers, shard_size_mb=4))
            results[f"{codec}_w{workers}_frames_s"] = frames / seconds
        cli_seconds, cli_frames = ffmpeg_reencode_seconds(source, codec)
        results[f"{codec}_ffmpeg_cli_frames_s"] = cli_frames / cli_seconds
    results["copy_vs_plain_copy"] = results["copy_w1_mb_s"] / results["plain_copy_mb_s"]
    for codec in codecs:
        results[f"{codec}_vs_ffmpeg_cli"] = results[f"{codec}_w1_frames_s"] / results[f"{codec}_ffmpeg_cli_frames_s"]
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
