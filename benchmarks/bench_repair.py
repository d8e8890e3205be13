"""What `pack --repair` costs over a plain re-run of a finished pack (issue 42): a plain re-run
checks the kept shards' sizes; `--repair` re-hashes every byte of them.

    .venv/bin/python benchmarks/bench_repair.py --source ../shared/datasets/aloha_cube_4cam --runs 3

The source is packed (copy mode, 4 MB shards) into a real S3 server (moto on 127.0.0.1) and,
separately, a local folder; then each destination is re-packed ``--runs`` times each way, in
this process, timing ``pack_dataset`` (the same call the CLI makes). Prints a row per run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=str(ROOT.parent / "shared" / "datasets" / "aloha_cube_4cam"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shard-size-mb", type=float, default=4)
    args = parser.parse_args()

    from lerobot_shards import pack_dataset
    from tests.s3_server import make_bucket, running_s3_server

    work = Path(tempfile.mkdtemp(prefix="bench-repair-"))
    with running_s3_server(work) as server:
        url, options = make_bucket(server)
        for where, dst, storage in (("local", str(work / "pack"), None), ("s3 (moto, loopback)", f"{url}/pack", options)):
            first = pack_dataset(args.source, dst, shard_size_mb=args.shard_size_mb, storage_options=storage)
            print(f"{where}: packed {first.shards} shards, {first.bytes_out / 1e6:.1f} MB")
            times: dict[str, list[float]] = {"sizes": [], "repair": []}
            for _ in range(args.runs):
                for mode in ("sizes", "repair"):
                    started = time.perf_counter()
                    report = pack_dataset(
                        args.source, dst, shard_size_mb=args.shard_size_mb, storage_options=storage, repair=mode == "repair"
                    )
                    times[mode].append(time.perf_counter() - started)
                    assert report.shards_written == 0 and report.shards_rehashed == (report.shards if mode == "repair" else 0)
            for mode, values in times.items():
                print(
                    f"  re-run ({mode}): median {statistics.median(values):.2f} s of {len(values)} "
                    f"({', '.join(f'{v:.2f}' for v in values)})"
                )


if __name__ == "__main__":
    main()
