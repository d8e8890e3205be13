"""Copy-mode pack against a plain copy of the same bytes, in one run, on realistic data.

    .venv/bin/python benchmarks/replicate_dataset.py ../shared/datasets/aloha_cube_4cam bench-out/aloha-x40 --times 40
    .venv/bin/python benchmarks/bench_copy_pack.py --source bench-out/aloha-x40 --rounds 3 --out benchmarks/results/cpu2-copy-pack.json

Each round, one after another on the same disk with the page cache warm: ``cp -r`` of the
source, then ``sync`` (timed apart: a pack makes its commits durable, ``cp`` does not), then
``lerobot-shards pack --video copy`` with 1 and with 2 workers (a process each, as a user runs
it), each followed by a timed ``sync``. ``--checkout REV`` adds the same pack from another
commit of this repository (a git worktree), to compare before and after in the same run.
Reports MB/s of source bytes and ratios to ``cp`` (medians over rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(command: list[str], *, env: dict | None = None, cwd: Path | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=3600)
    return time.perf_counter() - started


def _sync() -> float:
    started = time.perf_counter()
    os.sync()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--checkout", default=None, help="also time the pack of this git revision")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    source_bytes = sum(p.stat().st_size for p in args.source.rglob("*") if p.is_file())
    systems: dict[str, tuple[list[str], dict | None, Path | None]] = {
        "pack": ([sys.executable, "-m", "lerobot_shards.cli", "pack", "--video", "copy"], None, ROOT),
        "pack --workers 2": (
            [sys.executable, "-m", "lerobot_shards.cli", "pack", "--video", "copy", "--workers", "2"],
            None,
            ROOT,
        ),
    }
    worktree = None
    if args.checkout:
        worktree = Path(tempfile.mkdtemp(prefix="bench-checkout-")) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(worktree), args.checkout], check=True, capture_output=True
        )
        env = {**os.environ, "PYTHONPATH": str(worktree)}
        systems[f"pack @{args.checkout}"] = (
            [sys.executable, "-m", "lerobot_shards.cli", "pack", "--video", "copy"],
            env,
            worktree,
        )
    results: dict[str, dict[str, list[float]]] = {name: {"seconds": [], "sync": []} for name in ["cp -r", *systems]}
    scratch = Path(tempfile.mkdtemp(prefix="bench-copy-")).resolve()
    try:
        for round_number in range(args.rounds):
            _sync()
            target = scratch / "cp"
            results["cp -r"]["seconds"].append(_timed(["cp", "-r", str(args.source), str(target)]))
            results["cp -r"]["sync"].append(_sync())
            shutil.rmtree(target)
            _sync()
            for name, (command, env, cwd) in systems.items():
                target = scratch / "pack"
                results[name]["seconds"].append(_timed([*command, str(args.source.resolve()), str(target)], env=env, cwd=cwd))
                results[name]["sync"].append(_sync())
                shutil.rmtree(target)
                _sync()
            print(
                f"round {round_number + 1}: "
                + ", ".join(f"{n} {r['seconds'][-1]:.2f}+{r['sync'][-1]:.2f} s" for n, r in results.items()),
                flush=True,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if worktree is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], capture_output=True)
    cp = statistics.median(results["cp -r"]["seconds"])
    cp_synced = statistics.median([a + b for a, b in zip(results["cp -r"]["seconds"], results["cp -r"]["sync"])])
    summary = {}
    for name, runs in results.items():
        seconds = statistics.median(runs["seconds"])
        synced = statistics.median([a + b for a, b in zip(runs["seconds"], runs["sync"])])
        summary[name] = {
            "seconds": seconds,
            "seconds_with_sync": synced,
            "mb_per_s": source_bytes / 1e6 / seconds,
            "vs_cp": cp / seconds,
            "vs_cp_with_sync": cp_synced / synced,
        }
        print(
            f"{name:24} {seconds:6.2f} s ({summary[name]['mb_per_s']:7.0f} MB/s) {summary[name]['vs_cp']:.2f}x cp; "
            f"with sync {synced:6.2f} s, {summary[name]['vs_cp_with_sync']:.2f}x cp+sync"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
                "source_bytes": source_bytes,
                "runs": results,
                "summary": summary,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
