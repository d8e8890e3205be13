"""A million episodes (issue 31): the largest corpora open in seconds.

Two shapes, written straight in the packed format (``write_tabular_pack``: real manifests,
indexes, shard parquet and tars, tabular only: video decode is not what scale costs):

* ``pack``: one pack of ``--pack-episodes`` x ``--pack-length`` frames (default 1,000,000 x
  101 = 101M anchors);
* ``mixture``: ``--packs`` packs of ``--episodes-per-pack`` x 50 frames (default 10,000 x 100
  = 1M episodes), and ``mixture create`` over them, timed (``--create-only N`` also times it
  over the first N packs, e.g. 3,240 for the SO-101 shape).

For each, a fresh process (imports done before the clock starts) measures: opening the
dataset, the first batch of a ``BatchLoader`` (batch 64, 2 workers), 200 more batches, each
worker's private memory when they idle (``/proc/<pid>/smaps_rollup``), the resume state's
size, and a resume of that state onto another world shape (rank 1 of 3): open + load + first
batch. ``lerobot-shards info`` is timed on the pack.

    .venv/bin/python benchmarks/bench_scale.py --out bench-out/scale
    .venv/bin/python benchmarks/bench_scale.py --out bench-out/scale --shapes mixture --packs 3240 --episodes-per-pack 106

Results: ``OUT/results.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proc_stats import alive, children, private_kb, status_kb, wait_idle


def measure(url: str, kind: str, batches: int) -> dict:
    """Run in a fresh process: open, first batch, steady batches, memory, state, resume."""
    import torch  # noqa: F401  (first imports are not what is measured)

    from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset

    try:
        import torchcodec.decoders  # noqa: F401  (the decoder's first import is a per-process constant)
    except ImportError:
        pass

    def open_dataset(**kwargs):
        return (
            PackedDataset(url, return_uint8=True, **kwargs)
            if kind == "pack"
            else MixtureDataset(url, return_uint8=True, **kwargs)
        )

    started = time.perf_counter()
    dataset = open_dataset(rank=0, world_size=2)
    open_s = time.perf_counter() - started
    rss_open_mb = status_kb(os.getpid(), "VmRSS") / 1024
    loader = BatchLoader(dataset, batch_size=64, num_workers=2)
    iterator = iter(loader)
    started = time.perf_counter()
    next(iterator)
    first_batch_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    steady = batches * 64 / (time.perf_counter() - started)
    workers = [p for p in children() if os.path.exists(f"/proc/{p}/smaps_rollup")]
    wait_idle(workers, limit_s=120)
    workers = alive(workers)
    memory = [{"rss_mb": status_kb(p, "VmRSS") / 1024, "private_mb": private_kb(p) / 1024} for p in workers]
    state = loader.state_dict()
    state_bytes = len(json.dumps(state).encode())
    del iterator, loader
    started = time.perf_counter()
    other = open_dataset(rank=1, world_size=3)
    other_loader = BatchLoader(other, batch_size=64, num_workers=2)
    other_loader.load_state_dict(state)
    resumed = iter(other_loader)
    next(resumed)
    resume_s = time.perf_counter() - started
    return {
        "kind": kind,
        "episodes": int(dataset.catalog.num_episodes),
        "anchors": int(dataset.catalog.anchor_counts.sum()),
        "open_s": open_s,
        "rss_after_open_mb": rss_open_mb,
        "first_batch_s": first_batch_s,
        "steady_samples_per_s": steady,
        "workers": memory,
        "state_bytes": state_bytes,
        "resume_other_world_s": resume_s,
    }


def _measure_in_child(url: str, kind: str, batches: int) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--measure", url, "--kind", kind, "--batches", str(batches)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if result.returncode != 0:
        raise RuntimeError(f"measure failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))


def _timed(command: list[str]) -> dict:
    """Wall time and peak RSS of a command (its own process)."""
    started = time.perf_counter()
    result = subprocess.run(["/usr/bin/time", "-f", "%M", *command], cwd=ROOT, capture_output=True, text=True, timeout=7200)
    if result.returncode != 0:
        raise RuntimeError(f"{command} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return {"seconds": time.perf_counter() - started, "peak_mb": int(result.stderr.strip().splitlines()[-1]) / 1024}


def _cli() -> list[str]:
    return [sys.executable, "-m", "lerobot_shards.cli"]


def bench_pack(out: Path, episodes: int, length: int, batches: int) -> dict:
    from lerobot_shards.testing import write_tabular_pack

    root = out / f"pack-{episodes}x{length}"
    started = time.perf_counter()
    write_tabular_pack(root, episodes=episodes, length=length, samples_index=False)
    written = time.perf_counter() - started
    row = {"shape": "pack", "write_s": written, **_measure_in_child(str(root), "pack", batches)}
    row["info"] = _timed([*_cli(), "info", str(root)])
    return row


def bench_mixture(out: Path, packs: int, per_pack: int, batches: int, create_only: list[int]) -> list[dict]:
    from lerobot_shards.testing import write_tabular_pack

    root = out / f"mixture-{per_pack}"
    started = time.perf_counter()
    for i in range(packs):
        write_tabular_pack(root / f"ds-{i:05d}", episodes=per_pack, length=50, seed=i + 1, samples_index=False)
    written = time.perf_counter() - started
    rows = []
    for count in sorted(set(create_only)):
        if count < packs:
            rows.append({"shape": "mixture create", "packs": count, "episodes": count * per_pack, "create": _create(root, count)})
    create = _create(root, packs)
    row = {
        "shape": "mixture",
        "packs": packs,
        "write_s": written,
        "create": create,
        **_measure_in_child(str(root / "mixture.json"), "mixture", batches),
    }
    return rows + [row]


def _create(root: Path, count: int) -> dict:
    """``mixture create`` over the first ``count`` packs under ``root``, timed in its own process."""
    code = (
        "import sys; from lerobot_shards import create_mixture; n = int(sys.argv[2]); "
        "create_mixture(sys.argv[1], names={f'ds-{i:05d}': f'ds-{i:05d}' for i in range(n)})"
    )
    return _timed([sys.executable, "-c", code, str(root), str(count)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-out/scale"))
    parser.add_argument("--shapes", nargs="+", default=["pack", "mixture"], choices=["pack", "mixture"])
    parser.add_argument("--pack-episodes", type=int, default=1_000_000)
    parser.add_argument("--pack-length", type=int, default=101)
    parser.add_argument("--packs", type=int, default=10_000)
    parser.add_argument("--episodes-per-pack", type=int, default=100)
    parser.add_argument(
        "--create-only", type=int, nargs="*", default=[3240], help="also time mixture create over the first N packs"
    )
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.kind, args.batches)), flush=True)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    if "pack" in args.shapes:
        rows.append(bench_pack(args.out, args.pack_episodes, args.pack_length, args.batches))
        print(json.dumps(rows[-1]), flush=True)
    if "mixture" in args.shapes:
        for row in bench_mixture(args.out, args.packs, args.episodes_per_pack, args.batches, args.create_only):
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
