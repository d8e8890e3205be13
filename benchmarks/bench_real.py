"""Reader benchmark on realistic footage: 480x640 multi-camera scenes, against LeRobot and the decode ceiling.

    .venv/bin/python benchmarks/bench_real.py --source ../shared/datasets/aloha_cube_4cam --out bench-out/real-4cam

Packs ``--source`` (a LeRobot v3 dataset; ``--video copy`` keeps its AV1, ``hevc``/``h264``
re-encode with ``--gop``/``--crf``), then for each mode (``single``: one frame per camera;
``chunk``: a 50-step action chunk plus 2 frames per camera) measures, one system at a time:

- ``lerobot-map``: LeRobot 0.6.1's ``LeRobotDataset`` + ``DataLoader(shuffle=True)`` on the
  unpacked source (float32 frames), from ``.venv-parity``; skipped with a message without it;
- ``lance``/``lance-uint8``: lerobot-lancedb 0.3.1's ``LanceDBDataset`` (a peer: the source
  converted to Lance tables once, read map-style with a global shuffle) + a shuffled
  ``DataLoader``, float32 or uint8 frames, from ``.venv-parity`` (``pip install lerobot-lancedb
  lancedb`` there);
- ``float32``: ``PackedDataset`` + ``DataLoader``, LeRobot-identical float32 samples;
- ``uint8``: ``PackedDataset(return_uint8=True)`` + ``DataLoader``;
- ``batchloader``: ``BatchLoader(PackedDataset(return_uint8=True))``, the recommended path
  (``decode_threads`` by default: a sample's cameras decode side by side on the cores the
  workers leave idle);
- ``batchloader-serial``: the same with ``decode_threads=1`` (cameras one after another) and
  ``build_ahead=0``: one thread per worker, the ceiling's cores;
- ``batchloader-inline``: ``batchloader`` with ``build_ahead=0`` (each worker builds its samples
  on the thread that fills the batch: no decode while a sample is copied);
- ``batchloader-float32``: ``BatchLoader`` over LeRobot-identical float32 samples;
- ``batchloader+to-float``: ``batchloader``, then ``to_device(batch, "cpu")`` in the training
  loop: float32 frames bit-identical to LeRobot's, converted in the training process;
- ``inprocess``: the same with ``num_workers=0`` (batches built in the training process);
- ``ceiling``: torchcodec alone on the same members' frames, decoders open, one process per
  worker (``benchmarks/decode_ceiling.py``).

Every loader runs with ``--workers`` worker processes (the ceiling with as many processes), so
ratios compare the same cores. The training loop touches every page of each batch (a trainer
would copy it to its GPU) and does nothing else. Writes results.json and chart.png to --out.
Exits non-zero if a system of ours measured 0 samples.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks.decode_ceiling import decode_ceiling
from benchmarks.lerobot_baseline import run_lerobot
from benchmarks.loader_measure import delta_for, measure_loader
from lerobot_shards import BatchLoader, PackedDataset, pack_dataset, to_device

SYSTEMS = (
    "lerobot-map",
    "lance",
    "lance-uint8",
    "float32",
    "uint8",
    "batchloader",
    "batchloader-serial",
    "batchloader-inline",
    "batchloader-float32",
    "batchloader+to-float",
    "inprocess",
    "ceiling",
)


def pack(source: Path, out: Path, args) -> Path:
    name = "packed-copy" if args.video == "copy" else f"packed-{args.video}-g{args.gop}" + (f"-crf{args.crf}" if args.crf else "")
    dst = out / name
    if not (dst / "manifest.json").exists():
        print(f"[bench] packing {source} -> {dst} ({args.video})", flush=True)
        pack_dataset(str(source), str(dst), video=args.video, gop=args.gop, crf=args.crf, workers=max(1, os.cpu_count() or 1))
    return dst


def measure(
    system: str, packed: Path, source: Path, delta, args, *, record: list | None = None, frames: list | None = None
) -> dict:
    """One system's row. ``record`` receives the measured samples' ``(episode_index,
    frame_index)`` (a loader); ``frames`` makes the ceiling decode exactly those (see
    ``decode_ceiling``)."""
    if system == "lerobot-map" or system.startswith("lance"):
        return run_lerobot(
            system,
            source,
            delta,
            workers=args.workers,
            batch_size=args.batch_size,
            warmup=args.warmup,
            max_batches=args.max_batches,
            lance_root=args.out / "lance",
        )
    if system == "ceiling":
        samples = (args.max_batches - args.warmup) * args.batch_size
        return decode_ceiling(packed, delta, samples, max(args.workers, 1), args.seed, frames=frames)
    dataset = PackedDataset(
        str(packed),
        delta_timestamps=delta,
        seed=args.seed,
        return_uint8=not system.endswith("float32"),
        decode_threads=1 if system.endswith("serial") else None,
    )
    if system.startswith("batchloader") or system == "inprocess":
        workers = 0 if system == "inprocess" else args.workers

        def make_loader():
            # "-inline", "-serial": each worker builds its samples on the thread that fills the batch (build_ahead=0)
            inline = {"build_ahead": 0} if system.endswith(("inline", "serial")) else {}
            loader = BatchLoader(
                dataset, batch_size=args.batch_size, num_workers=workers, prefetch_factor=args.prefetch_factor, **inline
            )
            if system == "batchloader+to-float":
                return (to_device(batch, "cpu") for batch in loader)
            return loader
    else:

        def make_loader():
            return torch.utils.data.DataLoader(
                dataset,
                batch_size=args.batch_size,
                num_workers=args.workers,
                prefetch_factor=args.prefetch_factor if args.workers else None,
            )

    workers = 0 if system == "inprocess" else args.workers
    return measure_loader(make_loader, warmup=args.warmup, max_batches=args.max_batches, workers=max(workers, 1), record=record)


def summarize(rows: list[dict]) -> dict:
    """Per mode, the issue's ratios: recommended path vs the ceiling (goal >= 0.8) and vs LeRobot
    (>= 3), the LeRobot-identical float32 path vs LeRobot (>= 2)."""
    out = {}
    for mode in dict.fromkeys(r["mode"] for r in rows):
        by = {r["system"]: r.get("samples_per_s") for r in rows if r["mode"] == mode}
        ratios = {}
        for ours in (
            "batchloader",
            "batchloader-serial",
            "batchloader-float32",
            "batchloader+to-float",
            "uint8",
            "float32",
            "inprocess",
        ):
            for base in ("ceiling", "lerobot-map", "lance", "lance-uint8"):
                if by.get(ours) and by.get(base):
                    ratios[f"{ours}_vs_{base}"] = round(by[ours] / by[base], 3)
        out[mode] = ratios
    return out


def chart(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    modes = list(dict.fromkeys(r["mode"] for r in rows))
    systems = list(dict.fromkeys(r["system"] for r in rows))
    figure, axes = plt.subplots(1, len(modes), figsize=(5 * len(modes), 3.6), squeeze=False)
    for axis, mode in zip(axes[0], modes):
        values = [next((r.get("samples_per_s") or 0 for r in rows if r["mode"] == mode and r["system"] == s), 0) for s in systems]
        colors = [
            "#999999" if s.startswith(("lerobot", "lance")) else "#d9a441" if s == "ceiling" else "#2b7bba" for s in systems
        ]
        axis.barh(systems, values, color=colors)
        axis.set_title(f"{mode}: samples/s")
        axis.invert_yaxis()
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True, help="a LeRobot v3 dataset root")
    parser.add_argument("--out", type=Path, default=Path("bench-out/real"))
    parser.add_argument("--modes", default="single,chunk")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--video", default="copy", choices=["copy", "hevc", "h264"])
    parser.add_argument("--gop", type=int, default=2)
    parser.add_argument("--crf", type=int, default=None)
    parser.add_argument("--workers", type=int, default=1, help="DataLoader workers (and ceiling processes)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--prefetch-factor", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--max-batches", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # the training process's own ops must not spin against the workers
    packed = pack(args.source, args.out, args)
    manifest = json.loads((packed / "manifest.json").read_text())
    cameras = list(manifest["video_keys"])
    rows: list[dict] = []
    for mode in args.modes.split(","):
        delta = delta_for(mode, cameras, manifest["fps"])
        delivered: list | None = None  # the first loader of ours' measured frames: the ceiling decodes those
        for system in args.systems.split(","):
            print(f"[bench] {mode} / {system} ...", flush=True)
            ours_system = system not in ("lerobot-map", "lance", "lance-uint8", "ceiling")
            record: list | None = [] if ours_system and delivered is None else None
            result = measure(system, packed, args.source, delta, args, record=record, frames=delivered)
            delivered = record if record is not None else delivered
            rows.append({"mode": mode, "system": system, **result})
            print(
                "        " + json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in result.items()}), flush=True
            )
    shards = sum(p.stat().st_size for p in (packed / "shards").glob("*.tar"))
    machine = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    dataset = {
        "source": str(args.source),
        "cameras": cameras,
        "frames": manifest["totals"]["frames"],
        "video": args.video,
        "gop": args.gop,
        "crf": args.crf,
        "shard_bytes": shards,
    }
    summary = summarize(rows)
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "machine": machine,
                "dataset": dataset,
                "args": {k: str(v) for k, v in vars(args).items()},
                "rows": rows,
                "summary": summary,
            },
            indent=1,
        )
    )
    chart(
        rows,
        args.out / "chart.png",
        f"{args.source.name}: {len(cameras)} cameras, {args.video}, {args.workers} worker(s), batch {args.batch_size}",
    )
    print(json.dumps(summary, indent=1))
    ours = [r for r in rows if r["system"] not in ("lerobot-map", "lance", "lance-uint8", "ceiling")]
    return 1 if any(not r.get("samples_per_s") for r in ours) else 0


if __name__ == "__main__":
    raise SystemExit(main())
