"""Where the milliseconds of a multi-camera sample go, in one process (issue 32).

    .venv/bin/python benchmarks/bench_sample_profile.py --packed bench-out/real-4cam-32/packed-copy

``BatchLoader(num_workers=0)`` (batches built in this process, nothing crosses a process) over
the pack, uint8, shuffled, for ``single`` (one frame per camera) and ``chunk`` (50 actions + 2
frames per camera), with ``decode_threads`` 1 (cameras one after another) and 2 (side by
side). Per sample: the wall time, the part inside the decode step (``stats()["decode_seconds"]``:
the cameras' decodes, on threads or not, and the uint8 → float conversion when asked), the
frames decoded, and the rest (fetch waits, rows, windows, batch assembly, Python). Warm-up
batches are excluded. Prints a table and writes ``--out``/results.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loader_measure import delta_for
from lerobot_shards import BatchLoader, PackedDataset


def profile(packed: Path, mode: str, threads: int, batches: int, warmup: int, batch_size: int) -> dict:
    manifest = json.loads((packed / "manifest.json").read_text())
    delta = delta_for(mode, list(manifest["video_keys"]), manifest["fps"])
    dataset = PackedDataset(str(packed), delta_timestamps=delta, seed=0, return_uint8=True, decode_threads=threads)
    loader = iter(BatchLoader(dataset, batch_size=batch_size, num_workers=0))
    for _ in range(warmup):
        next(loader)
    before = dataset.stats()
    started = time.perf_counter()
    samples = 0
    for _ in range(batches):
        samples += len(next(loader)["index"])
    wall = time.perf_counter() - started
    after = dataset.stats()
    decode = after["decode_seconds"] - before["decode_seconds"]
    frames = after["frames_decoded"] - before["frames_decoded"]
    return {
        "mode": mode,
        "decode_threads": threads,
        "samples": samples,
        "ms_per_sample": 1000 * wall / samples,
        "decode_ms_per_sample": 1000 * decode / samples,
        "other_ms_per_sample": 1000 * (wall - decode) / samples,
        "frames_per_sample": frames / samples,
        "samples_per_s": samples / wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--packed", type=Path, required=True, help="a packed dataset (e.g. bench_real.py's packed-copy)")
    parser.add_argument("--out", type=Path, default=Path("bench-out/sample-profile"))
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [
        profile(args.packed, mode, threads, args.batches, args.warmup, args.batch_size)
        for mode in ("single", "chunk")
        for threads in (1, 2)
    ]
    print("| mode | decode_threads | ms / sample | in decode | other | frames / sample | samples/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['decode_threads']} | {r['ms_per_sample']:.1f} | {r['decode_ms_per_sample']:.1f} | "
            f"{r['other_ms_per_sample']:.1f} | {r['frames_per_sample']:.0f} | {r['samples_per_s']:.1f} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
