"""The sample writer must produce exactly LeRobot v3.0's layout (DESIGN.md, source format)."""

from __future__ import annotations

import json
from pathlib import Path

import av
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torchcodec.decoders import VideoDecoder

from lerobot_shards.testing import SampleSpec, identity_frame, read_identity, rollover_spec, write_sample_dataset
from tests.lerobot_reference import reference_item


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("synthetic") / "ds"
    write_sample_dataset(root, rollover_spec())
    return root


def _episodes(root: Path) -> list[dict]:
    files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()


def test_info_json_fields(source):
    info = json.loads((source / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0"
    assert info["fps"] == 30
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] == "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
    assert info["total_episodes"] == 9 and info["total_frames"] == sum(rollover_spec().lengths)
    assert info["splits"] == {"train": "0:9"}
    assert info["total_tasks"] == len(pd.read_parquet(source / "meta" / "tasks.parquet"))
    for key in ("chunks_size", "data_files_size_in_mb", "video_files_size_in_mb", "robot_type"):
        assert key in info
    features = info["features"]
    # LeRobot appends its default features after the user's, in this order.
    assert list(features)[-5:] == ["timestamp", "frame_index", "episode_index", "index", "task_index"]
    top = features["observation.images.top"]
    assert top["dtype"] == "video" and top["shape"] == [48, 64, 3]
    assert top["names"] == ["height", "width", "channels"]
    assert top["info"]["video.codec"] == "av1" and top["info"]["video.pix_fmt"] == "yuv420p"
    assert top["info"]["video.fps"] == 30 and top["info"]["video.g"] == 2 and top["info"]["video.crf"] == 30


def test_episodes_metadata_columns_and_types(source):
    files = sorted((source / "meta" / "episodes").glob("*/*.parquet"))
    schema = pq.read_schema(files[0])
    assert schema.field("episode_index").type == pa.int64()
    assert schema.field("tasks").type == pa.list_(pa.string())
    assert schema.field("length").type == pa.int64()
    for name in ("data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index"):
        assert schema.field(name).type == pa.int64(), name
    for key in ("observation.images.top", "observation.images.wrist"):
        assert schema.field(f"videos/{key}/chunk_index").type == pa.int64()
        assert schema.field(f"videos/{key}/file_index").type == pa.int64()
        assert schema.field(f"videos/{key}/from_timestamp").type == pa.float64()
        assert schema.field(f"videos/{key}/to_timestamp").type == pa.float64()
    for stat in ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"):
        assert f"stats/observation.state/{stat}" in schema.names
        assert f"stats/observation.images.top/{stat}" in schema.names
    episodes = _episodes(source)
    assert [e["episode_index"] for e in episodes] == list(range(9))
    assert [e["length"] for e in episodes] == list(rollover_spec().lengths)
    # Global index ranges are contiguous and half-open.
    assert episodes[0]["dataset_from_index"] == 0
    for prev, cur in zip(episodes, episodes[1:]):
        assert cur["dataset_from_index"] == prev["dataset_to_index"]
    for e in episodes:
        assert e["dataset_to_index"] - e["dataset_from_index"] == e["length"]
    # Image stats are per channel, shaped (3, 1, 1), in [0, 1].
    assert np.array(episodes[0]["stats/observation.images.top/mean"]).shape == (3, 1, 1)


def test_tasks_parquet_has_task_string_index(source):
    tasks = pd.read_parquet(source / "meta" / "tasks.parquet")
    assert tasks.index.name == "task"
    assert list(tasks.columns) == ["task_index"]
    assert tasks["task_index"].tolist() == list(range(len(tasks)))
    # Every task an episode lists is in tasks.parquet; some episodes have two.
    episodes = _episodes(source)
    assert any(len(e["tasks"]) == 2 for e in episodes)
    assert {t for e in episodes for t in e["tasks"]} == set(tasks.index)


def test_stats_json(source):
    stats = json.loads((source / "meta" / "stats.json").read_text())
    assert set(stats["observation.state"]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}
    assert stats["observation.state"]["count"] == [sum(rollover_spec().lengths)]
    assert np.array(stats["observation.images.top"]["mean"]).shape == (3, 1, 1)


def test_data_files_roll_over_with_one_row_group_per_episode(source):
    files = sorted((source / "data").glob("*/*.parquet"))
    assert len(files) >= 3, "rollover_spec must produce several data files"
    assert any("chunk-001" in str(f) for f in files), "chunks_size=2 must roll over to chunk-001"
    episodes = {e["episode_index"]: e for e in _episodes(source)}
    seen_index = []
    for path in files:
        parquet = pq.ParquetFile(path)
        table = parquet.read()
        assert table.schema.field("observation.state").type == pa.list_(pa.float32(), 6)
        assert table.schema.field("timestamp").type == pa.float32()
        assert table.schema.field("next.done").type == pa.bool_()
        for rg in range(parquet.metadata.num_row_groups):
            group = parquet.read_row_group(rg)
            assert len(set(group["episode_index"].to_pylist())) == 1, f"{path} row group {rg} mixes episodes"
            ep = episodes[group["episode_index"][0].as_py()]
            assert group.num_rows == ep["length"]
            chunk, file = int(path.parent.name[-3:]), int(path.stem[-3:])
            assert (ep["data/chunk_index"], ep["data/file_index"]) == (chunk, file)
            frame_index = np.array(group["frame_index"].to_pylist())
            assert (frame_index == np.arange(ep["length"])).all()
            timestamps = np.array(group["timestamp"].to_pylist(), dtype=np.float32)
            assert (timestamps == (frame_index / 30).astype(np.float32)).all()
        seen_index += table["index"].to_pylist()
    assert seen_index == list(range(sum(rollover_spec().lengths)))


def test_video_files_roll_over_independently_and_timestamps_add_up(source):
    episodes = _episodes(source)
    info = json.loads((source / "meta" / "info.json").read_text())
    for key in ("observation.images.top", "observation.images.wrist"):
        files = sorted((source / "videos" / key).glob("*/*.mp4"))
        assert len(files) >= 2, f"{key} must roll over"
        for path in files:
            chunk, file = int(path.parent.name[-3:]), int(path.stem[-3:])
            members = [e for e in episodes if (e[f"videos/{key}/chunk_index"], e[f"videos/{key}/file_index"]) == (chunk, file)]
            assert members[0][f"videos/{key}/from_timestamp"] == 0.0
            for prev, cur in zip(members, members[1:]):
                assert cur[f"videos/{key}/from_timestamp"] == prev[f"videos/{key}/to_timestamp"]
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                duration = float(stream.duration * stream.time_base)
                assert stream.codec_context.name in ("libdav1d", "av1", "libaom-av1")
            assert members[-1][f"videos/{key}/to_timestamp"] == pytest.approx(duration, abs=1e-6)
            assert path == source / info["video_path"].format(video_key=key, chunk_index=chunk, file_index=file)
    # The point of the layout: data and video file indices differ for some episodes.
    assert any(
        (e["data/chunk_index"], e["data/file_index"])
        != (e["videos/observation.images.top/chunk_index"], e["videos/observation.images.top/file_index"])
        for e in episodes
    )
    assert any(
        (e["videos/observation.images.wrist/chunk_index"], e["videos/observation.images.wrist/file_index"])
        != (e["videos/observation.images.top/chunk_index"], e["videos/observation.images.top/file_index"])
        for e in episodes
    )


def test_every_frame_identity_survives_av1_at_lerobot_timestamps(source):
    info = json.loads((source / "meta" / "info.json").read_text())
    for e in _episodes(source):
        for key in ("observation.images.top", "observation.images.wrist"):
            path = source / info["video_path"].format(
                video_key=key, chunk_index=e[f"videos/{key}/chunk_index"], file_index=e[f"videos/{key}/file_index"]
            )
            decoder = VideoDecoder(str(path))
            fps = decoder.metadata.average_fps
            indices = [round((e[f"videos/{key}/from_timestamp"] + j / 30) * fps) for j in range(e["length"])]
            frames = decoder.get_frames_at(indices=indices).data
            assert [read_identity(f.numpy()) for f in frames] == [(e["episode_index"], j) for j in range(e["length"])]


def test_each_episode_starts_on_a_keyframe(source):
    """Episodes are encoded separately, so each starts with a keyframe in the concatenation."""
    for path in sorted((source / "videos").rglob("*.mp4")):
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            keyframe_pts = {
                float(p.pts * stream.time_base) for p in container.demux(stream) if p.is_keyframe and p.pts is not None
            }
        chunk, file = int(path.parent.name[-3:]), int(path.stem[-3:])
        key = path.parent.parent.name
        for e in _episodes(source):
            if (e[f"videos/{key}/chunk_index"], e[f"videos/{key}/file_index"]) == (chunk, file):
                assert any(abs(t - e[f"videos/{key}/from_timestamp"]) < 1e-4 for t in keyframe_pts)


def test_identity_round_trip_and_bounds():
    frame = identity_frame(4095, 4095, 32, 32)
    assert read_identity(frame) == (4095, 4095)
    assert read_identity(torch.from_numpy(frame).permute(2, 0, 1).float().div(255).numpy()) == (4095, 4095)
    with pytest.raises(ValueError, match="identity encodes episode"):
        identity_frame(4096, 0, 32, 32)
    with pytest.raises(ValueError, match="too small"):
        identity_frame(0, 0, 16, 16)


def test_writer_refuses_existing_dataset_and_bad_specs(source, tmp_path):
    with pytest.raises(FileExistsError, match="already holds a dataset"):
        write_sample_dataset(source, rollover_spec())
    with pytest.raises(ValueError, match="lengths has 2 entries for 3 episodes"):
        write_sample_dataset(tmp_path / "x", SampleSpec(episodes=3, lengths=(1, 2)))


def test_oracle_reads_the_sample_like_lerobot(source):
    """The test oracle (LeRobot's __getitem__ re-implemented) on the generated source."""
    item = reference_item(source, 13, {"action": [-0.1, 0.0, 0.1], "observation.images.top": [0.0, 1 / 30]})
    assert item["episode_index"].item() == 2 and item["frame_index"].item() == 0
    assert item["action"].shape == (3, 6) and item["action_is_pad"].tolist() == [True, False, False]
    assert item["observation.images.top"].shape == (2, 3, 48, 64)
    assert item["observation.images.wrist"].shape == (3, 32, 32)
    assert item["observation.images.top"].dtype == torch.float32
    assert read_identity(item["observation.images.top"][1].numpy()) == (2, 1)
    assert isinstance(item["task"], str)


def test_make_sample_cli(tmp_path):
    from click.testing import CliRunner

    from lerobot_shards.cli import main

    out = tmp_path / "cli"
    result = CliRunner().invoke(main, ["make-sample", str(out), "--episodes", "2", "--cameras", "cam:32x48", "--max-length", "9"])
    assert result.exit_code == 0, result.output
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 2 and info["features"]["cam"]["shape"] == [32, 48, 3]
    again = CliRunner().invoke(main, ["make-sample", str(out)])
    assert again.exit_code != 0 and "already holds a dataset" in again.output
    bad = CliRunner().invoke(main, ["make-sample", str(tmp_path / "y"), "--cameras", "nosize"])
    assert bad.exit_code != 0 and "KEY:HxW" in bad.output


def test_data_parquet_carries_datasets_feature_metadata(source):
    """LeRobot writes data through `datasets`, which records the HF features in the schema."""
    path = sorted((source / "data").glob("*/*.parquet"))[0]
    described = json.loads(pq.read_schema(path).metadata[b"huggingface"])["info"]["features"]
    assert described["observation.state"] == {"feature": {"dtype": "float32", "_type": "Value"}, "length": 6, "_type": "List"}
    assert described["timestamp"] == {"dtype": "float32", "_type": "Value"}
    assert list(described) == pq.read_schema(path).names


def test_writing_av1_leaves_no_thread_real_time(tmp_path):
    """Run as root (CI, containers), libsvtav1 sets the thread that opens an encoder, and the
    threads it starts, to SCHED_FIFO 99 and never sets them back: the test process, and the
    DataLoader workers, torchrun ranks and browsers it then forked, ran real-time and livelocked
    a 2-core machine. The writer puts them back; in a fresh process, so nothing else has."""
    import subprocess
    import sys

    code = (
        "import os, sys\nfrom lerobot_shards.testing import SampleSpec, write_sample_dataset\n"
        "write_sample_dataset(sys.argv[1], SampleSpec(episodes=2, lengths=(3, 4)))\n"
        "realtime = {os.SCHED_FIFO, os.SCHED_RR}\n"
        "print(sorted(t for t in os.listdir('/proc/self/task') if os.sched_getscheduler(int(t)) in realtime))\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "src")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"
