"""Why the NVDEC stage stops scaling (GPU only): the stage alone on one pack's members, varied.

(Its NVDEC utilization column sampled the processes' start-up too and read 0-9%: ignore it.)

    PYTHONPATH=.:$SITE python benchmarks/nvdec_scaling.py PACK_HEVC [--seconds 4]

Prints frames/s and NVDEC utilization for: the stage as it is (8 threads); the same without
copying decoded frames out (output wrong, throughput of decode alone); batches 4x larger
(fewer per-batch barriers); and the stage split over processes (each its own CUDA context
and GIL) instead of threads. Results: docs/BENCHMARKS.md, "GPU decode at the shape
pretraining uses".
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _members(pack: str):
    from benchmarks.bench_gpu_decode import _members as members_of

    found = members_of(pack)
    return {key: [replace(m, indices=(0,), squeeze=False, as_float=False) for m in ms] for key, ms in found.items()}


def _run(pack: str, threads: int, batch: int, seconds: float, copy: bool, seed: int, start_at: float | None = None) -> dict:
    import torch

    from benchmarks.bench_gpu_decode import _batch
    from lerobot_shards.reader.decode import DecodeStage
    from lerobot_shards.reader.decode.backends import nvdec

    if not copy:
        nvdec._copy_function = lambda *args: 0  # frames decoded, not copied out
    members = _members(pack)
    rng = random.Random(seed)
    batches = [_batch(members, rng, batch, 1) for _ in range(24)]
    stage = DecodeStage("cuda", threads=threads, cache_size=1024)
    for b in batches[:3]:
        stage(dict(b))
    torch.cuda.synchronize()
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.time()))
    started, frames, i = time.perf_counter(), 0, 0
    while time.perf_counter() - started < seconds:
        out = stage(dict(batches[i % len(batches)]))
        frames += sum(out[key].shape[0] for key in members)
        i += 1
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    stage.close()
    return {"frames": frames, "seconds": elapsed, "frames_per_s": frames / elapsed}


def _process(args, queue) -> None:
    queue.put(_run(*args))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pack")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    from benchmarks.bench_gpu_decode import DecoderUtilization

    rows = []
    for name, threads, batch, copy in (
        ("stage, 8 threads", 8, 64, True),
        ("no frame copies, 8 threads", 8, 64, False),
        ("batches of 256, 8 threads", 8, 256, True),
        ("stage, 16 threads, batches of 256", 16, 256, True),
    ):
        context = multiprocessing.get_context("spawn")  # a fresh process per variant: the copy patch stays in it
        queue = context.Queue()
        with DecoderUtilization() as utilization:
            process = context.Process(target=_process, args=((args.pack, threads, batch, args.seconds, copy, 0), queue))
            process.start()
            result = queue.get(timeout=300)
            process.join(timeout=60)
        row = {
            "variant": name,
            **result,
            "decoder_utilization_pct": sorted(utilization.samples)[len(utilization.samples) // 2]
            if utilization.samples
            else None,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    for processes, threads in ((2, 4), (4, 2), (4, 4)):
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        start_at = time.time() + 15  # every process has opened CUDA and its members by then
        with DecoderUtilization() as utilization:
            workers = [
                context.Process(target=_process, args=((args.pack, threads, 64, args.seconds, True, p, start_at), queue))
                for p in range(processes)
            ]
            for w in workers:
                w.start()
            results = [queue.get(timeout=300) for _ in workers]
            for w in workers:
                w.join(timeout=60)
        row = {
            "variant": f"{processes} processes x {threads} threads",
            "frames_per_s": sum(r["frames_per_s"] for r in results),
            "per_process": [round(r["frames_per_s"]) for r in results],
            "decoder_utilization_pct": sorted(utilization.samples)[len(utilization.samples) // 2]
            if utilization.samples
            else None,
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
