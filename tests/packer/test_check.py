"""``lerobot-shards check`` / ``pack --check`` (issue 40): every problem a pack of a source would
meet, listed before a cluster job meets it, nothing written. Each case is checked against what
``pack`` itself then does with the same source and options."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards import FrameMismatchError, check_dataset, pack_dataset
from lerobot_shards.cli import main
from tests.packed_fixtures import *
from tests.packed_fixtures import CAMERAS, copy_source, shift_video_window

TOP = CAMERAS[0]


def test_a_sound_source_is_ok_and_nothing_is_written(sample_source, tmp_path):
    before = sorted(p.relative_to(sample_source) for p in sample_source.rglob("*"))
    report = check_dataset(str(sample_source))
    assert report.ok and report.findings == [] and report.episodes == 9 and report.frames == 141
    assert sorted(p.relative_to(sample_source) for p in sample_source.rglob("*")) == before
    result = CliRunner().invoke(main, ["check", str(sample_source)])
    assert result.exit_code == 0 and "checked 9 episodes, 141 frames: 0 errors, 0 warnings; ok to pack" in result.output


def test_a_frame_mismatch_is_the_error_pack_would_raise_and_pad_makes_it_a_warning(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    shift_video_window(root, 2, TOP, end=-2 / 30)  # episode 2's window ends 2 frames before its rows do
    report = check_dataset(str(root))
    assert [(f.level, f.episode, f.camera) for f in report.findings] == [("error", 2, TOP)]
    assert "video has 28 frames but the episode has 30 rows" in report.findings[0].message
    with pytest.raises(FrameMismatchError, match="video has 28 frames but the episode has 30 rows"):
        pack_dataset(str(root), str(tmp_path / "out"))
    padded = check_dataset(str(root), on_frame_mismatch="pad")
    assert padded.ok and [(f.level, f.episode) for f in padded.warnings] == [("warning", 2)]
    result = CliRunner().invoke(main, ["pack", "--check", str(root)])
    assert result.exit_code == 1 and "ERROR episode 2, camera observation.images.top: video has 28 frames" in result.output
    assert "1 error" in result.output and not (tmp_path / "out" / "manifest.json").exists()


def test_an_episode_that_does_not_start_on_a_keyframe_is_cut_exactly(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    shift_video_window(root, 2, TOP, start=1 / 30)  # starts one frame in: not a keyframe (GOP 2), one frame short
    report = check_dataset(str(root), on_frame_mismatch="pad")
    assert report.reencoded == []  # cut from the keyframe before, the pre-roll skipped on read
    assert not any("re-encodes" in f.message for f in report.warnings)
    assert pack_dataset(str(root), str(tmp_path / "out"), on_frame_mismatch="pad").reencoded_episodes == []


def test_timestamps_lerobot_would_refuse_are_named(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        stamps = table["timestamp"].to_numpy().copy()
        stamps[table["episode_index"].to_numpy() == 0] += 0.01  # episode 0's rows 10 ms late
        table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", pa.array(stamps, pa.float32()))
        pq.write_table(table, path)
    # LeRobot raises on every row of episode 0 (issue 54: refused like it, not packed with frame j).
    report = check_dataset(str(root))
    assert not report.ok and {f.episode for f in report.errors} == {0}
    assert all("LeRobotDataset raises FrameTimestampError on them" in f.message for f in report.errors)
    assert any("row timestamps are not frame_index / fps" in f.message for f in report.warnings if f.episode == 0)
    padded = check_dataset(str(root), on_frame_mismatch="pad")
    assert padded.ok and any("LeRobotDataset raises FrameTimestampError there" in f.message for f in padded.warnings)


def test_a_source_that_does_not_open_is_one_error(tmp_path):
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "info.json").write_text('{"codebase_version": "v2.1"}')
    report = check_dataset(str(tmp_path))
    assert not report.ok and len(report.findings) == 1 and "v2.1" in report.findings[0].message
    result = CliRunner().invoke(main, ["check", str(tmp_path)])
    assert result.exit_code == 1 and "convert_dataset_v21_to_v30" in result.output


def test_a_camera_a_reencode_cannot_code_is_an_error(sample_source, tmp_path):
    report = check_dataset(str(sample_source), video="hevc", resize=(64, 16))
    # Both cameras' aspect changes (issue 49), and hevc cannot code 16-pixel-wide frames.
    assert [f.level for f in report.findings[:2]] == ["error", "error"]
    assert (
        "--resize would stretch observation.images.top 48x64 to 64x16" in report.findings[0].message
        and "16-pixel-wide" in report.findings[1].message
    )
