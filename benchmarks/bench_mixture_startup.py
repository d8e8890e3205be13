"""Mixture start-up at scale: what one more dataset costs each process (issue 20).

    .venv/bin/python benchmarks/bench_mixture_startup.py --out bench-out/mixture --sizes 20 80 320 1000
    # the same measurement with another checkout's code (e.g. the previous main, in a worktree):
    .venv/bin/python benchmarks/bench_mixture_startup.py --out bench-out/mixture-old --checkout /tmp/old --sizes 20 80

For the largest size, N tiny distinct packs are written (two 3-frame episodes, one 16x16 h264
camera each); for every size a mixture of the first N is created by the measured checkout's
own ``mixture create`` and uploaded to a real S3 server (moto on loopback). Then, local and in
S3 (through a pass-through proxy that counts requests), a subprocess running the measured
checkout builds ``MixtureDataset(mixture.json, return_uint8=True)`` and
``BatchLoader(batch_size=16, num_workers=2)`` and takes the first batch, waits until its two
workers are idle, and reports: construction time and the files it opened (local), the
first-batch latency, the training process's RSS, and each worker's threads, RSS and private
memory (``/proc/<pid>/smaps_rollup``). The driver adds the requests the proxy counted. It
prints a row per (storage, size) and the per-dataset marginal costs between sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MEASURE = r"""
import json, os, sys, time
root, mixture, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
import runpy
_proc = runpy.run_path(sys.argv[4])  # benchmarks/proc_stats.py of this checkout, whatever checkout is measured
status, private_kb, children, wait_idle, alive = (_proc[n] for n in ("status_kb", "private_kb", "children", "wait_idle", "alive"))
opened = [0]
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(root):
        opened[0] += 1
sys.addaudithook(hook)
from lerobot_shards import BatchLoader, MixtureDataset
import lerobot_shards.reader.mixture, lerobot_shards.reader.loader, fsspec  # first imports are not construction
try:
    import torchcodec.decoders  # the decoder's first import is a per-process constant (~1.6 s)
except ImportError:
    pass
if options:
    import s3fs  # noqa: F401
def top_private(pid, n=4):
    found, name = [], None
    for line in open(f"/proc/{pid}/smaps"):
        parts = line.split()
        if "-" in parts[0] and len(parts) >= 5:
            name = parts[5] if len(parts) > 5 else "[anon]"
        elif parts[0] in ("Private_Clean:", "Private_Dirty:"):
            found.append((int(parts[1]), name))
    merged = {}
    for kb, where in found:
        merged[where] = merged.get(where, 0) + kb
    return sorted(merged.items(), key=lambda kv: -kv[1])[:n]
started = time.perf_counter()
dataset = MixtureDataset(mixture, return_uint8=True, storage_options=options or None)
construct_s = time.perf_counter() - started
opened_at_construct = opened[0]
rss_constructed = status("self", "VmRSS")
loader = BatchLoader(dataset, batch_size=16, num_workers=2)
batches = iter(loader)
started = time.perf_counter()
next(batches)
first_batch_s = time.perf_counter() - started
workers = [p for p in children() if os.path.exists(f"/proc/{p}/smaps_rollup")]
wait_idle(workers)  # they have filled their queues and prefetch budgets
workers = alive(workers)
result = {
    "datasets": len(dataset.names),
    "construct_s": construct_s,
    "opened_at_construct": opened_at_construct,
    "first_batch_s": first_batch_s,
    "rss_mb": status("self", "VmRSS") / 1024,
    "rss_mb_constructed": rss_constructed / 1024,
    "workers": [{"threads": status(p, "Threads"), "rss_mb": status(p, "VmRSS") / 1024, "private_mb": private_kb(p) / 1024,
                 "largest_private_kb": top_private(p)} for p in workers],
}
print("RESULT " + json.dumps(result), flush=True)
os._exit(0)
"""

COMPILE = r"""
import sys
try:
    from lerobot_shards import create_mixture
except ImportError:  # checkouts from before the packer's public face
    from lerobot_shards.packer.mixture import create_mixture
