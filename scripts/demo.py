"""`make demo`: the main job end to end on an embedded default dataset.

Generates a LeRobot v3.0 dataset (AV1 video, several data/video files, two cameras), packs
it, verifies the pack, streams it through a torch DataLoader with workers, and queries it
with DuckDB. Prints what each step did; every step is real.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import torch

from lerobot_shards import PackedDataset, pack_dataset, run_sql, verify
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("demo-out"))
    parser.add_argument("--episodes", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    source, packed = args.out / "lerobot-v3", args.out / "packed"

    started = time.perf_counter()
    spec = SampleSpec(
        episodes=args.episodes,
        min_length=20,
        max_length=90,
        cameras=(CameraSpec("observation.images.top", 96, 128), CameraSpec("observation.images.wrist", 64, 64)),
        data_files_size_in_mb=0.05,
        video_files_size_in_mb=0.3,
    )
    report = write_sample_dataset(source, spec)
    print(
        f"[1/4] generated LeRobot v3.0 dataset: {report.episodes} episodes, {report.frames} frames, "
        f"{report.data_files} data files, video files {report.video_files}, {report.bytes / 1e6:.2f} MB "
        f"({time.perf_counter() - started:.1f} s)"
    )

    window = {"action": [i / 30 for i in range(10)]}
    packing = pack_dataset(str(source), str(packed), windows={"chunk": window}, shard_size_mb=0.5, workers=args.workers)
    print(
        f"[2/4] packed (copy mode): {packing.episodes} episodes into {packing.shards} shards, "
        f"{packing.bytes_in / 1e6:.2f} MB in -> {packing.bytes_out / 1e6:.2f} MB out, "
        f"re-encoded {len(packing.reencoded_episodes)}, {packing.seconds:.1f} s"
    )
    checked = verify(str(packed), decode=True)
    if not checked.ok:
        raise SystemExit("verify failed:\n" + "\n".join(checked.problems))
    print(f"      verified: {checked.shards_checked} shards, {checked.members_decoded} mp4 members decoded")

    dataset = PackedDataset(
        str(packed), delta_timestamps={"action": window["action"], "observation.images.top": [-1 / 30, 0.0]}, seed=0
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=args.workers)
    t0 = time.perf_counter()
    samples = 0
    first_batch = None
    for batch in loader:
        if first_batch is None:
            first_batch = batch
        samples += len(batch["index"])
    seconds = time.perf_counter() - t0
    stats = dataset.stats()
    print(
        f"[3/4] streamed 1 epoch: {samples} samples in {seconds:.2f} s ({samples / seconds:.0f} samples/s, "
        f"{args.workers} workers, decoder {stats['decoder_backend']}), {stats['episodes_admitted']} episode admissions "
        f"for {len(dataset.index.episodes)} episodes (an episode whose anchors two workers share is admitted by each), "
        f"{stats['bytes_fetched'] / 1e6:.2f} MB fetched"
    )
    print(
        "      batch shapes: "
        + ", ".join(f"{k} {tuple(v.shape)}" for k, v in first_batch.items() if isinstance(v, torch.Tensor) and v.dim() > 1)
    )

    query = (
        "SELECT e.episode_index, e.length, count(*) FILTER (WHERE s.chunk_action_pad_after = 0) AS full_chunks, "
        "e.shard FROM episodes e JOIN samples s USING (episode_index) GROUP BY ALL ORDER BY 1 LIMIT 5"
    )
    columns, rows = run_sql(str(packed), query)
    print(f'[4/4] lerobot-shards sql {packed} "{query}"')
    print("      " + " | ".join(columns))
    for row in rows:
        print("      " + " | ".join(str(v) for v in row))
    print(f"done in {time.perf_counter() - started:.1f} s; try: .venv/bin/lerobot-shards info {packed}")


if __name__ == "__main__":
    main()
