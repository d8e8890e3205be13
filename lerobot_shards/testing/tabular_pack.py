"""Packs written straight in the packed format (no source, no pack run): large tabular ones for
planning and resume at 10^7 anchors, and tiny distinct ones by the thousand for mixtures.

Everything a reader checks is real: the manifest with its digests, the episodes index with
row-group spans and digests, one shard parquet with episode-aligned row groups, the tar (empty
without a camera; with ``camera``, one given mp4 member per episode) and ``meta/tasks.parquet``.
``seed`` changes the ``action`` values, so packs of different seeds are different packs (their
manifests differ), as a mixture of distinct datasets needs. Only ``samples_index=False`` cuts
a corner for speed: the sample index then holds no rows (its digest is still recorded), so
``where=`` and ``verify`` do not apply to such a dataset; planning and resume never read it.
"""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa

from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_PATH,
    ROW_GROUP_TARGET_BYTES,
    SAMPLES_INDEX_PATH,
    TASKS_PATH,
    FileEntry,
    FooterEntry,
    Manifest,
    ShardEntry,
    episodes_index_schema,
    pack_parquet,
    parse_features,
    samples_index_schema,
    sha256_hex,
    shard_parquet_path,
    shard_tar_path,
    video_column,
    video_member_name,
)
from lerobot_shards.packer.shard.parquet import shard_parquet_layout
from lerobot_shards.packer.shard.tar_writer import DeterministicTarWriter
from lerobot_shards.packer.version import packer_version

_SCALARS = (
    ("timestamp", "float32"),
    ("frame_index", "int64"),
    ("episode_index", "int64"),
    ("index", "int64"),
    ("task_index", "int64"),
)


