"""A pack and a mixture in a distant bucket (issue 32): opening, the first batch, and requests
per episode at 0, 30 and 100 ms a request.

    .venv/bin/python benchmarks/bench_remote.py --source ../shared/datasets/aloha_cube_4cam --out bench-out/remote
    # the same with another checkout's reader (e.g. the main before, in a worktree):
    .venv/bin/python benchmarks/bench_remote.py ... --checkout /tmp/old

The source is packed once (copy mode) and, per episode, into a compiled mixture; both are put
in a real S3 server (moto on loopback) behind ``tests.fault_proxy.FaultProxy`` delaying every
request by the latency. For each latency and dataset a fresh process running the measured
checkout opens the dataset (``return_uint8=True``) and takes the first batch of a
``BatchLoader`` (batch 16, 1 worker), or for ``map`` (issue 66) of ``PackedLeRobotDataset``
under a shuffled ``DataLoader`` (batch 32, 1 worker: random samples across episodes); the
proxy counts the requests. "local" is the same
measurement on the local directory. Rows print as they are measured; ``OUT/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MEASURE = r"""
import json, sys, time
url, kind, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
import torch  # first imports are not what is measured
from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset
try:
    import torchcodec.decoders  # noqa: F401
except ImportError:
    pass
if options:
    import s3fs  # noqa: F401
started = time.perf_counter()
if kind == "map":  # random access as LeRobot's trainer asks: a shuffled sampler, batches of 32
    from lerobot_shards import PackedLeRobotDataset

    dataset = PackedLeRobotDataset(url, return_uint8=True, storage_options=options or None)
    open_s = time.perf_counter() - started
    loader = iter(torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=1, generator=torch.Generator().manual_seed(0)))
else:
    make = PackedDataset if kind == "pack" else MixtureDataset
    dataset = make(url, return_uint8=True, storage_options=options or None)
    open_s = time.perf_counter() - started
    loader = iter(BatchLoader(dataset, batch_size=16, num_workers=1))
started = time.perf_counter()
next(loader)
print(json.dumps({"open_s": open_s, "first_batch_s": time.perf_counter() - started}), flush=True)
"""


def _measure(checkout: Path, url: str, kind: str, options: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, url, kind, json.dumps(options)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        raise RuntimeError(f"measure failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _prepare(source: Path, out: Path) -> tuple[Path, Path]:
    from lerobot_shards import create_mixture, pack_dataset
    from lerobot_shards.packer.source import LeRobotSource

    one, mix = out / "one-pack", out / "mixture"
    if not (one / "manifest.json").exists():
        pack_dataset(str(source), str(one), video="copy")
    if not (mix / "mixture.json").exists():
        for episode in sorted(LeRobotSource(source).episodes):
            pack_dataset(str(source), str(mix / f"ep-{episode:03d}"), video="copy", episodes=[episode])
        create_mixture(str(mix))
    return one, mix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("bench-out/remote"))
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose reader is measured (default: this one)")
    parser.add_argument("--latencies-ms", type=float, nargs="+", default=[0, 30, 100])
    parser.add_argument("--kinds", default="pack,map,mixture", help="what to measure (a checkout before issue 66 has no map)")
    args = parser.parse_args()
    from lerobot_shards.core.storage import Storage
    from tests.fault_proxy import FaultProxy
    from tests.s3_server import make_bucket, running_s3_server

    one, mix = _prepare(args.source, args.out)
    rows = []
    kinds = args.kinds.split(",")
    for kind, local in (("pack", one), ("map", one), ("mixture", mix)):
        if kind not in kinds:
            continue
        target = str((local if kind != "mixture" else local / "mixture.json").resolve())
        rows.append({"kind": kind, "storage": "local", **_measure(args.checkout, target, kind, {})})
        print(json.dumps(rows[-1]), flush=True)
    with running_s3_server(args.out / "moto") as server:
        url, options = make_bucket(server)
        for local, name in ((one, "one-pack"), (mix, "mixture")):
            bucket = Storage(f"{url}/{name}", options)
            files = [p for p in local.rglob("*") if p.is_file()]
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda p: bucket.put_file(p, p.relative_to(local).as_posix()), files))
        endpoint = urlparse(server.endpoint_url)
        for latency in args.latencies_ms:
            for kind, target in (
                ("pack", f"{url}/one-pack"),
                ("map", f"{url}/one-pack"),
                ("mixture", f"{url}/mixture/mixture.json"),
            ):
                if kind not in kinds:
                    continue
                with FaultProxy(endpoint.hostname, endpoint.port, latency_s=latency / 1000) as proxy:
                    result = _measure(args.checkout, target, kind, dict(server.storage_options(proxy.url)))
                    rows.append({"kind": kind, "storage": f"s3 {latency:g} ms", **result, "requests": proxy.counters.requests})
                print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"checkout": str(args.checkout), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
