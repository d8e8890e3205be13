"""Reader benchmark: this reader vs the decode ceiling vs LeRobot, side by side, one machine.

    .venv/bin/python benchmarks/bench_read.py --out bench-out            # also `lerobot-shards bench`

Generates one LeRobot v3 source (AV1), packs it (copy, hevc, h264), then for each mode
(``single``: one frame, all cameras; ``sarm``: action window of 8 seconds; ``chunk``: a
50-step action chunk plus 2 past frames on every camera) measures, through a real DataLoader:
this reader on each pack, on the copy pack served from a moto S3 bucket, the decode ceiling
(same decoder, same anchors' frames, no DataLoader, no tabular work, one process per worker),
and LeRobot 0.6.1's ``LeRobotDataset`` (map-style, shuffled) and ``StreamingLeRobotDataset``
on the unpacked source (from ``.venv-parity``; skipped with a message when it is absent).
Writes results.json, results.csv and chart.png to --out. Exits non-zero if a system of ours
measured 0 samples.

The ratio to the decode ceiling on real footage (issue 57), at 1 and 4 cameras, single frames
and 50-step chunks, the two sides alternated in one run:

    .venv/bin/python benchmarks/bench_read.py --systems "" --out bench-out/ceiling \
        --ceiling-sources /work/bench-data/aloha_insertion_1cam,../shared/datasets/aloha_cube_4cam

Each ``--ceiling-sources`` dataset (LeRobot v3, its AV1 kept: ``--video copy``) is packed once;
then per mode and round: ``batchloader`` (the recommended path, ``--ceiling-workers`` workers,
uint8), ``batchloader-inline`` (the same, each worker building its samples on the thread that
fills the batch: ``build_ahead=0``), with several cameras also ``batchloader-serial`` (cameras
one after another, ``build_ahead=0``: one thread, the ceiling's cores), and the ``ceiling`` on
exactly the frames our path delivered, in its order (checked equal in every round); the first
side alternates by round.
Rows carry the reader's per-stage split (``stage_ms_per_sample``: decode, fetch, the rest, per
sample of one consumer) and the cores the process tree used; ``summary.ceiling_ratio`` has each
round's ratio and the lowest.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.bench_real import measure as measure_real, pack as pack_real
from benchmarks.decode_ceiling import decode_ceiling
from benchmarks.lerobot_baseline import run_lerobot
from benchmarks.loader_measure import delta_for as delta_for_real, measure_loader
from lerobot_shards import BatchLoader, PackedDataset, pack_dataset
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

MODES = {
    "single": None,
    "sarm": {"action": [float(s) for s in range(8)]},
    "chunk": "chunk",  # resolved per dataset: 50 action steps + 2 past frames per camera
}


def delta_for(mode: str, cameras: list[str], fps: int) -> dict | None:
    if mode == "chunk":
        window = {"action": [i / fps for i in range(50)]}
        window.update({key: [-1 / fps, 0.0] for key in cameras})
        return window
    return MODES[mode]


def build_data(out: Path, args) -> dict[str, Path]:
    source = out / "source"
    if not (source / "meta" / "info.json").exists():
        spec = SampleSpec(
            episodes=args.episodes,
            min_length=args.min_length,
            max_length=args.max_length,
            cameras=(CameraSpec("observation.images.top", *args.top), CameraSpec("observation.images.wrist", *args.wrist)),
            data_files_size_in_mb=5,
            video_files_size_in_mb=20,
        )
        write_sample_dataset(source, spec)
    packs = {"source": source}
    for video in ("copy", "hevc", "h264"):
        dst = out / f"packed-{video}"
        if not (dst / "manifest.json").exists():
            pack_dataset(str(source), str(dst), video=video, shard_size_mb=64, workers=args.workers)
        packs[video] = dst
    return packs


def ours(packed: str, delta, args, storage_options=None, batch_loader: bool = False) -> dict:
    """The LeRobot-identical float32 samples through a ``DataLoader``, or with ``batch_loader``
    the recommended path: uint8 frames, whole batches from ``BatchLoader``."""
    dataset = PackedDataset(
        packed, delta_timestamps=delta, seed=args.seed, storage_options=storage_options, return_uint8=batch_loader
    )

    def make_loader():
        if batch_loader:
            return BatchLoader(
                dataset,
                batch_size=args.batch_size,
                num_workers=args.workers,
                prefetch_factor=args.prefetch_factor,
                pin_memory=args.pin_memory,
            )
        return torch.utils.data.DataLoader(
            dataset,
            batch_size=args.batch_size,
            num_workers=args.workers,
            prefetch_factor=args.prefetch_factor,
            pin_memory=args.pin_memory,
            persistent_workers=False,
        )

    result = measure_loader(make_loader, warmup=args.warmup, max_batches=args.max_batches)
    stats = dataset.stats()
    worker_seconds = max(result["measured_s"], 1e-9) * max(args.workers, 1)
    result.update(
        fetch_share=stats["fetch_seconds"] / worker_seconds,
        decode_share=stats["decode_seconds"] / worker_seconds,
        decoder_hits=stats["decoder_hits"],
        decoder_misses=stats["decoder_misses"],
        episodes_admitted=stats["episodes_admitted"],
        max_open_episodes=stats["max_open_episodes"],
    )
    return result


def s3_packed(packed: Path):
    """Start moto_server on loopback and upload the copy pack; returns (url, options, stop)."""
    import socket
    import urllib.request

    import s3fs

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_EC2_METADATA_DISABLED": "true"}
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint, timeout=1)
            break
        except Exception:
            time.sleep(0.1)
    options = {"key": "bench", "secret": "bench", "client_kwargs": {"endpoint_url": endpoint}}
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("bench")
    fs.put(str(packed), "bench/packed", recursive=True)
    return "s3://bench/packed", options, process.terminate


def chart(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = sorted({r["mode"] for r in rows}, key=list(MODES).index)
    systems = list(dict.fromkeys(r["system"] for r in rows))
    figure, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 4), squeeze=False)
    for axis, mode in zip(axes[0], modes):
        values = [next((r.get("samples_per_s") or 0 for r in rows if r["mode"] == mode and r["system"] == s), 0) for s in systems]
        axis.barh(systems, values, color=["#2b7bba" if not s.startswith("lerobot") else "#999999" for s in systems])
        axis.set_title(f"{mode}: samples/s")
        axis.invert_yaxis()
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--modes", default="single,sarm,chunk")
    parser.add_argument("--systems", default="copy,batchloader,hevc,h264,ceiling,s3,lerobot-map,lerobot-streaming")
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--min-length", type=int, default=80)
    parser.add_argument("--max-length", type=int, default=160)
    parser.add_argument("--top", type=int, nargs=2, default=(240, 320), metavar=("H", "W"))
    parser.add_argument("--wrist", type=int, nargs=2, default=(128, 128), metavar=("H", "W"))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--prefetch-factor", type=int, default=2)
    parser.add_argument("--pin-memory", action="store_true")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--max-batches", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--ceiling-sources", default="", help="LeRobot v3 datasets (comma-separated) for the ratio to the ceiling"
    )
    parser.add_argument("--ceiling-rounds", type=int, default=3)
    parser.add_argument("--ceiling-workers", type=int, default=1)
    parser.add_argument("--ceiling-batch-size", type=int, default=16)
    parser.add_argument("--ceiling-max-batches", type=int, default=80)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    systems = [s for s in args.systems.split(",") if s]
    packs = build_data(args.out, args) if systems else {}
    cameras = ["observation.images.top", "observation.images.wrist"]
    rows: list[dict] = []
    s3 = s3_packed(packs["copy"]) if "s3" in systems else None
    try:
        for mode in args.modes.split(",") if systems else ():
            delta = delta_for(mode, cameras, 30)
            for system in systems:
                print(f"[bench] {mode} / {system} ...", flush=True)
                if system in ("copy", "hevc", "h264"):
                    result = ours(str(packs[system]), delta, args)
                elif system == "batchloader":
                    result = ours(str(packs["copy"]), delta, args, batch_loader=True)
                elif system == "s3":
                    result = ours(s3[0], delta, args, storage_options=s3[1])
                elif system == "ceiling":
                    samples = (args.max_batches - args.warmup) * args.batch_size
                    result = decode_ceiling(packs["copy"], delta, samples, max(args.workers, 1), args.seed)
                else:
                    result = run_lerobot(
                        system,
                        packs["source"],
                        delta,
                        workers=args.workers,
                        batch_size=args.batch_size,
                        warmup=args.warmup,
                        max_batches=args.max_batches,
                    )
                rows.append({"mode": mode, "system": system, **result})
                print(
                    "        " + json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items()}),
                    flush=True,
                )
    finally:
        if s3 is not None:
            s3[2]()
    for source in filter(None, args.ceiling_sources.split(",")):
        rows += ceiling_rows(Path(source), args)
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    summary = summarize(rows)
    (args.out / "results.json").write_text(
        json.dumps(
            {"machine": machine, "args": {k: str(v) for k, v in vars(args).items()}, "rows": rows, "summary": summary}, indent=1
        )
    )
    keys = sorted({k for r in rows for k in r})
    with open(args.out / "results.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    compared = [r for r in rows if "round" not in r]
    if compared:
        chart(compared, args.out / "chart.png")
    print(json.dumps(summary, indent=1))
    ours_rows = [r for r in rows if r["system"] in ("copy", "batchloader", "hevc", "h264", "s3")]
    return 1 if any(not r.get("samples_per_s") for r in ours_rows) else 0


def ceiling_rows(source: Path, args) -> list[dict]:
    """The recommended path against the decode ceiling on ``source`` (see the module docstring):
    per mode, ``--ceiling-rounds`` rounds, each measuring our path(s), then the ceiling."""
    settings = argparse.Namespace(
        video="copy",
        gop=2,
        crf=None,
        workers=args.ceiling_workers,
        batch_size=args.ceiling_batch_size,
        prefetch_factor=args.prefetch_factor,
        warmup=args.warmup,
        max_batches=args.ceiling_max_batches,
        seed=args.seed,
        out=args.out / f"ceiling-{source.name}",
    )
    settings.out.mkdir(parents=True, exist_ok=True)
    packed = pack_real(source, settings.out, settings)
    manifest = json.loads((packed / "manifest.json").read_text())
    video_keys = list(manifest["video_keys"])
    # batchloader-inline: the same without building ahead (build_ahead=0), measured in the same rounds
    ours = ["batchloader", "batchloader-inline", *(["batchloader-serial"] if len(video_keys) > 1 else [])]
    rows = []
    for mode in ("single", "chunk"):
        delta = delta_for_real(mode, video_keys, manifest["fps"])
        delivered: list | None = None  # what our path delivered in round 1: every later run must match
        for round_ in range(1, args.ceiling_rounds + 1):
            # Round 1 measures ours first (the ceiling needs the frames it delivered); later rounds
            # alternate which side goes first, so a drift of the machine's speed within a round
            # does not favour one side.
            order = (*ours, "ceiling") if round_ % 2 else ("ceiling", *ours)
            for system in order:
                print(
                    f"[bench] ceiling ratio: {source.name} ({len(video_keys)} cameras) {mode} / {system}, round {round_}",
                    flush=True,
                )
                record: list | None = None if system == "ceiling" else []
                result = measure_real(system, packed, source, delta, settings, record=record, frames=delivered)
                if record is not None:
                    if delivered is None:
                        delivered = record
                    elif record != delivered:
                        raise RuntimeError(
                            f"{system} delivered other frames than round 1 on {source.name} ({mode}): the reader is "
                            "not deterministic for a fixed seed, so the ceiling would not decode the same frames"
                        )
                rows.append(
                    {
                        "mode": mode,
                        "system": f"{system}@{source.name}",
                        "source": source.name,
                        "cameras": len(video_keys),
                        "round": round_,
                        "decoder": "torchcodec",
                        "workers": settings.workers,
                        **result,
                    }
                )
                print(
                    "        " + json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}),
                    flush=True,
                )
    return rows


def ceiling_ratios(rows: list[dict]) -> dict:
    """Per source and mode: each round's ratio of our path(s) to the ceiling, the lowest, the
    median (the run's figure: on a shared machine one round's ceiling can jump 20 % while our
    path's own counters hold; every round stays listed), and the ratio of the rounds' sums
    (samples over seconds, both sides)."""
    out: dict = {}
    for row in rows:
        if "round" not in row or row["system"].startswith("ceiling@"):
            continue
        ceiling = next(
            r
            for r in rows
            if r.get("source") == row["source"]
            and r["mode"] == row["mode"]
            and r.get("round") == row["round"]
            and r["system"].startswith("ceiling@")
        )
        system = row["system"].split("@")[0]
        entry = out.setdefault(f"{row['source']} ({row['cameras']} cameras)", {}).setdefault(row["mode"], {})
        ratios = entry.setdefault(system, {"rounds": [], "lowest": None, "median": None, "pooled": None, "_sums": [0.0] * 4})
        ratios["rounds"].append(round(row["samples_per_s"] / ceiling["samples_per_s"], 3))
        ratios["lowest"] = min(ratios["rounds"])
        ratios["median"] = round(statistics.median(ratios["rounds"]), 3)
        sums = ratios["_sums"]
        for i, value in enumerate((row["measured_samples"], row["measured_s"], ceiling["samples"], ceiling["seconds"])):
            sums[i] += value
        ratios["pooled"] = round((sums[0] / sums[1]) / (sums[2] / sums[3]), 3)
    for modes in out.values():
        for systems in modes.values():
            for ratios in systems.values():
                del ratios["_sums"]
    return out


def summarize(rows: list[dict]) -> dict:
    """Target ratios per mode: reader/ceiling (>= 0.8), reader/LeRobot map (>= 3), s3/local (>= 0.9)."""
    out = {}
    if any("round" in r for r in rows):
        out["ceiling_ratio"] = ceiling_ratios(rows)
    for mode in dict.fromkeys(r["mode"] for r in rows if "round" not in r):
        by = {r["system"]: r.get("samples_per_s") for r in rows if r["mode"] == mode}
        ratios = {}
        if by.get("copy") and by.get("ceiling"):
            ratios["copy_vs_ceiling"] = by["copy"] / by["ceiling"]
        if by.get("copy") and by.get("lerobot-map"):
            ratios["copy_vs_lerobot_map"] = by["copy"] / by["lerobot-map"]
        if by.get("batchloader") and by.get("lerobot-map"):
            ratios["batchloader_vs_lerobot_map"] = by["batchloader"] / by["lerobot-map"]
        if by.get("batchloader") and by.get("ceiling"):
            ratios["batchloader_vs_ceiling"] = by["batchloader"] / by["ceiling"]
        if by.get("copy") and by.get("lerobot-streaming"):
            ratios["copy_vs_lerobot_streaming"] = by["copy"] / by["lerobot-streaming"]
        if by.get("copy") and by.get("s3"):
            ratios["s3_vs_local"] = by["s3"] / by["copy"]
        out[mode] = ratios
    return out


if __name__ == "__main__":
    raise SystemExit(main())
