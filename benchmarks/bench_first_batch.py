"""An epoch's start, with the first batch built in the training process and without (issue 69).

    .venv/bin/python benchmarks/bench_first_batch.py --pack bench-out/aloha_1cam.packed --workers 1 --runs 4

Each run is a fresh process: ``PackedDataset(shuffle=True, return_uint8=True)`` +
``BatchLoader(batch_size=16, num_workers=W, first_batch_here=on|off)``, the two alternating.
Printed per run: the first batch's wait after ``iter(loader)``, the time from ``iter`` to each
batch in ``--marks``, and the steady state between the first and the last mark (so a one-off
start-up shift shows apart from a change of speed). Numbers go in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from lerobot_shards import BatchLoader, PackedDataset
pack, workers, here, marks = sys.argv[2], int(sys.argv[3]), sys.argv[4] == "on", json.loads(sys.argv[5])
ds = PackedDataset(pack, shuffle=True, return_uint8=True, seed=0)
loader = BatchLoader(ds, batch_size=16, num_workers=workers, first_batch_here=here)
started = time.perf_counter()
batches = iter(loader)
next(batches)
at = {"first": time.perf_counter() - started}
for count, _ in enumerate(batches, start=2):
    if count in marks:
        at[str(count)] = time.perf_counter() - started
    if count >= max(marks):
        break
print(json.dumps(at))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pack", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--runs", type=int, default=4, help="runs of each setting, alternating")
    parser.add_argument("--marks", type=int, nargs="+", default=[2, 10, 30, 60], help="batch numbers to time from iter()")
    args = parser.parse_args(argv)
    marks = sorted(set(args.marks))
    rows: dict[str, list[dict]] = {"on": [], "off": []}
    for _ in range(args.runs):
        for setting in ("on", "off"):
            out = subprocess.run(
                [sys.executable, "-c", _RUN, str(ROOT), str(args.pack.resolve()), str(args.workers), setting, json.dumps(marks)],
                capture_output=True,
                text=True,
                cwd=tempfile.gettempdir(),
            )
            if out.returncode != 0:
                raise SystemExit(f"[bench-first-batch] the reader failed:\n{out.stderr[-3000:]}")
            at = json.loads(out.stdout.strip().splitlines()[-1])
            at["steady"] = at[str(marks[-1])] - at[str(marks[0])]
            rows[setting].append(at)
            print(json.dumps({"first_batch_here": setting, **{k: round(v, 3) for k, v in at.items()}}), flush=True)
    for setting, runs in rows.items():
        spans = {key: (min(r[key] for r in runs), max(r[key] for r in runs)) for key in runs[0]}
        print(f"{setting}: " + ", ".join(f"{key} {low:.3f}-{high:.3f} s" for key, (low, high) in spans.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
