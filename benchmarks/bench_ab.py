"""The README's path against an earlier commit's, and against the outsider's decode ceiling, in
one run, alternating (issue 69).

    .venv/bin/python benchmarks/bench_ab.py --against 1d9457c 93eedb3 \\
        --pack bench-out/aloha_1cam.packed --source /path/aloha_1cam --rounds 4 --samples 1200

Each round runs, in a fresh process each and in an order rotated by round (a drift of the
machine's speed favours none):

- ``main``: this checkout's ``PackedDataset(shuffle=True, return_uint8=True)`` +
  ``BatchLoader(batch_size=16, num_workers=1)``, the README's recommended path with its
  defaults (``--mode chunk``: 50 future actions and 2 frames per camera): the first batch's wait after ``iter(loader)``, then samples/s over ``--samples``
  samples (every frame touched);
- each ``--against`` commit: the same, with that commit's reader (checked out into a
  temporary git worktree) on the same pack (``--against-pack`` for a pack of its own);
- each ``--variant NAME=JSON``: this checkout with other options (a default against its
  alternatives, e.g. ``build_ahead`` or ``decode_threads``);
- ``ceiling``: what an outsider measures as the decode ceiling: random frames decoded by
  torchcodec (one FFmpeg thread, ``seek_mode="exact"``) from decoders already open on the
  source's own mp4 files, a frame per camera per sample (``--mode chunk``: the frame and the one
  before it, as the reader's window), no DataLoader.

Writes ``results.json`` (every run and, per system, the medians) and prints main/against and
main/ceiling per round. Numbers go in docs/BENCHMARKS.md with this command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loader_measure import delta_for

_READER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
from lerobot_shards import BatchLoader, PackedDataset
delta, options = json.loads(sys.argv[5]), json.loads(sys.argv[7])
ds = PackedDataset(sys.argv[2], shuffle=True, return_uint8=True, seed=int(sys.argv[4]), delta_timestamps=delta, **options.get("dataset", {}))
loader = BatchLoader(ds, batch_size=16, num_workers=int(sys.argv[6]), **options.get("loader", {}))
started = time.perf_counter()
batches = iter(loader)
first = next(batches)
first_s = time.perf_counter() - started
count, started = 0, time.perf_counter()
for batch in batches:
    for key, value in batch.items():
        if key.startswith("observation.images"):  # every page of every frame read once
            torch.empty(0, dtype=torch.uint8).set_(value.untyped_storage())[::4096].sum()
    count += len(batch["index"])
    if count >= int(sys.argv[3]):
        break
print(json.dumps({"first_batch_s": first_s, "samples_per_s": count / (time.perf_counter() - started)}))
"""


