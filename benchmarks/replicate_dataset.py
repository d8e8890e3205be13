"""A bigger LeRobot v3 dataset made of K copies of a real one, for packer speed at scale.

    .venv/bin/python benchmarks/replicate_dataset.py ../shared/datasets/aloha_cube_4cam bench-out/aloha-x40 --times 40

Copy k of the source becomes data file ``file-{k:03d}`` and video files ``file-{k:03d}`` of
chunk 0 (the bytes copied, not linked: each is its own file on disk and in the page cache),
with episode and row indices shifted; per-file timestamps are unchanged. Episode metadata
goes into one file. Only sources with one data file and one video file per camera (as the
shared ALOHA set) are supported.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def _shift(table: pa.Table, column: str, by: int) -> pa.Table:
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pc.add(table[column], pa.scalar(by, table[column].type)))


def _set(table: pa.Table, column: str, value: int) -> pa.Table:
    index = table.schema.get_field_index(column)
    return table.set_column(index, table.schema.field(index), pa.array([value] * table.num_rows, table[column].type))


def replicate(source: Path, dst: Path, times: int) -> None:
    info = json.loads((source / "meta" / "info.json").read_text())
    cameras = [key for key, feature in info["features"].items() if feature.get("dtype") == "video"]
    data = pq.read_table(source / "data" / "chunk-000" / "file-000.parquet")
    episodes = pq.read_table(source / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    if len(list((source / "data").rglob("*.parquet"))) != 1 or episodes["data/file_index"].to_pylist() != [0] * episodes.num_rows:
        raise SystemExit(f"{source}: only sources with one data file are supported")
    count, rows = episodes.num_rows, data.num_rows
    (dst / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    (dst / "data" / "chunk-000").mkdir(parents=True)
    copies = []
    for k in range(times):
        shifted = _shift(_shift(data, "episode_index", k * count), "index", k * rows)
        pq.write_table(shifted, dst / "data" / "chunk-000" / f"file-{k:03d}.parquet")
        meta = _shift(
            _shift(_shift(episodes, "episode_index", k * count), "dataset_from_index", k * rows), "dataset_to_index", k * rows
        )
        meta = _set(meta, "data/file_index", k)
        for key in cameras:
            meta = _set(meta, f"videos/{key}/file_index", k)
            folder = dst / "videos" / key / "chunk-000"
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / "videos" / key / "chunk-000" / "file-000.mp4", folder / f"file-{k:03d}.mp4")
        copies.append(meta)
    pq.write_table(pa.concat_tables(copies), dst / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    for name in ("stats.json", "tasks.parquet"):
        shutil.copyfile(source / "meta" / name, dst / "meta" / name)
    info.update(total_episodes=count * times, total_frames=rows * times, splits={"train": f"0:{count * times}"})
    (dst / "meta" / "info.json").write_text(json.dumps(info, indent=4))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--times", type=int, required=True)
    args = parser.parse_args(argv)
    if args.dst.exists():
        raise SystemExit(f"{args.dst} exists")
    replicate(args.source, args.dst, args.times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
