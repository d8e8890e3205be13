"""Redraw the charts docs/BENCHMARKS.md shows from the results committed beside them, so what the
docs show can be checked and redrawn without re-running a benchmark:

    .venv/bin/python benchmarks/render_charts.py --out docs

- ``bench-real-4cam-chart.png``: ``benchmarks/results/cpu2-real-4cam.json``, the ``results.json``
  of ``benchmarks/bench_real.py`` on the held-out 4-camera footage (the command is in BENCHMARKS).
- ``bench-read-chart.png``: ``benchmarks/results/cpu2-read-table.json``, the rows of the
  "Reader, generator data" table (``benchmarks/bench_read.py --out bench-out`` writes a
  ``results.json`` of the same form; give it with ``--read`` to draw a new run).

Each chart is drawn by its benchmark's own ``chart()``: a re-run's ``chart.png`` and this look alike.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results"


def render(out: Path, *, read: Path, real: Path) -> list[Path]:
    """Draw both charts into ``out``; returns their paths."""
    from benchmarks.bench_read import chart as read_chart
    from benchmarks.bench_real import chart as real_chart

    out.mkdir(parents=True, exist_ok=True)
    real_run = json.loads(real.read_text())
    dataset, args = real_run["dataset"], real_run["args"]
    title = (
        f"{Path(dataset['source']).name}: {len(dataset['cameras'])} cameras, {dataset['video']}, "
        f"{args['workers']} worker(s), batch {args['batch_size']}"
    )
    real_chart(real_run["rows"], out / "bench-real-4cam-chart.png", title)
    read_chart(json.loads(read.read_text())["rows"], out / "bench-read-chart.png")
    return [out / "bench-real-4cam-chart.png", out / "bench-read-chart.png"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--read", type=Path, default=RESULTS / "cpu2-read-table.json")
    parser.add_argument("--real", type=Path, default=RESULTS / "cpu2-real-4cam.json")
    args = parser.parse_args(argv)
    for path in render(args.out, read=args.read, real=args.real):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