def _reader_run(
    checkout: Path, pack: Path, samples: int, seed: int, delta: dict | None, workers: int = 1, options: dict | None = None
) -> dict:
    """One fresh process of ``checkout``'s reader (the interpreter of this checkout's venv);
    ``options``: ``{"dataset": {...}, "loader": {...}}`` keywords beside the defaults."""
    argv = [str(checkout), str(pack), str(samples), str(seed), json.dumps(delta), str(workers), json.dumps(options or {})]
    out = subprocess.run(
        [sys.executable, "-c", _READER, *argv],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),  # never import this checkout by accident
    )
    if out.returncode != 0:
        raise SystemExit(f"[bench-ab] {checkout}: the reader failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def outsider_ceiling(source: Path, samples: int, seed: int, frames_per_camera: int = 1) -> dict:
    """Random frames from decoders already open on the source's own files (see the module): per
    sample and camera, a frame and the ``frames_per_camera - 1`` before it."""
    from torchcodec.decoders import VideoDecoder  # pyright: ignore[reportPrivateImportUsage]

    cameras = sorted(p.name for p in (source / "videos").iterdir() if p.is_dir())
    decoders = {
        camera: [
            VideoDecoder(str(f), seek_mode="exact", num_ffmpeg_threads=1)
            for f in sorted((source / "videos" / camera).rglob("*.mp4"))
        ]
        for camera in cameras
    }
    draw = random.Random(seed)
    picks = []
    for _ in range(samples):
        file = draw.randrange(len(decoders[cameras[0]]))
        frame = draw.randrange(len(decoders[cameras[0]][file]))
        picks.append((file, frame))
    started = time.perf_counter()
    for file, frame in picks:
        for camera in cameras:
            decoder = decoders[camera][file]
            last = min(frame, len(decoder) - 1)
            wanted = [max(0, last - back) for back in range(frames_per_camera - 1, -1, -1)]
            decoded = decoder.get_frames_at(indices=wanted).data
            decoded.reshape(-1)[::4096].sum()  # every page read once, as the reader's runs do
    return {"samples_per_s": samples / (time.perf_counter() - started), "cameras": len(cameras)}


def _variants(given: list[str]) -> list[tuple[str, dict]]:
    out = []
    for text in given:
        name, sep, options = text.partition("=")
        if not sep or not name:
            raise SystemExit(f"[bench-ab] --variant {text!r}: expected NAME=JSON")
        out.append((name, json.loads(options)))
    return out


def _worktree(commit: str) -> Path:
    where = Path(tempfile.mkdtemp(prefix=f"bench-ab-{commit[:8]}-"))
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(where), commit], check=True, capture_output=True
    )
    return where


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, nargs="+", help="earlier commits whose readers are measured beside this one")
    parser.add_argument("--pack", type=Path, required=True, help="a pack both readers read")
    parser.add_argument("--against-pack", type=Path, help="the earlier commit's own pack (default: --pack)")
    parser.add_argument("--source", type=Path, help="the LeRobot v3 source of the pack, for the outsider's ceiling")
    parser.add_argument("--mode", choices=("single", "chunk"), default="single", help="chunk: 50 actions, 2 frames per camera")
    parser.add_argument("--workers", type=int, default=1, help="BatchLoader workers of every reader")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help='this checkout with options other than the defaults, e.g. ba0=\'{"loader": {"build_ahead": 0}}\' '
        '(keys "dataset" and "loader"): a default measured against its alternatives in the same run',
    )
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1200)
    parser.add_argument("--out", type=Path, default=Path("bench-out/ab"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((args.pack / "manifest.json").read_text())
    delta = delta_for(args.mode, list(manifest["video_keys"]), manifest["fps"])
    earlier = {commit: _worktree(commit) for commit in args.against}
    try:
        systems = {"main": lambda seed: _reader_run(ROOT, args.pack.resolve(), args.samples, seed, delta, args.workers)}
        for name, options in _variants(args.variant):
            systems[name] = lambda seed, options=options: _reader_run(
                ROOT, args.pack.resolve(), args.samples, seed, delta, args.workers, options
            )
        for commit, checkout in earlier.items():
            pack = (args.against_pack or args.pack).resolve()
            systems[commit] = lambda seed, checkout=checkout, pack=pack: _reader_run(
                checkout, pack, args.samples, seed, delta, args.workers
            )
        if args.source is not None:
            frames = 2 if args.mode == "chunk" else 1
            systems["ceiling"] = lambda seed: outsider_ceiling(args.source, args.samples, seed, frames)
        rows = []
        names = list(systems)
        for round_ in range(args.rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                rows.append({"round": round_, "system": name, **systems[name](round_)})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        for checkout in earlier.values():
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False, capture_output=True
            )
    summary = {
        name: {
            key: round(statistics.median(r[key] for r in rows if r["system"] == name), 3)
            for key in ("samples_per_s", "first_batch_s")
            if all(key in r for r in rows if r["system"] == name)
        }
        for name in systems
    }
    machine = {"platform": platform.platform(), "cores": len(os.sched_getaffinity(0)), "decoder": "torchcodec (CPU)"}
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "machine": machine,
                "args": vars(args)
                | {
                    "out": str(args.out),
                    "pack": str(args.pack),
                    "against_pack": str(args.against_pack),
                    "source": str(args.source),
                },
                "rows": rows,
                "summary": summary,
            },
            indent=1,
        )
    )
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
