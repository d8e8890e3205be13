"""Bad input gets a clear error naming the file and what is wrong, and nothing misleading is
written: a broken source fails while planning (before the destination exists), a broken
video fails naming the episode and leaves no manifest; drift and unknown tasks warn once."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from torchcodec.decoders import VideoDecoder

from lerobot_shards import FrameMismatchError, PackError, SourceError, pack_dataset, verify
from lerobot_shards.core.format import Manifest
from lerobot_shards.testing import read_identity
from tests.packed_fixtures import *
from tests.packed_fixtures import (
    CAMERAS,
    copy_source,
    edit_episodes_metadata,
    episodes_index,
    member_bytes,
    shift_video_window,
)

TOP = CAMERAS[0]


def _truncate(path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def test_a_truncated_data_parquet_fails_while_planning(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    data = sorted((root / "data").glob("*/*.parquet"))[1]
    _truncate(data, 0.5)
    with pytest.raises(SourceError, match=rf"{data.name}: not a readable parquet file, truncated\? \(data file of episode \d+"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists(), "nothing may be written for a broken source"


def test_a_missing_video_fails_while_planning(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    video = sorted((root / "videos" / TOP).glob("*/*.mp4"))[-1]
    video.unlink()
    # Issue 68 row 4: the episodes whose video is missing are named, and the command that packs the rest.
    pattern = rf"1 episode cannot be packed: episode \d+: camera {TOP}: .*{video.name} is missing; the other 8 pack with `lerobot-shards pack .* --episodes 0-7`"
    with pytest.raises(SourceError, match=pattern):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_a_truncated_video_names_the_episode_file_and_cause(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    video = sorted((root / "videos" / TOP).glob("*/*.mp4"))[0]
    _truncate(video, 0.6)
    with pytest.raises(FrameMismatchError, match=rf"episode \d+, camera {TOP}: video has \d+ frames .*{video.name}.*truncated\?"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_longer_video_is_trimmed_by_default_and_still_verifies(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    shift_video_window(root, 2, TOP, end=2 / 30)  # episode 2's window reaches 2 frames into episode 3
    dst = tmp_path / "out"
    # LeRobot never reads frames past the last row: the member keeps the first 30, by stream copy.
    report = pack_dataset(str(root), str(dst))
    assert report.trimmed_episodes == [2] and report.padded_episodes == [] and report.reencoded_episodes == []
    row = next(r for r in episodes_index(dst) if r["episode_index"] == 2)
    assert row[f"video/{TOP}/frames"] == row["length"] == 30
    frames = VideoDecoder(member_bytes(dst, row, TOP)).get_frames_at(indices=list(range(30))).data
    assert [read_identity(f.numpy()) for f in frames] == [(2, j) for j in range(30)]
    assert verify(str(dst), decode=True).ok


def test_an_empty_video_window_can_only_be_dropped(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)

    def empty(row):
        if row["episode_index"] == 3:
            row[f"videos/{TOP}/from_timestamp"] = row[f"videos/{TOP}/to_timestamp"] = 99.0

    edit_episodes_metadata(root, empty)
    with pytest.raises(
        FrameMismatchError, match="episode 3, camera .*: video has 0 frames .* set on_frame_mismatch to 'drop-episode'"
    ):
        pack_dataset(str(root), str(tmp_path / "pad"), on_frame_mismatch="pad")
    report = pack_dataset(str(root), str(tmp_path / "drop"), on_frame_mismatch="drop-episode")
    assert report.dropped_episodes == [3]
    assert 3 not in [r["episode_index"] for r in episodes_index(tmp_path / "drop")]


def test_a_plan_with_packed_shards_is_not_replaced(sample_source, packed_copy, tmp_path):
    import shutil

    dst = tmp_path / "other"
    shutil.copytree(packed_copy, dst)
    (dst / "manifest.json").unlink()
    with pytest.raises(PackError, match=r"holds \d+ packed shard\(s\) of another plan \(.*option video: copy -> h264"):
        pack_dataset(str(sample_source), str(dst), video="h264")


def _warnings(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


def test_schema_drift_packs_what_the_parquet_holds_and_warns_once(sample_source, tmp_path, caplog):
    root = copy_source(sample_source, tmp_path)
    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        table = table.drop(["observation.state"]).append_column("gripper.force", pa.array([1.5] * table.num_rows, pa.float32()))
        pq.write_table(table, path, row_group_size=10)
    with caplog.at_level(logging.WARNING):
        pack_dataset(str(root), str(tmp_path / "out"), shard_size_mb=0.03)
    drift = _warnings(caplog, "differ from meta/info.json features")
    assert len(drift) == 1 and "only in info.json: ['observation.state']" in drift[0] and "'gripper.force'" in drift[0]
    packed = pa.concat_tables([pq.read_table(p) for p in sorted((tmp_path / "out" / "shards").glob("*.parquet"))])
    assert "observation.state" not in packed.column_names and packed["gripper.force"].type == pa.float32()
    manifest = Manifest.from_json((tmp_path / "out" / "manifest.json").read_text())
    assert "observation.state" not in manifest.features
    assert manifest.features["gripper.force"].to_json() == {"dtype": "float32", "shape": [1], "names": None}
    assert manifest.extra["schema_drift"] == {"only_in_info": ["observation.state"], "only_in_parquet": ["gripper.force"]}
    with pytest.raises(
        PackError, match=r"window 'w': \['observation.state'\] declared in meta/info.json but missing from the data parquet"
    ):
        pack_dataset(str(root), str(tmp_path / "w"), windows={"w": {"observation.state": [0.0]}})


def test_task_index_missing_from_tasks_parquet_is_refused_naming_the_data_file(sample_source, tmp_path, caplog):
    # Rows whose task_index tasks.parquet does not define would make every reader fail
    # mid-epoch (the sample's task string cannot be resolved): refuse at pack time.
    root = copy_source(sample_source, tmp_path)
    tasks = pd.read_parquet(root / "meta" / "tasks.parquet")
    tasks.iloc[:1].to_parquet(root / "meta" / "tasks.parquet")
    with (
        caplog.at_level(logging.WARNING),
        pytest.raises(
            SourceError,
            match=r"data/chunk-000/file-000.parquet: episode \d+ has task_index \[1\], which .*tasks.parquet does not define",
        ),
    ):
        pack_dataset(str(root), str(tmp_path / "out"))
    # Episodes metadata listing task strings tasks.parquet lacks is reported too (once).
    assert len(_warnings(caplog, "list tasks missing from meta/tasks.parquet")) == 1


def test_a_manifest_is_never_written_for_a_failed_pack(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)

    def short(row):  # the last episode's window holds 3 of its 5 frames
        if row["episode_index"] == 8:
            row[f"videos/{TOP}/to_timestamp"] = row[f"videos/{TOP}/from_timestamp"] + 3 / 30

    # Shards before the broken episode are written; the manifest and index are not.
    edit_episodes_metadata(root, short)
    dst = tmp_path / "out"
    with pytest.raises(FrameMismatchError, match="episode 8"):
        pack_dataset(str(root), str(dst), shard_size_mb=0.001)
    assert (dst / "shards").exists() and not (dst / "manifest.json").exists() and not (dst / "index").exists()
    assert json.loads((dst / "pack-plan.json").read_text())["plan_version"] == 2
