"""Speed at scale (issue 20): a mixture of realistic packs vs the same data packed as one, and
a mixture in a bucket 30 ms away vs on local disk.

    .venv/bin/python benchmarks/bench_mixture_speed.py --source ../shared/datasets/aloha_cube_4cam \
        --out bench-out/mixture-speed

The source's episodes are packed once as one pack and once as one pack per episode (copy
mode: the same member bytes), the latter compiled into a mixture. Each system streams uint8
batches through ``BatchLoader`` (batch 16, ``--workers``) and is measured as ``bench_real.py``
measures (``loader_measure.measure_loader``: wall clock over the post-warm-up window, every
page of every batch touched), ``--repeats`` times in alternation; the table has the median:

- ``one-pack``: ``PackedDataset`` of the single pack, local;
- ``mixture``: ``MixtureDataset`` of the per-episode packs, local;
- ``mixture-s3-<L>ms``: the same mixture in a real S3 server (moto on loopback) behind a proxy
  that delays every request by L ms, for each of ``--latencies-ms``; each run also reports the
  requests it sent per episode admitted.

``--pool-size`` below the episodes per consumer makes episodes rotate through the pool (each
admission is then fetched while the pool draws from the others). Goal: ``mixture`` >= 0.9 x
``one-pack``, and each ``mixture-s3`` >= 0.95 x ``mixture``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loader_measure import measure_loader
from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset, create_mixture, pack_dataset
from lerobot_shards.packer.source import LeRobotSource


def _prepare(source: Path, out: Path) -> tuple[Path, Path]:
    one, mix = out / "one-pack", out / "mixture"
    if not (one / "manifest.json").exists():
        pack_dataset(str(source), str(one))
    if not (mix / "mixture.json").exists():
        for episode in LeRobotSource(source).episode_indices:
            pack_dataset(str(source), str(mix / f"ep-{episode:04d}"), episodes=[episode])
        create_mixture(str(mix))
    return one, mix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "datasets" / "aloha_cube_4cam")
    parser.add_argument("--out", type=Path, default=Path("bench-out/mixture-speed"))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--max-batches", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latencies-ms", type=float, nargs="+", default=[30.0])
    parser.add_argument("--pool-size", type=int, default=16, help="episode_pool_size (16: every episode of the shared set fits)")
    args = parser.parse_args()
    from lerobot_shards.core.storage import Storage
    from tests.fault_proxy import FaultProxy
    from tests.s3_server import make_bucket, running_s3_server

    one, mix = _prepare(args.source, args.out)
    distant_names = {f"mixture-s3-{latency:g}ms": latency for latency in args.latencies_ms}
    results: dict[str, list[dict]] = {name: [] for name in ("one-pack", "mixture", *distant_names)}
    common = {"return_uint8": True, "seed": 0, "episode_pool_size": args.pool_size}
    with running_s3_server(args.out / "moto") as server:
        url, options = make_bucket(server)
        bucket = Storage(f"{url}/mixture", options)
        files = [p for p in mix.rglob("*") if p.is_file()]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: bucket.put_file(p, p.relative_to(mix).as_posix()), files))
        endpoint = urlparse(server.endpoint_url)
        with FaultProxy(endpoint.hostname, endpoint.port) as proxy:
            distant = dict(server.storage_options(proxy.url))
            systems = {
                "one-pack": lambda: PackedDataset(str(one), **common),
                "mixture": lambda: MixtureDataset(str(mix / "mixture.json"), **common),
                **{
                    name: (lambda: MixtureDataset(f"{url}/mixture/mixture.json", storage_options=distant, **common))
                    for name in distant_names
                },
            }
            for repeat in range(args.repeats):
                for name, make in systems.items():
                    proxy.latency_s = distant_names.get(name, 0.0) / 1000
                    before = proxy.counters.requests
                    dataset = make()
                    result = measure_loader(
                        lambda: BatchLoader(dataset, batch_size=args.batch_size, num_workers=args.workers),
                        warmup=args.warmup,
                        max_batches=args.max_batches,
                    )
                    admitted = dataset.stats()["episodes_admitted"]
                    result["episodes_admitted"] = admitted
                    if name in distant_names:
                        result["requests"] = proxy.counters.requests - before
                        result["requests_per_episode"] = result["requests"] / max(1, admitted)
                    results[name].append(result)
                    print(json.dumps({"system": name, "repeat": repeat, **result}), flush=True)
    median = {name: statistics.median(r["samples_per_s"] for r in rows) for name, rows in results.items()}
    summary = {
        "samples_per_s": median,
        "mixture_vs_one_pack": median["mixture"] / median["one-pack"],
        **{f"{name}_vs_local": median[name] / median["mixture"] for name in distant_names},
        "requests_per_episode": {
            name: statistics.median(r["requests_per_episode"] for r in results[name]) for name in distant_names
        },
        "episodes_admitted": {name: statistics.median(r["episodes_admitted"] for r in rows) for name, rows in results.items()},
        "workers": args.workers,
        "pool_size": args.pool_size,
    }
    (args.out / "results.json").write_text(json.dumps({"summary": summary, "runs": results}, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
