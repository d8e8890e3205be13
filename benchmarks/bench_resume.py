"""Resume benchmark: ``load_state_dict`` + first batch at offsets 0, 1e4, 1e6, 1e7.

Builds a synthetic *large* packed dataset directly in the packed format (12,000 episodes x
1,000 frames = 1.2e7 anchors, tabular only: video decode is not what resume costs), then
times, with a real DataLoader and 2 workers, how long the first batch takes after resuming at
each offset. Resume is arithmetic over the index, so the time should be flat.

    .venv/bin/python benchmarks/bench_resume.py --out bench-out/resume
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reader import PackedDataset  # noqa: E402
from reader.format import (  # noqa: E402
    EPISODES_INDEX_PATH,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_PATH,
    ROW_GROUP_TARGET_BYTES,
    SAMPLES_INDEX_PATH,
    Manifest,
    ShardEntry,
    shard_parquet_path,
    shard_tar_path,
)


def build(root: Path, episodes: int, length: int) -> None:
    """Write a valid packed dataset (manifest, index, one shard) with no cameras."""
    if (root / MANIFEST_PATH).exists():
        return
    (root / "shards").mkdir(parents=True, exist_ok=True)
    (root / "index").mkdir(parents=True, exist_ok=True)
    (root / "meta").mkdir(parents=True, exist_ok=True)
    frames = episodes * length
    episode_index = np.repeat(np.arange(episodes, dtype=np.int64), length)
    frame_index = np.tile(np.arange(length, dtype=np.int64), episodes)
    table = pa.table(
        {
            "action": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(frames * 2, np.float32)), 2),
            "timestamp": pa.array((frame_index / 30).astype(np.float32)),
            "frame_index": pa.array(frame_index),
            "episode_index": pa.array(episode_index),
            "index": pa.array(np.arange(frames, dtype=np.int64)),
            "task_index": pa.array(np.zeros(frames, np.int64)),
        }
    )
    per_episode = table.slice(0, length).nbytes * 1.25
    episodes_per_group = max(1, int(ROW_GROUP_TARGET_BYTES // per_episode))
    parquet_path = root / shard_parquet_path(0)
    with pq.ParquetWriter(parquet_path, table.schema, compression="zstd", write_page_index=True) as writer:
        writer.write_table(table, row_group_size=episodes_per_group * length)
    (root / shard_tar_path(0)).write_bytes(b"\0" * 1024)  # an empty tar: no cameras
    pq.write_table(
        pa.table(
            {
                "episode_index": pa.array(np.arange(episodes, dtype=np.int64)),
                "shard": pa.array(np.zeros(episodes, np.int32)),
                "length": pa.array(np.full(episodes, length, np.int64)),
                "dataset_from_index": pa.array(np.arange(episodes, dtype=np.int64) * length),
                "dataset_to_index": pa.array(np.arange(1, episodes + 1, dtype=np.int64) * length),
                "tasks": pa.array([["synthetic"]] * episodes),
                "row_start": pa.array(np.arange(episodes, dtype=np.int64) * length),
                "row_group": pa.array((np.arange(episodes) // episodes_per_group).astype(np.int32)),
            }
        ),
        root / EPISODES_INDEX_PATH,
    )
    pq.write_table(table.select(["index", "episode_index", "frame_index", "timestamp", "task_index"]), root / SAMPLES_INDEX_PATH)
    pq.write_table(pa.table({"task_index": [0], "task": ["synthetic"]}), root / "meta" / "tasks.parquet")

    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    features = {
        "action": {"dtype": "float32", "shape": [2], "names": None},
        **{name: {"dtype": dtype, "shape": [1], "names": None} for name, dtype in
           (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"), ("index", "int64"), ("task_index", "int64"))},
    }
    manifest = Manifest(
        format=FORMAT_NAME, format_version=FORMAT_VERSION, packer_version="bench-synthetic", options={"video": "copy"},
        source={"uri": "synthetic"}, fps=30, features=features, video_keys=[], windows={}, tolerance_s=1e-4,
        shards=[ShardEntry(0, "shard-000000", episodes, frames, 1024, sha(root / shard_tar_path(0)),
                           parquet_path.stat().st_size, sha(parquet_path))],
        totals={"episodes": episodes, "frames": frames, "shards": 1, "bytes": 1024 + parquet_path.stat().st_size},
    )
    (root / MANIFEST_PATH).write_text(manifest.to_json())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("bench-out/resume"))
    parser.add_argument("--episodes", type=int, default=12_000)
    parser.add_argument("--length", type=int, default=1_000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    build(args.out / "synthetic", args.episodes, args.length)
    results = []
    for offset in (0, 10_000, 1_000_000, 10_000_000):
        started = time.perf_counter()
        dataset = PackedDataset(str(args.out / "synthetic"), seed=0)
        opened = time.perf_counter()
        dataset.load_state_dict({"epoch": 0, "samples_consumed": offset, "batch_size": args.batch_size})
        loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, num_workers=args.workers)
        batch = next(iter(loader))
        done = time.perf_counter()
        plan_started = time.perf_counter()
        from reader.world import World

        dataset._segments(World(rank=0, world_size=1, worker=1, num_workers=args.workers))  # the arithmetic alone
        arithmetic = time.perf_counter() - plan_started
        results.append({"offset": offset, "open_s": opened - started, "resume_to_first_batch_s": done - opened,
                        "resume_arithmetic_s": arithmetic, "first_index": int(batch["index"][0])})
        print(json.dumps(results[-1]), flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
