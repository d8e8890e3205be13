"""x265 presets for ``--video hevc``: encode speed per core against fidelity to the source.

    .venv/bin/python benchmarks/bench_x265_presets.py --source ../shared/datasets/aloha_cube_4cam --frames 250 \\
        --cameras 2 --out benchmarks/results/cpu2-x265-presets.json

For each preset, the first ``--frames`` frames of ``--cameras`` cameras of the source (LeRobot
AV1, decoded once, beforehand) are encoded with the packer's own ``EncodeSettings`` (closed GOP
2, no B-frames, CRF 23), x265 held to one thread (``pools=1:frame-threads=1``) so CPU seconds
measure one core; then every encoded frame is decoded and compared with the source's decoded
frame (RGB, as the reader returns them): PSNR mean and minimum over frames, bytes per frame.
A preset qualifies for the default at >= 35 dB on the worst frame; the fastest one wins.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lerobot_shards.packer.shard import EncodeSettings

PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium")
FLOOR_DB = 35.0


def source_frames(source: Path, frames: int, cameras: int) -> list[list[av.VideoFrame]]:
    """The first ``frames`` decoded frames (yuv420p) of the first ``cameras`` camera files."""
    out = []
    for video in sorted((source / "videos").glob("*/chunk-000/file-000.mp4"))[:cameras]:
        with av.open(str(video)) as container:
            decoded = []
            for frame in container.decode(video=0):
                decoded.append(frame.reformat(format="yuv420p"))
                if len(decoded) == frames:
                    break
        out.append(decoded)
    return out


def encode(frames: list[av.VideoFrame], fps: int, preset: str) -> tuple[bytes, float]:
    """The member the packer would write with ``preset`` (one x265 thread), and the CPU seconds
    the encoder took."""
    settings = EncodeSettings("hevc", preset=preset)
    options = settings.options(frames[0].width, frames[0].height)
    options["x265-params"] += ":pools=1:frame-threads=1"
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4", options={"fflags": "+bitexact"}) as sink:
        stream = sink.add_stream(settings.encoder_name(), rate=fps, options=options)
        stream.pix_fmt, stream.height, stream.width, stream.codec_tag = "yuv420p", frames[0].height, frames[0].width, "hvc1"
        started = time.process_time()
        packets = []
        for i, frame in enumerate(frames):
            frame.pts, frame.time_base = i, Fraction(1, fps)
            packets += stream.encode(frame)
        packets += stream.encode()
        cpu = time.process_time() - started
        for packet in packets:
            sink.mux(packet)
    return buffer.getvalue(), cpu


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float32) - b.astype(np.float32)) ** 2))
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--frames", type=int, default=250)
    parser.add_argument("--cameras", type=int, default=2)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    cameras = source_frames(args.source, args.frames, args.cameras)
    references = [[f.to_ndarray(format="rgb24") for f in frames] for frames in cameras]
    rows = []
    for preset in args.presets.split(","):
        cpu = 0.0
        size = 0
        scores = []
        count = 0
        for frames, reference in zip(cameras, references):
            data, seconds = encode(frames, args.fps, preset)
            cpu += seconds
            size += len(data)
            with av.open(io.BytesIO(data)) as container:
                decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
            if len(decoded) != len(reference):
                raise AssertionError(f"{preset}: {len(decoded)} frames decoded of {len(reference)} encoded")
            scores += [psnr(a, b) for a, b in zip(decoded, reference)]
            count += len(frames)
        row = {
            "preset": preset,
            "frames": count,
            "frames_per_s_per_core": count / cpu,
            "psnr_mean_db": float(np.mean(scores)),
            "psnr_min_db": float(np.min(scores)),
            "bytes_per_frame": size / count,
        }
        rows.append(row)
        print(
            f"{preset:10} {row['frames_per_s_per_core']:6.1f} frames/s/core  PSNR mean {row['psnr_mean_db']:.1f} "
            f"min {row['psnr_min_db']:.1f} dB  {row['bytes_per_frame']:.0f} B/frame",
            flush=True,
        )
    qualifying = [r for r in rows if r["psnr_min_db"] >= FLOOR_DB]
    best = max(qualifying, key=lambda r: r["frames_per_s_per_core"])["preset"] if qualifying else None
    print(f"fastest preset with every frame >= {FLOOR_DB} dB: {best}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "machine": platform.machine(),
                "pyav": av.__version__,
                "size": [cameras[0][0].height, cameras[0][0].width],
                "rows": rows,
                "default": best,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
