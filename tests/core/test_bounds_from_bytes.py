"""Issue 41, findings 1 and 2: the two big index files are bounded by their bytes, not by what
they claim. Each hostile file is the review's (every digest and size the mixture file or the
manifest records correct); the reader runs in a child process and must refuse it by name under
``HOSTILE_PEAK_BYTES`` (peak ``VmHWM``). The honest shapes the packer writes (cameras 0 to 8,
one and many episodes per row group, constant and varied lengths, real digests) must open
within the same budgets (docs/SECURITY.md, "Bounds follow the bytes").
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lerobot_shards import create_mixture, pack_dataset
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    EPISODES_SCHEMA,
    episodes_index_budget,
    episodes_index_schema,
    table_budget,
)
from lerobot_shards.core.format.parquet import read_bounded
from lerobot_shards.testing import CameraSpec, SampleSpec, tiny_member, write_sample_dataset, write_tabular_pack
from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured
from tests.pack_tamper import seal_files


def _constant_compiled_table(rows: int, cameras: int) -> bytes:
    """A compiled episodes table of ``rows`` episodes x ``cameras`` members, every value
    constant (what compresses best: ~2.7 MB for a million x 4)."""
    const = lambda value, kind: pa.array(np.full(rows, value), kind)  # noqa: E731
    columns = {
        "dataset": const(0, pa.int32()),
        "episode_index": pa.array(np.arange(rows), pa.int64()),
        "length": const(3, pa.int64()),
        "dataset_from_index": pa.array(np.arange(rows) * 3, pa.int64()),
        "shard_row": const(0, pa.int64()),
        "row_start": const(0, pa.int64()),
        "row_group": const(0, pa.int32()),
        "row_group_offset": const(4, pa.int64()),
        "row_group_bytes": const(100, pa.int64()),
        "row_group_sha256": pa.array([b"\x22" * 32] * rows, pa.binary(32)),
        "row_group_episodes": const(1, pa.int32()),
        "row_group_rows": const(3, pa.int64()),
        "anchors": const(3, pa.int64()),
    }
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * cameras)
    flat = rows * cameras
    for name, values in (
        ("member_offset", pa.array(np.full(flat, 512), pa.int64())),
        ("member_size", pa.array(np.full(flat, 100), pa.int64())),
        ("member_frames", pa.array(np.full(flat, 3), pa.int64())),
        ("member_codec", pa.array(["av1"] * flat)),
        ("member_sha256", pa.array([b"\x33" * 32] * flat, pa.binary(32))),
    ):
        columns[name] = pa.ListArray.from_arrays(offsets, values)
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns, schema=EPISODES_SCHEMA), buffer, compression="zstd")
    return buffer.getvalue()


def test_1_a_compiled_mixture_claiming_a_million_episodes_is_refused_by_its_digest_bytes(tmp_path):
    """A 2.7 MB compiled table claiming 1,000,000 episodes x 4 cameras (mixture.json agreeing)
    made the reader decode 1.9 GB before its named error: its member digests are now held to the
    bytes they take (4M digests in ~14 KB), before anything is decoded."""
    cameras = [f"observation.images.c{i}" for i in range(4)]
    write_sample_dataset(
        tmp_path / "src", SampleSpec(episodes=1, lengths=(3,), cameras=tuple(CameraSpec(k, 24, 32) for k in cameras))
    )
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "mix" / "a"))
    create_mixture(str(tmp_path / "mix"))
    data = _constant_compiled_table(1_000_000, 4)
    spec = json.loads((tmp_path / "mix" / "mixture.json").read_text())
    (tmp_path / "mix" / spec["index"]["episodes"]["path"]).write_bytes(data)  # compiled files are named by digest
    spec["index"]["episodes"].update(bytes=len(data), rows=1_000_000, sha256=hashlib.sha256(data).hexdigest())
    spec["datasets"][0].update(episodes=1_000_000, anchors=3_000_000, weight=3_000_000)
    (tmp_path / "mix" / "mixture.json").write_text(json.dumps(spec))
    measured = run_measured(
        "from lerobot_shards import MixtureDataset\nMixtureDataset(sys.argv[1])", str(tmp_path / "mix" / "mixture.json")
    )
    assert measured.outcome.startswith("FormatError: ") and "column member_sha256 holds 4000000 values in" in measured.outcome, (
        measured.outcome
    )
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, measured.peak_bytes


def test_2_a_resealed_pack_index_claiming_1_5_million_episodes_stays_small(tmp_path):
    """A re-sealed pack whose manifest and episodes index claim 1,500,000 episodes made the
    reader decode the whole index (1.7 GB) before its named error: the index is now read column
    by column, each rule checked when its columns arrive; with a camera, the members' digests
    must be paid for in bytes first."""
    for camera in (False, True):
        root = tmp_path / f"pack-{camera}"
        write_tabular_pack(root, episodes=2, length=2, camera=("cam", tiny_member(2), 16, 16) if camera else None)
        manifest = json.loads((root / "manifest.json").read_text())
        schema = episodes_index_schema(manifest["video_keys"])
        rows = 1_500_000
        columns = {}
        for field in schema:
            if field.name == "tasks":
                columns[field.name] = pa.array([["synthetic"]] * rows, field.type)
            elif pa.types.is_string(field.type):
                columns[field.name] = pa.array(["a" * 64 if "sha" in field.name else "h264"] * rows, field.type)
            else:
                columns[field.name] = pa.array(np.ones(rows), field.type)
        pq.write_table(pa.table(columns, schema=schema), root / EPISODES_INDEX_PATH, compression="zstd")
        manifest["totals"]["episodes"] = manifest["shards"][0]["num_episodes"] = rows
        seal_files(root, manifest)
        measured = run_measured("from lerobot_shards import PackedDataset\nPackedDataset(sys.argv[1])", str(root))
        expected = (
            "column video/cam/sha256 holds 1500000 values"
            if camera
            else "episode_index must be non-negative and strictly ascending"
        )
        assert measured.outcome.startswith("FormatError: ") and expected in measured.outcome, measured.outcome
        assert measured.peak_bytes < HOSTILE_PEAK_BYTES, measured.peak_bytes


def _honest_compiled(rows: int, cameras: int, per_group: int, constant: bool, rng) -> pa.Table:
    lengths = np.full(rows, 500) if constant else rng.integers(50, 1000, rows)
    groups = np.arange(rows) // per_group
    digests = lambda k: pa.array([rng.bytes(32) for _ in range(k)], pa.binary(32))  # noqa: E731
    group_bytes = rng.integers(10**5, 4 * 10**6, groups.max() + 1)[groups]
    columns = {
        "dataset": pa.array(np.zeros(rows), pa.int32()),
        "episode_index": pa.array(np.arange(rows), pa.int64()),
        "length": pa.array(lengths, pa.int64()),
        "dataset_from_index": pa.array(np.cumsum(lengths) - lengths, pa.int64()),
        "shard_row": pa.array(groups // 8, pa.int64()),
        "row_start": pa.array(np.cumsum(lengths) - lengths, pa.int64()),
        "row_group": pa.array(groups % 8, pa.int32()),
        "row_group_offset": pa.array((groups % 8) * 4_000_000 + 4, pa.int64()),
        "row_group_bytes": pa.array(group_bytes, pa.int64()),
        "row_group_sha256": digests(groups.max() + 1).take(pa.array(groups)),
        "row_group_episodes": pa.array(np.full(rows, per_group), pa.int32()),
        "row_group_rows": pa.array(lengths * per_group, pa.int64()),
        "anchors": pa.array(lengths, pa.int64()),
    }
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * cameras)
    sizes = rng.integers(10**5, 10**7, rows * cameras)
    for name, values in (
        ("member_offset", pa.array(np.cumsum(sizes) - sizes, pa.int64())),
        ("member_size", pa.array(sizes, pa.int64())),
        ("member_frames", pa.array(np.repeat(lengths, cameras), pa.int64())),
        ("member_codec", pa.array(["av1"] * (rows * cameras))),
        ("member_sha256", digests(rows * cameras)),
    ):
        columns[name] = pa.ListArray.from_arrays(offsets, values)
    return pa.table(columns, schema=EPISODES_SCHEMA)


@pytest.mark.parametrize("cameras", [0, 1, 4, 8])
@pytest.mark.parametrize("per_group,constant", [(1, False), (100, False), (1000, True)])
def test_honest_compiled_tables_of_every_shape_open(cameras, per_group, constant):
    """Compiled episodes tables as ``mixture create`` writes them (its own writer), with real
    digests: every shape is within the budget a reader applies."""
    from lerobot_shards.packer.mixture import table_to_parquet

    rows = 20_000
    data = table_to_parquet(_honest_compiled(rows, cameras, per_group, constant, np.random.default_rng(cameras * 7 + per_group)))
    budget = table_budget("episodes", rows=rows, members=rows * cameras, cameras=max(cameras, 1), encoded=len(data))
    assert read_bounded(data, where="t", rows=rows, max_rows=rows, budget=budget).num_rows == rows


@pytest.mark.parametrize("camera", [False, True])
def test_the_scale_benchmarks_honest_pack_indexes_open(tmp_path, camera):
    """The packs the scale benchmark writes (a million episodes of 2 frames: the most regular
    index there is, 32x its bytes) open within the episodes index budget."""
    from lerobot_shards import PackedDataset

    episodes = 200_000 if camera else 1_000_000
    write_tabular_pack(
        tmp_path / "p",
        episodes=episodes,
        length=2,
        samples_index=False,
        camera=("cam", tiny_member(2), 16, 16) if camera else None,
    )
    data = (tmp_path / "p" / EPISODES_INDEX_PATH).read_bytes()
    budget = episodes_index_budget(["cam"] if camera else [], rows=episodes, encoded=len(data))
    assert read_bounded(data, where="t", rows=episodes, max_rows=episodes, budget=budget).num_rows == episodes
    assert len(PackedDataset(str(tmp_path / "p")).index.episodes) == episodes
    shutil.rmtree(tmp_path / "p")
