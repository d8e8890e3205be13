"""LeRobot's own readers on the unpacked source, and lerobot-lancedb (a peer), for the
benchmarks' side-by-side tables.

Runs inside the opt-in ``.venv-parity`` (Python 3.12, lerobot 0.6.1); bench_read.py starts it
as a subprocess and reads one JSON object from its stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loader_measure import measure_loader


def run_lerobot(
    system: str,
    source: Path,
    delta,
    *,
    workers: int,
    batch_size: int,
    warmup: int,
    max_batches: int,
    lance_root: Path | None = None,
) -> dict:
    """Run this script in ``.venv-parity`` and return its JSON result (``{"skipped": ...}``
    when that venv does not exist, ``{"error": ...}`` when LeRobot failed)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    python = root / ".venv-parity" / "bin" / "python"
    if not python.exists():
        return {"skipped": "no .venv-parity (run `make parity` once to create it)"}
    command = [
        str(python),
        str(Path(__file__).resolve()),
        "--root",
        str(source),
        "--system",
        system,
        "--delta",
        json.dumps(delta),
        "--workers",
        str(workers),
        "--batch-size",
        str(batch_size),
        "--warmup",
        str(warmup),
        "--max-batches",
        str(max_batches),
    ] + (["--lance-root", str(lance_root)] if lance_root is not None else [])
    result = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": result.stderr[-500:]}
    return json.loads(lines[-1])


def _lance_loader(args, delta):
    """lerobot-lancedb (a peer: LeRobot v3 converted to Lance tables, read map-style with a global
    shuffle, bit-exact with ``LeRobotDataset``): its ``LanceDBDataset`` in a shuffled
    ``DataLoader`` with the multiprocessing context it asks for, as its documentation does."""
    import subprocess

    from lerobot_lancedb import LanceDBDataset, lance_mp_context

    lance_root = Path(args.lance_root)
    if not (lance_root / "meta").exists():
        convert = Path(sys.executable).parent / "lerobot-lance-convert"
        subprocess.run([str(convert), "--root", args.root, "--out", str(lance_root)], check=True, capture_output=True)
    dataset = LanceDBDataset(root=str(lance_root), delta_timestamps=delta, return_uint8=args.system == "lance-uint8")
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=args.batch_size,
        num_workers=args.workers,
        shuffle=True,
        multiprocessing_context=lance_mp_context() if args.workers else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument(
        "--system", choices=["lerobot-map", "lerobot-map-uint8", "lerobot-streaming", "lance", "lance-uint8"], required=True
    )
    parser.add_argument("--lance-root", help="where the Lance layout of --root is (converted once when absent)")
    parser.add_argument("--delta", default="null", help="delta_timestamps JSON")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--max-batches", type=int, default=40)
    args = parser.parse_args()
    delta = json.loads(args.delta)
    try:
        if args.system.startswith("lerobot-map"):
            from lerobot.datasets.lerobot_dataset import LeRobotDataset

            # uint8: what LeRobot's trainer asks for (make_dataset passes return_uint8=True)
            uint8 = args.system == "lerobot-map-uint8"
            dataset = LeRobotDataset("local/bench", root=args.root, delta_timestamps=delta, return_uint8=uint8)
            loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers, shuffle=True)
        elif args.system.startswith("lance"):
            loader = _lance_loader(args, delta)
        else:
            from lerobot.datasets.streaming_dataset import StreamingLeRobotDataset

            dataset = StreamingLeRobotDataset("local/bench", root=args.root, delta_timestamps=delta)
            loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)
        result = measure_loader(lambda: loader, warmup=args.warmup, max_batches=args.max_batches)
    except Exception as err:  # report, don't hide: the table shows why a baseline is missing
        result = {"error": f"{type(err).__name__}: {err}"[:500]}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
