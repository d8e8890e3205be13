"""The CPU decode path, measured the way a pretraining user decides by (issue 44). Three tables,
every row naming its decoder and the cores it ran on:

1. ``decoders``: torchcodec (LeRobot's decoder, the default) against PyAV (the fallback when
   torchcodec does not import), one process, ``decode_threads=1``, single frames, 4 cameras of
   480x640 AV1 written by LeRobot (the shared ALOHA set, packed in copy mode); alternating reps.
2. ``threads``: ``decode_threads`` 1 against 2 and the default (``auto``) by frame size, 2
   cameras per sample, ``BatchLoader`` with 1 worker and batch 16 (the worker's threads share
   the cores with the main process, as in training); alternating reps.
3. ``workers``: ``BatchLoader`` with 1 and 2 workers (torchcodec, uint8 frames, batch 16),
   timed after every worker's prefetch is full; samples/s, busy cores (CPU time of the main
   process and its workers over the window / wall time) and frames/s per busy core.

    .venv/bin/python benchmarks/bench_decoders.py --out bench-out/decoders

Prints the tables as markdown and writes them to ``OUT/decoders.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proc_stats import children, cpu_ticks

ALOHA = ROOT.parent / "shared" / "datasets" / "aloha_cube_4cam"
TICK = os.sysconf("SC_CLK_TCK")
SIZES = [(96, 128), (224, 224), (240, 320), (360, 480), (480, 640)]


def samples_per_s(root: str, samples: int, warmup: int, **options) -> float:
    """Samples/s of one in-process stream (what one DataLoader worker does) after ``warmup``."""
    from lerobot_shards import PackedDataset

    stream = iter(PackedDataset(root, seed=0, return_uint8=True, **options))
    for _ in range(warmup):
        next(stream)
    started = time.perf_counter()
    for _ in range(samples):
        next(stream)
    return samples / (time.perf_counter() - started)


def alternate(runs: int, cases: dict[str, dict], measure) -> dict[str, list[float]]:
    """Each case measured ``runs`` times, cases interleaved (ABAB...): load drifts hit all alike."""
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, options in cases.items():
            out[name].append(measure(**options))
    return out


def table_decoders(packed: str, runs: int, samples: int) -> list[dict]:
    cameras = 4
    rates = alternate(
        runs,
        {"torchcodec": {"decoder": "torchcodec"}, "pyav": {"decoder": "pyav"}},
        lambda decoder: samples_per_s(packed, samples, 16, decoder=decoder, decode_threads=1),
    )
    rows = []
    for decoder, values in rates.items():
        median = statistics.median(values)
        rows.append(
            {
                "decoder": decoder,
                "cores": "1 process, decode_threads=1",
                "samples_per_s": round(median, 1),
                "frames_per_s": round(median * cameras, 1),
                "runs": [round(v, 1) for v in values],
            }
        )
    rows[1]["vs_torchcodec"] = round(rows[1]["samples_per_s"] / rows[0]["samples_per_s"], 2)
    return rows


def small_pack(work: Path, height: int, width: int) -> str:
    """A synthetic dataset of 2 cameras of ``height`` x ``width`` (AV1, as LeRobot writes), packed."""
    from lerobot_shards import pack_dataset
    from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

    source, packed = work / f"src-{height}x{width}", work / f"pack-{height}x{width}"
    if not (packed / "manifest.json").exists():
        cams = (CameraSpec("observation.images.a", height, width), CameraSpec("observation.images.b", height, width))
        write_sample_dataset(source, SampleSpec(episodes=8, min_length=120, max_length=150, cameras=cams))
        pack_dataset(str(source), str(packed))
    return str(packed)


def table_threads(work: Path, runs: int, batches: int) -> list[dict]:
    rows = []
    for height, width in SIZES:
        packed = small_pack(work, height, width)
        rates = alternate(
            runs,
            {"1": {"threads": 1}, "2": {"threads": 2}, "auto": {"threads": None}},
            lambda threads: loader_rate(packed, 1, batches, 2, decode_threads=threads)["samples_per_s"],
        )
        for threads, values in rates.items():
            rows.append(
                {
                    "frames": f"2 x {height}x{width}",
                    "decoder": "torchcodec",
                    "workers": 1,
                    "decode_threads": threads,
                    "cores": os.cpu_count(),
                    "samples_per_s": round(statistics.median(values), 1),
                    "runs": [round(v, 1) for v in values],
                }
            )
    return rows


def loader_rate(packed: str, workers: int, batches: int, cameras: int, **options) -> dict:
    """Samples/s and busy cores of a BatchLoader with ``workers`` workers, after warm-up."""
    from lerobot_shards import BatchLoader, PackedDataset

    dataset = PackedDataset(packed, seed=0, return_uint8=True, decoder="torchcodec", **options)
    loader = iter(BatchLoader(dataset, batch_size=16, num_workers=workers))
    for _ in range(6):  # past every worker's prefetch (2 batches each) and its pool fill
        next(loader)
    pids = [os.getpid(), *children()]
    ticks = sum(cpu_ticks(p) for p in pids)
    started, n = time.perf_counter(), 0
    for _ in range(batches):
        n += len(next(loader)["index"])
    wall = time.perf_counter() - started
    busy = (sum(cpu_ticks(p) for p in pids if os.path.exists(f"/proc/{p}")) - ticks) / TICK / wall
    return {"samples_per_s": n / wall, "busy_cores": busy, "frames_per_busy_core": n * cameras / wall / busy}


def table_workers(packed: str, runs: int, batches: int) -> list[dict]:
    cameras = 4
    results = alternate(
        runs, {"1": {"workers": 1}, "2": {"workers": 2}}, lambda workers: loader_rate(packed, workers, batches, cameras)
    )
    rows = []
    for workers, values in results.items():
        rows.append(
            {
                "workers": int(workers),
                "decoder": "torchcodec",
                "cores": os.cpu_count(),
                "samples_per_s": round(statistics.median(v["samples_per_s"] for v in values), 1),
                "busy_cores": round(statistics.median(v["busy_cores"] for v in values), 2),
                "frames_per_busy_core": round(statistics.median(v["frames_per_busy_core"] for v in values), 1),
            }
        )
    one, two = rows
    two["per_core_vs_1_worker"] = round(two["frames_per_busy_core"] / one["frames_per_busy_core"], 2)
    return rows


def markdown(rows: list[dict]) -> str:
    keys = [k for k in rows[0] if k != "runs"] + (["runs"] if "runs" in rows[0] else [])
    keys += [k for r in rows for k in r if k not in keys]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(ALOHA))
    parser.add_argument("--out", default="bench-out/decoders")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=150)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--tables", default="decoders,threads,workers")
    args = parser.parse_args()
    from lerobot_shards import pack_dataset

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.gettempdir()) / "bench-decoders"
    work.mkdir(exist_ok=True)
    packed = work / "aloha-copy"
    if not (packed / "manifest.json").exists():
        pack_dataset(args.source, str(packed))
    tables: dict[str, list[dict]] = {}
    if "decoders" in args.tables:
        tables["decoders"] = table_decoders(str(packed), args.runs, args.samples)
    if "threads" in args.tables:
        tables["threads"] = table_threads(work, args.runs, args.batches * 4)
    if "workers" in args.tables:
        tables["workers"] = table_workers(str(packed), args.runs, args.batches)
    for name, rows in tables.items():
        print(f"\n{name}\n{markdown(rows)}")
    (out / "decoders.json").write_text(json.dumps(tables, indent=1))


if __name__ == "__main__":
    main()
