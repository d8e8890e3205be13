"""Shuffled random access (issue 66): ``PackedLeRobotDataset`` against LeRobot 0.6.1's map-style
``LeRobotDataset`` and against our own episode-pool path, rounds alternated in one run.

    .venv/bin/python benchmarks/bench_random_access.py \\
        --sources ../shared/datasets/aloha_cube_4cam,/path/aloha_1cam --out bench-out/random-access

For each source (a LeRobot v3 dataset; packed in copy mode once), each batch size and worker
count, ``--rounds`` rounds, each round measuring every system once, in an order rotated by
round (a drift of the machine's speed favours none):

- ``map``: ``PackedLeRobotDataset(return_uint8=True)`` + ``DataLoader(shuffle=True)``: a shuffled
  sampler over every frame, batches through ``__getitems__``;
- ``map-batchloader``: the same dataset and a seeded shuffle through ``BatchLoader(ds,
  shuffle=True)``: the same batches ``__getitems__`` builds, carried in the workers' reused
  shared-memory ring instead of ``default_collate``'s fresh shared memory per batch;
- ``pool``: ``BatchLoader(PackedDataset(return_uint8=True))``, the episode-pool stream;
- ``lerobot-map-uint8``: LeRobot's ``LeRobotDataset(return_uint8=True)`` (what its trainer asks
  for) + ``DataLoader(shuffle=True)`` on the unpacked source, from ``.venv-parity`` (skipped,
  saying so, without it).

All decode with torchcodec on the same cores (``--workers`` worker processes each); single
frames (``single``) or a 50-step action chunk with 2 frames per camera (``chunk``). Each row has
samples/s, the process tree's busy cores, the largest worker's peak RSS, and for ``map`` the
random-access cache's counted peaks (episodes and bytes held). Writes ``results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.lerobot_baseline import run_lerobot
from benchmarks.loader_measure import delta_for, measure_loader
from lerobot_shards import BatchLoader, PackedDataset, PackedLeRobotDataset, pack_dataset

SYSTEMS = ("map", "map-batchloader", "pool", "lerobot-map-uint8")
MAPS = ("map", "map-batchloader")


def packed(source: Path, out: Path) -> Path:
    dst = out / f"{source.name}.packed"
    if not (dst / "manifest.json").exists():
        print(f"[bench] packing {source} -> {dst}", flush=True)
        pack_dataset(str(source), str(dst), workers=max(1, os.cpu_count() or 1))
    return dst


def measure(system: str, source: Path, pack: Path, delta, args, batch_size: int, workers: int, seed: int) -> dict:
    """One system's row (see the module docstring)."""
    if system.startswith("lerobot"):
        return run_lerobot(
            system, source, delta, workers=workers, batch_size=batch_size, warmup=args.warmup, max_batches=args.max_batches
        )
    if system in MAPS:
        dataset = PackedLeRobotDataset(str(pack), delta_timestamps=delta, return_uint8=True)

        def make_loader():
            if system == "map-batchloader":
                return BatchLoader(dataset, batch_size=batch_size, shuffle=True, seed=seed, num_workers=workers)
            generator = torch.Generator().manual_seed(seed)
            return torch.utils.data.DataLoader(
                dataset, batch_size=batch_size, shuffle=True, num_workers=workers, generator=generator
            )

        row = measure_loader(make_loader, warmup=args.warmup, max_batches=args.max_batches, workers=max(workers, 1))
        stats = dataset.stats()
        return {**row, "held_episodes_peak": stats["max_open_episodes"], "held_mb_peak": stats["max_open_bytes"] / 1e6}
    stream = PackedDataset(str(pack), delta_timestamps=delta, return_uint8=True, seed=seed)
    return measure_loader(
        lambda: BatchLoader(stream, batch_size=batch_size, num_workers=workers),
        warmup=args.warmup,
        max_batches=args.max_batches,
        workers=max(workers, 1),
    )


def summarize(rows: list[dict]) -> list[dict]:
    """Per source, mode, batch size and workers: each system's median samples/s over the rounds,
    and ``map`` over each other system (median of per-round ratios, and the lowest round)."""
    out = []
    keys = sorted({(r["source"], r["mode"], r["batch_size"], r["workers"]) for r in rows})
    for key in keys:
        group = [r for r in rows if (r["source"], r["mode"], r["batch_size"], r["workers"]) == key]
        rates = {s: [r["samples_per_s"] for r in group if r["system"] == s and r.get("samples_per_s")] for s in SYSTEMS}
        line = dict(zip(("source", "mode", "batch_size", "workers"), key))
        line.update({f"{s}_samples_per_s": round(statistics.median(v), 1) for s, v in rates.items() if v})
        for mine in MAPS:
            for other in ("pool", "lerobot-map-uint8"):
                per_round = [
                    a["samples_per_s"] / b["samples_per_s"]
                    for a in group
                    for b in group
                    if a["system"] == mine and b["system"] == other and a["round"] == b["round"] and b.get("samples_per_s")
                ]
                if per_round:
                    ratio = {"median": round(statistics.median(per_round), 2), "lowest": round(min(per_round), 2)}
                    line[f"{mine}_vs_{other}"] = ratio
        workers_mb = {s: max((r.get("peak_worker_rss_mb") or 0) for r in group if r["system"] == s) for s in SYSTEMS}
        line["peak_worker_rss_mb"] = {s: round(v) for s, v in workers_mb.items() if v}
        out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", required=True, help="LeRobot v3 dataset roots, comma-separated")
    parser.add_argument("--out", type=Path, default=Path("bench-out/random-access"))
    parser.add_argument("--modes", default="single,chunk")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--batch-sizes", default="16,32")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--max-batches", type=int, default=23)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # the training process's own ops must not spin against the workers
    systems = args.systems.split(",")
    rows: list[dict] = []
    for source in map(Path, args.sources.split(",")):
        pack = packed(source, args.out)
        manifest = json.loads((pack / "manifest.json").read_text())
        for mode in args.modes.split(","):
            delta = delta_for(mode, list(manifest["video_keys"]), manifest["fps"])
            for batch_size in map(int, args.batch_sizes.split(",")):
                for workers in map(int, args.workers.split(",")):
                    for round_ in range(args.rounds):
                        for system in systems[round_ % len(systems) :] + systems[: round_ % len(systems)]:
                            result = measure(system, source, pack, delta, args, batch_size, workers, seed=round_)
                            row = {"source": source.name, "mode": mode, "batch_size": batch_size, "workers": workers}
                            rows.append({**row, "round": round_, "system": system, **result})
                            rate = result.get("samples_per_s")
                            print(
                                f"[bench] {source.name} {mode} b{batch_size} w{workers} r{round_} {system}: "
                                f"{round(rate, 1) if rate else result}",
                                flush=True,
                            )
    summary = summarize(rows)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "torch": torch.__version__, "decoder": "torchcodec"}
    (args.out / "results.json").write_text(
        json.dumps({"machine": machine, "args": vars(args) | {"out": str(args.out)}, "rows": rows, "summary": summary}, indent=1)
    )
    print(json.dumps(summary, indent=1))
    return 1 if any(not r.get("samples_per_s") for r in rows if not r["system"].startswith("lerobot")) else 0


if __name__ == "__main__":
    raise SystemExit(main())
