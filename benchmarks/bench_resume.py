"""Resume benchmark: ``load_state_dict`` + first batch at offsets 0, 1e4, 1e6, 1e7.

Builds a synthetic *large* packed dataset directly in the packed format (12,000 episodes x
1,000 frames = 1.2e7 anchors, tabular only: video decode is not what resume costs), then
times, with a real DataLoader and 2 workers, how long the first batch takes after resuming at
each offset. Resume is arithmetic over the index, so the time should be flat.

    .venv/bin/python benchmarks/bench_resume.py --out bench-out/resume
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

from lerobot_shards import PackedDataset
from lerobot_shards.testing import write_tabular_pack


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-out/resume"))
    parser.add_argument("--episodes", type=int, default=12_000)
    parser.add_argument("--length", type=int, default=1_000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    write_tabular_pack(args.out / "synthetic", episodes=args.episodes, length=args.length)
    results = []
    for offset in (0, 10_000, 1_000_000, 10_000_000):
        started = time.perf_counter()
        dataset = PackedDataset(str(args.out / "synthetic"), seed=0)
        opened = time.perf_counter()
        dataset.load_state_dict(dataset.state_dict(samples_consumed=offset, batch_size=args.batch_size, num_workers=args.workers))
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)
        batch = next(iter(loader))
        done = time.perf_counter()
        plan_started = time.perf_counter()
        # The arithmetic alone: where worker 1 resumes and its next draw, from the index only.
        dataset.upcoming_anchors(worker=1, num_workers=args.workers, limit=1)
        arithmetic = time.perf_counter() - plan_started
        results.append(
            {
                "offset": offset,
                "open_s": opened - started,
                "resume_to_first_batch_s": done - opened,
                "resume_arithmetic_s": arithmetic,
                "first_index": int(batch["index"][0]),
            }
        )
        print(json.dumps(results[-1]), flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
