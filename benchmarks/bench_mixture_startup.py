"""Mixture start-up: time, RSS and open files for a MixtureDataset over 400 small datasets.

One small dataset is generated and packed, then copied 400 times (the content does not matter
for start-up cost); we time ``MixtureDataset(mixture.json)``, then stream 2,000 samples and
record peak RSS and open file descriptors of the process.

    .venv/bin/python benchmarks/bench_mixture_startup.py --out bench-out/mixture
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packer import CameraSpec, SampleSpec, create_mixture, pack_dataset, write_sample_dataset  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-out/mixture"))
    parser.add_argument("--datasets", type=int, default=400)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    mix = args.out / "mix"
    if not (mix / "mixture.json").exists():
        source = args.out / "source"
        shutil.rmtree(args.out, ignore_errors=True)
        write_sample_dataset(source, SampleSpec(episodes=4, min_length=20, max_length=40, cameras=(CameraSpec("observation.images.top", 64, 64),)))
        pack_dataset(str(source), str(mix / "ds-0000"))
        for i in range(1, args.datasets):
            shutil.copytree(mix / "ds-0000", mix / f"ds-{i:04d}")
        create_mixture(str(mix))
    from reader import MixtureDataset

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    dataset = MixtureDataset(str(mix / "mixture.json"), return_uint8=True)
    startup = time.perf_counter() - started
    rss_after_open = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    iterator = iter(dataset)
    streamed = 0
    first = time.perf_counter()
    for _ in range(args.samples):
        next(iterator)
        streamed += 1
    seconds = time.perf_counter() - first
    result = {
        "datasets": len(dataset.datasets),
        "anchors": len(dataset),
        "startup_s": startup,
        "peak_rss_mb_before_open": rss_before,
        "peak_rss_mb_after_open": rss_after_open,
        "peak_rss_mb_after_streaming": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "open_fds_while_streaming": len(os.listdir("/proc/self/fd")),
        "samples_per_s_one_process": streamed / seconds,
    }
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
