"""Session fixtures: one generated LeRobot v3 source and its packs, built once per test session.

Import them in a test module with ``from tests.packed_fixtures import *  # noqa: F401,F403``;
the helpers below (reading the index, a member's bytes, the frames LeRobot decodes) are
imported by name.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lerobot_shards import pack_dataset
from lerobot_shards.testing import CameraSpec, SampleSpec, rollover_spec, write_sample_dataset

# Windows precomputed at pack time (LeRobot delta_timestamps, seconds at 30 fps).
PACK_WINDOWS = {
    "chunk": {"action": [i / 30 for i in range(8)]},
    "obs": {"observation.state": [-2 / 30, -1 / 30, 0.0], "observation.images.top": [-1 / 30, 0.0]},
}
# Small enough that the 9 rollover episodes spread over several shards.
SHARD_SIZE_MB = 0.03

__all__ = ["PACK_WINDOWS", "SHARD_SIZE_MB", "sample_source", "packed_copy", "packed_hevc", "packed_h264", "packed_hevc_nvdec"]


@pytest.fixture(scope="session")
def sample_source(tmp_path_factory) -> Path:
    """rollover_spec(): 9 episodes (lengths 1..40), two cameras, several data/video files."""
    root = tmp_path_factory.mktemp("source") / "lerobot"
    write_sample_dataset(root, rollover_spec())
    return root


@pytest.fixture(scope="session")
def packed_copy(sample_source, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("packed") / "copy"
    pack_dataset(str(sample_source), str(dst), video="copy", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    return dst


@pytest.fixture(scope="session")
def packed_hevc(sample_source, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("packed") / "hevc"
    pack_dataset(str(sample_source), str(dst), video="hevc", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    return dst


@pytest.fixture(scope="session")
def packed_h264(sample_source, tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("packed") / "h264"
    pack_dataset(str(sample_source), str(dst), video="h264", shard_size_mb=SHARD_SIZE_MB)
    return dst


@pytest.fixture(scope="session")
def packed_hevc_nvdec(tmp_path_factory) -> Path:
    """A pack NVDEC can decode: HEVC frames of 144x192 (NVDEC's HEVC minimum is 144x144; the
    session source's 48x64 and 32x32 cameras are below it)."""
    root = tmp_path_factory.mktemp("nvdec")
    spec = SampleSpec(episodes=2, lengths=(5, 6), cameras=(CameraSpec("observation.images.top", 144, 192),))
    write_sample_dataset(root / "src", spec)
    pack_dataset(str(root / "src"), str(root / "pack"), video="hevc")
    return root / "pack"


CAMERAS = ("observation.images.top", "observation.images.wrist")


def h264_mp4(frames: int, *, bframes: int, gop: int) -> bytes:
    """A small 64x48 H.264 mp4 written by FFmpeg's muxer, with ``bframes`` B-frames (stored
    out of presentation order, with a ctts box, when > 0)."""
    import io

    import av
    import numpy as np

    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"bf": str(bframes), "g": str(gop)}
        for i in range(frames):
            image = np.full((48, 64, 3), (i * 13) % 255, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return out.getvalue()


def episodes_index(root: Path) -> list[dict]:
    """Rows of a pack's ``index/episodes.parquet``."""
    return pq.read_table(root / "index" / "episodes.parquet").to_pylist()


def source_episodes(source: Path) -> dict[int, dict]:
    """A LeRobot source's episodes metadata rows by episode index."""
    files = sorted((source / "meta" / "episodes").glob("*/*.parquet"))
    return {e["episode_index"]: e for e in pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()}


def source_video_path(source: Path, episode: dict, key: str) -> Path:
    info = json.loads((source / "meta" / "info.json").read_text())
    return source / info["video_path"].format(
        video_key=key, chunk_index=episode[f"videos/{key}/chunk_index"], file_index=episode[f"videos/{key}/file_index"]
    )


def source_row_timestamps(source: Path, episode: dict) -> list[float]:
    """The ``timestamp`` column (float32, from 0) of an episode's rows in its data file."""
    info = json.loads((source / "meta" / "info.json").read_text())
    path = source / info["data_path"].format(chunk_index=episode["data/chunk_index"], file_index=episode["data/file_index"])
    rows = pq.read_table(path, columns=["episode_index", "frame_index", "timestamp"]).to_pylist()
    mine = sorted((r["frame_index"], r["timestamp"]) for r in rows if r["episode_index"] == episode["episode_index"])
    return [timestamp for _, timestamp in mine]


def source_frames(source: Path, episode: dict, key: str):
    """Frames LeRobot decodes for each row of an episode: torchcodec on the concatenated
    file at index round((from_timestamp + row timestamp) * average fps). (rows, C, H, W) uint8."""
    from torchcodec.decoders import VideoDecoder

    decoder = VideoDecoder(str(source_video_path(source, episode, key)))
    average_fps = decoder.metadata.average_fps
    start = episode[f"videos/{key}/from_timestamp"]
    indices = [round((start + ts) * average_fps) for ts in source_row_timestamps(source, episode)]
    assert len(indices) == episode["length"]
    return decoder.get_frames_at(indices=indices).data


def member_bytes(root: Path, row: dict, key: str) -> bytes:
    """One camera's mp4 member of an episode, read by the offset and size in the index."""
    with open(root / "shards" / f"shard-{row['shard']:06d}.tar", "rb") as handle:
        handle.seek(row[f"video/{key}/offset"])
        return handle.read(row[f"video/{key}/size"])


def assert_same_tree(a: Path, b: Path) -> None:
    """Same files with the same bytes under both roots."""
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert files_a == files_b
    for rel in files_a:
        assert filecmp.cmp(a / rel, b / rel, shallow=False), f"{rel} differs"


def copy_source(source: Path, tmp_path: Path) -> Path:
    """A private copy of the session source that a test may damage."""
    root = tmp_path / "src"
    shutil.copytree(source, root)
    return root


def edit_episodes_metadata(root: Path, edit) -> None:
    """Rewrite every episodes metadata file with ``edit(row)`` applied to each row."""
    for path in sorted((root / "meta" / "episodes").glob("*/*.parquet")):
        rows = pq.read_table(path).to_pylist()
        for row in rows:
            edit(row)
        pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)


def shift_video_window(root: Path, episode: int, key: str, *, start: float = 0.0, end: float = 0.0) -> None:
    """Move one episode's video window of camera ``key`` in its episodes metadata by ``start``
    and ``end`` seconds (a window reaching into the next episode, or starting off a keyframe)."""

    def edit(row):
        if row["episode_index"] == episode:
            row[f"videos/{key}/from_timestamp"] += start
            row[f"videos/{key}/to_timestamp"] += end

    edit_episodes_metadata(root, edit)