def write_tabular_pack(
    root: str | Path,
    *,
    episodes: int,
    length: int,
    fps: int = 30,
    samples_index: bool = True,
    seed: int = 0,
    camera: tuple[str, bytes, int, int] | None = None,
) -> Manifest:
    """Write a packed dataset of ``episodes`` x ``length`` frames of a 2-vector ``action``.

    ``camera`` is ``(key, mp4 bytes, height, width)``: every episode gets that member (it must
    decode to ``length`` frames of that size; ``lerobot_shards.testing.video.tiny_member`` makes one).

    Returns the written ``Manifest``; an existing one at ``root`` is returned as it is.
    """
    root = Path(root)
    if (root / MANIFEST_PATH).exists():
        return Manifest.from_json((root / MANIFEST_PATH).read_bytes())
    for sub in ("shards", "index", "meta"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    frames = episodes * length
    episode_index = np.repeat(np.arange(episodes, dtype=np.int64), length)
    frame_index = np.tile(np.arange(length, dtype=np.int64), episodes)
    values = (
        np.random.default_rng(seed).standard_normal(frames * 2).astype(np.float32) if seed else np.zeros(frames * 2, np.float32)
    )
    table = pa.table(
        {
            "action": pa.FixedSizeListArray.from_arrays(pa.array(values), 2),
            "timestamp": pa.array((frame_index / fps).astype(np.float32)),
            "frame_index": pa.array(frame_index),
            "episode_index": pa.array(episode_index),
            "index": pa.array(np.arange(frames, dtype=np.int64)),
            "task_index": pa.array(np.zeros(frames, np.int64)),
        }
    )
    per_episode = table.slice(0, length).nbytes * 1.25
    episodes_per_group = max(1, int(ROW_GROUP_TARGET_BYTES // per_episode))
    parquet_path = root / shard_parquet_path(0)
    with pack_parquet().writer(parquet_path, table.schema) as writer:
        writer.write_table(table, row_group_size=episodes_per_group * length)
    footer, spans = shard_parquet_layout(parquet_path)
    video_keys = [camera[0]] if camera else []
    members: list[int] = []
    buffer = io.BytesIO()
    member_bytes: list[bytes] = []
    if camera:
        key, member, _, _ = camera
        tar_writer = DeterministicTarWriter(buffer)
        # Each episode's member is its own file, as in a real pack (readers refuse an index whose
        # member digests repeat beyond what honest videos do): the given mp4 with a trailing
        # `free` box naming the episode, which decoders skip.
        member_bytes = [member + struct.pack(">I4sQ", 16, b"free", e) for e in range(episodes)]
        members = [tar_writer.add(video_member_name(e, key), data) for e, data in enumerate(member_bytes)]
        tar_writer.close()
    else:
        buffer.write(b"\0" * 1024)  # an empty tar: no cameras
    tar = buffer.getvalue()
    (root / shard_tar_path(0)).write_bytes(tar)

    ids = np.arange(episodes, dtype=np.int64)
    group = ids // episodes_per_group
    span = np.array([s[:2] for s in spans], dtype=np.int64)
    digests = np.array([s[2] for s in spans], dtype=object)
    episodes_table = pa.table(
        {
            "episode_index": ids,
            "shard": pa.array(np.zeros(episodes, np.int32)),
            "length": np.full(episodes, length, np.int64),
            "dataset_from_index": ids * length,
            "dataset_to_index": (ids + 1) * length,
            "tasks": pa.array([["synthetic"]] * episodes, pa.list_(pa.string())),
            "row_start": ids * length,
            "row_group": pa.array(group.astype(np.int32)),
            "row_group_offset": span[group, 0],
            "row_group_bytes": span[group, 1],
            "row_group_sha256": pa.array(digests[group].tolist(), pa.string()),
            **_member_columns(camera, members, member_bytes, length),
        },
        schema=episodes_index_schema(video_keys),
    )
    samples_schema = samples_index_schema({})
    if samples_index:
        samples = pa.table(
            {
                "index": pa.array(np.arange(frames, dtype=np.int64)),
                "episode_index": pa.array(episode_index),
                "frame_index": pa.array(frame_index),
                "shard": pa.array(np.zeros(frames, np.int32)),
                "row": pa.array(np.arange(frames, dtype=np.int64)),
                "timestamp": table["timestamp"],
                "task_index": table["task_index"],
            },
            schema=samples_schema,
        )
    else:
        samples = samples_schema.empty_table()
    files = {
        EPISODES_INDEX_PATH: _write_parquet(root / EPISODES_INDEX_PATH, episodes_table),
        SAMPLES_INDEX_PATH: _write_parquet(root / SAMPLES_INDEX_PATH, samples),
        TASKS_PATH: _write_parquet(root / TASKS_PATH, pa.table({"task_index": [0], "task": ["synthetic"]})),
    }
    features = {"action": {"dtype": "float32", "shape": [2], "names": None}}
    if camera:
        features[camera[0]] = {
            "dtype": "video",
            "shape": [camera[2], camera[3], 3],
            "names": ["height", "width", "channels"],
            "info": {"video.codec": "h264"},
        }
    features.update({name: {"dtype": dtype, "shape": [1], "names": None} for name, dtype in _SCALARS})
    parquet_bytes = parquet_path.stat().st_size
    manifest = Manifest(
        format=FORMAT_NAME,
        format_version=FORMAT_VERSION,
        packer_version=packer_version(),
        options={"video": "copy"},
        source={"uri": "synthetic-tabular"},
        fps=fps,
        features=parse_features(features, where=MANIFEST_PATH),
        video_keys=video_keys,
        windows={},
        tolerance_s=1e-4,
        shards=[
            ShardEntry(
                0,
                "shard-000000",
                episodes,
                frames,
                len(tar),
                sha256_hex(tar),
                parquet_bytes,
                sha256_hex(parquet_path.read_bytes()),
                FooterEntry(**footer),
            )
        ],
        files=files,
        totals={"episodes": episodes, "frames": frames, "shards": 1, "bytes": len(tar) + parquet_bytes},
    )
    (root / MANIFEST_PATH).write_text(manifest.to_json())
    return manifest


def _member_columns(camera: tuple[str, bytes, int, int] | None, offsets: list[int], members: list[bytes], length: int) -> dict:
    if camera is None:
        return {}
    key = camera[0]
    n = len(offsets)
    return {
        video_column(key, "offset"): pa.array(offsets, pa.int64()),
        video_column(key, "size"): pa.array([len(m) for m in members], pa.int64()),
        video_column(key, "frames"): pa.array([length] * n, pa.int64()),
        video_column(key, "codec"): pa.array(["h264"] * n, pa.string()),
        video_column(key, "sha256"): pa.array([sha256_hex(m) for m in members], pa.string()),
        video_column(key, "reencoded"): pa.array([False] * n, pa.bool_()),
    }


def _write_parquet(path: Path, table: pa.Table) -> FileEntry:
    data = pack_parquet().to_bytes(table)  # as finalize writes a pack's indexes
    path.write_bytes(data)
    return FileEntry(len(data), sha256_hex(data))