create_mixture(sys.argv[1])
"""


def _run(code: str, args: list[str], checkout: Path, timeout: int = 1800) -> str:
    # In the checkout's directory: ``python -c`` puts the working directory first on sys.path.
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    result = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=checkout, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise RuntimeError(f"subprocess failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def _measure(root: Path, mixture: str, options: dict, checkout: Path) -> dict:
    out = _run(MEASURE, [str(root.resolve()), mixture, json.dumps(options), str(ROOT / "benchmarks" / "proc_stats.py")], checkout)
    line = next(line for line in out.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _make_packs(directory: Path, count: int) -> None:
    from lerobot_shards.testing import tiny_member, write_tabular_pack

    member = tiny_member(3)
    for i in range(count):
        write_tabular_pack(
            directory / f"ds-{i:04d}", episodes=2, length=3, seed=i + 1, camera=("observation.images.top", member, 16, 16)
        )


def _upload(local: Path, storage) -> None:
    files = [p for p in local.rglob("*") if p.is_file()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: storage.put_file(p, p.relative_to(local).as_posix()), files))


def _marginals(rows: list[dict]) -> list[dict]:
    """Per-dataset costs between consecutive sizes of one storage."""
    out = []
    for a, b in zip(rows, rows[1:]):
        extra = b["datasets"] - a["datasets"]

        def per(key, scale=1.0):
            return (b[key] - a[key]) * scale / extra if key in a and key in b else None

        out.append(
            {
                "storage": a["storage"],
                "from": a["datasets"],
                "to": b["datasets"],
                "requests": per("requests"),
                "construct_ms": per("construct_s", 1000),
                "rss_mb": per("rss_mb"),
                "worker_threads": (b["worker_threads"] - a["worker_threads"]) / extra,
                "worker_private_mb": (b["worker_private_mb"] - a["worker_private_mb"]) / extra,
                "opened_at_construct": per("opened_at_construct"),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-out/mixture"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 80, 320, 1000])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose reader is measured (default: this one)")
    parser.add_argument("--no-s3", action="store_true", help="local only")
    args = parser.parse_args()
    from lerobot_shards.core.storage import Storage
    from tests.fault_proxy import FaultProxy
    from tests.s3_server import make_bucket, running_s3_server

    sizes = sorted(args.sizes)
    packs = args.out / "packs"
    if not (packs / f"ds-{sizes[-1] - 1:04d}" / "manifest.json").exists():
        _make_packs(packs, sizes[-1])
    rows: list[dict] = []
    with running_s3_server(args.out / "moto") as server:
        url, options = make_bucket(server)
        for size in sizes:
            mix = args.out / f"mix-{size}"
            shutil.rmtree(mix, ignore_errors=True)
            for i in range(size):
                shutil.copytree(packs / f"ds-{i:04d}", mix / f"ds-{i:04d}")
            _run(COMPILE, [str(mix.resolve())], args.checkout)
            local = _measure(mix, str((mix / "mixture.json").resolve()), {}, args.checkout)
            rows.append({"storage": "local", **local})
            print(json.dumps(rows[-1]), flush=True)
            if args.no_s3:
                continue
            _upload(mix, Storage(f"{url}/mix-{size}", options))
            endpoint = urlparse(server.endpoint_url)
            with FaultProxy(endpoint.hostname, endpoint.port) as proxy:
                remote = _measure(mix, f"{url}/mix-{size}/mixture.json", dict(server.storage_options(proxy.url)), args.checkout)
                rows.append({"storage": "s3", **remote, "requests": proxy.counters.requests})
            print(json.dumps(rows[-1]), flush=True)
    for row in rows:
        row["worker_threads"] = sum(w["threads"] for w in row["workers"]) / max(len(row["workers"]), 1)
        row["worker_private_mb"] = sum(w["private_mb"] for w in row["workers"]) / max(len(row["workers"]), 1)
    marginals = _marginals([r for r in rows if r["storage"] == "local"]) + _marginals([r for r in rows if r["storage"] == "s3"])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps({"checkout": str(args.checkout), "rows": rows, "marginals": marginals}, indent=1)
    )
    print(
        f"\n{'storage':<6} {'datasets':>8} {'construct s':>11} {'opened':>6} {'requests':>8} {'1st batch s':>11} {'RSS MB':>7} "
        f"{'wkr thr':>7} {'wkr priv MB':>11}"
    )
    for r in rows:
        print(
            f"{r['storage']:<6} {r['datasets']:>8} {r['construct_s']:>11.3f} {r['opened_at_construct']:>6} {r.get('requests', '-'):>8} "
            f"{r['first_batch_s']:>11.2f} {r['rss_mb']:>7.1f} {r['worker_threads']:>7.1f} {r['worker_private_mb']:>11.1f}"
        )
    print("\nper extra dataset:")
    for m in marginals:
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}))


if __name__ == "__main__":
    main()
