"""Packer contracts (issue 3): lossless rows, aligned row groups, exact tar offsets, frames
equal to what LeRobot decodes, LeRobot's padding rule, byte-identical parts and resume."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import webdataset
from click.testing import CliRunner
from torchcodec.decoders import VideoDecoder

from lerobot_shards import FrameMismatchError, PackError, SourceError, pack_dataset, verify
from lerobot_shards.cli import main as cli
from lerobot_shards.core.format import ROW_GROUP_MAX_BYTES, Manifest, pad_column, video_member_name
from lerobot_shards.testing import CameraSpec, SampleSpec, read_identity, write_sample_dataset
from tests.packed_fixtures import *
from tests.packed_fixtures import (
    CAMERAS,
    PACK_WINDOWS,
    SHARD_SIZE_MB,
    assert_same_tree,
    copy_source,
    episodes_index,
    member_bytes,
    source_episodes,
    source_frames,
)


def test_every_source_row_comes_back_bit_identical(sample_source, packed_copy):
    source = pa.concat_tables([pq.read_table(p) for p in sorted((sample_source / "data").glob("*/*.parquet"))])
    packed = pa.concat_tables([pq.read_table(p) for p in sorted((packed_copy / "shards").glob("*.parquet"))])
    assert packed.schema.remove_metadata() == source.schema.remove_metadata()
    assert packed.sort_by("index").equals(source.sort_by("index"))


def test_row_groups_hold_whole_episodes_and_stay_under_32mb(sample_source, tmp_path):
    # A tiny row-group limit forces several groups per shard; the rule is the same at 32 MB.
    dst = tmp_path / "rg"
    pack_dataset(str(sample_source), str(dst), shard_size_mb=1, row_group_max_bytes=3000)
    index = {e["episode_index"]: e for e in episodes_index(dst)}
    groups_seen = 0
    for path in sorted((dst / "shards").glob("*.parquet")):
        parquet = pq.ParquetFile(path)
        assert parquet.metadata.row_group(0).column(0).compression == "ZSTD"
        assert parquet.metadata.row_group(0).column(0).has_offset_index, "page index must be written"
        for group in range(parquet.metadata.num_row_groups):
            groups_seen += 1
            assert parquet.metadata.row_group(group).total_byte_size <= ROW_GROUP_MAX_BYTES
            rows = parquet.read_row_group(group)
            for episode in set(rows["episode_index"].to_pylist()):
                # Whole episode inside this group, and the index points at it.
                assert rows["episode_index"].to_pylist().count(episode) == index[episode]["length"]
                assert index[episode]["row_group"] == group
    assert groups_seen > len(list((dst / "shards").glob("*.parquet"))), "expected several row groups per shard"


def test_each_episode_in_exactly_one_tar_with_contiguous_members(packed_copy):
    index = episodes_index(packed_copy)
    seen = {}
    for tar_path in sorted((packed_copy / "shards").glob("*.tar")):
        shard = int(tar_path.stem.split("-")[1])
        with tarfile.open(tar_path) as tar:
            members = tar.getmembers()
        names = [m.name for m in members]
        assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 and m.isfile() for m in members)
        for row in (r for r in index if r["shard"] == shard):
            expected = [video_member_name(row["episode_index"], k) for k in CAMERAS]
            position = names.index(expected[0])
            assert names[position : position + len(CAMERAS)] == expected, "members of an episode must be adjacent"
            for key, name in zip(CAMERAS, expected):
                member = members[names.index(name)]
                assert member.offset_data == row[f"video/{key}/offset"]
                assert member.size == row[f"video/{key}/size"]
            assert row["episode_index"] not in seen
            seen[row["episode_index"]] = shard
    assert sorted(seen) == list(range(9))
    assert len(set(seen.values())) > 1, "the fixture must spread episodes over several shards"


def test_webdataset_yields_one_sample_per_episode(packed_copy):
    shard = sorted((packed_copy / "shards").glob("*.tar"))[0]
    samples = list(webdataset.WebDataset(str(shard), shardshuffle=False))
    keys = [s["__key__"] for s in samples]
    expected = [f"ep-{r['episode_index']:06d}" for r in episodes_index(packed_copy) if r["shard"] == 0]
    assert keys == expected
    assert set(samples[0]) >= {"observation.images.top.mp4", "observation.images.wrist.mp4"}


def test_copy_mode_frames_are_bit_identical_to_lerobot_decode(sample_source, packed_copy):
    source = source_episodes(sample_source)
    for row in episodes_index(packed_copy):
        for key in CAMERAS:
            data = member_bytes(packed_copy, row, key)
            decoder = VideoDecoder(data)
            assert decoder.metadata.num_frames == row["length"] == row[f"video/{key}/frames"]
            packed = decoder.get_frames_at(indices=list(range(row["length"]))).data
            assert torch.equal(packed, source_frames(sample_source, source[row["episode_index"]], key))
            assert row[f"video/{key}/codec"] == "av1" and not row[f"video/{key}/reencoded"]


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = ((a.double() - b.double()) ** 2).mean().item()
    return float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse)


@pytest.mark.parametrize("fixture,codec", [("packed_hevc", "hevc"), ("packed_h264", "h264")])
def test_reencoded_frames_match_the_source(request, sample_source, fixture, codec):
    packed = request.getfixturevalue(fixture)
    source = source_episodes(sample_source)
    manifest = Manifest.from_json((packed / "manifest.json").read_text())
    assert manifest.features["observation.images.top"].codec == codec
    for row in episodes_index(packed):
        for key in CAMERAS:
            data = member_bytes(packed, row, key)
            frames = VideoDecoder(data).get_frames_at(indices=list(range(row["length"]))).data
            expected = source_frames(sample_source, source[row["episode_index"]], key)
            assert _psnr(frames, expected) >= 35.0, (row["episode_index"], key)
            assert [read_identity(f.numpy()) for f in frames] == [(row["episode_index"], j) for j in range(row["length"])]
            with av.open(__import__("io").BytesIO(data)) as container:
                stream = container.streams.video[0]
                if codec == "hevc":
                    assert stream.codec_context.codec_tag == "hvc1"
                packets = [p for p in container.demux(stream) if p.size]
                # Closed GOP of 2, no B-frames: keyframes every 2 frames, decode order == display order.
                assert [p.is_keyframe for p in packets][::2] == [True] * len(packets[::2])
                assert [p.pts for p in packets] == sorted(p.pts for p in packets)


def test_window_pad_counts_follow_lerobots_rule(packed_copy):
    samples = pq.read_table(packed_copy / "index" / "samples.parquet").to_pylist()
    lengths = {e["episode_index"]: e["length"] for e in episodes_index(packed_copy)}
    assert [s["index"] for s in samples] == list(range(len(samples)))
    for name, window in PACK_WINDOWS.items():
        for key, deltas in window.items():
            for s in samples:
                # LeRobot: slot padded iff index + round(d*fps) falls outside [ep_start, ep_end).
                offsets = [round(d * 30) for d in deltas]
                before = sum(s["frame_index"] + o < 0 for o in offsets)
                after = sum(s["frame_index"] + o >= lengths[s["episode_index"]] for o in offsets)
                assert s[pad_column(name, key, "before")] == before
                assert s[pad_column(name, key, "after")] == after
    assert "chunk_action_pad_after" in samples[0]


def test_parts_plus_finalize_are_byte_identical_to_one_run(sample_source, packed_copy, tmp_path):
    dst = tmp_path / "parts"
    for part in range(3):
        report = pack_dataset(str(sample_source), str(dst), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, part=(part, 3))
        assert not report.finalized and not (dst / "manifest.json").exists()
    result = CliRunner().invoke(cli, ["finalize", str(dst)])
    assert result.exit_code == 0, result.output
    assert_same_tree(packed_copy, dst)


def test_an_interrupted_pack_resumes_and_ends_identical(sample_source, packed_copy, tmp_path):
    dst = tmp_path / "resumed"
    # Packed here (not copied), so this machine's pack journal records its shards.
    pack_dataset(str(sample_source), str(dst), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    # What a kill leaves: no manifest/index, a shard without receipt, a half-written tar.
    (dst / "manifest.json").unlink()
    shutil.rmtree(dst / "index")
    (dst / "shards" / "shard-000001.json").unlink()
    tar = dst / "shards" / "shard-000002.tar"
    tar.write_bytes(tar.read_bytes()[:100])
    report = pack_dataset(str(sample_source), str(dst), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
    assert report.shards_written == 2 and report.shards_skipped == report.shards - 2
    assert_same_tree(packed_copy, dst)


def test_a_pack_killed_with_sigkill_resumes_and_ends_identical(sample_source, tmp_path):
    """A real kill: SIGKILL the packing process once its first shard is committed."""
    import os
    import signal
    import subprocess
    import sys
    import time

    reference = tmp_path / "reference"
    pack_dataset(str(sample_source), str(reference), video="hevc", shard_size_mb=0.001)
    killed = tmp_path / "killed"
    command = [
        sys.executable,
        "-m",
        "lerobot_shards.cli",
        "pack",
        str(sample_source),
        str(killed),
        "--video",
        "hevc",
        "--shard-size-mb",
        "0.001",
    ]
    process = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    deadline = time.time() + 120
    while not (killed / "shards" / "shard-000000.json").exists():
        if process.poll() is not None or time.time() > deadline:
            pytest.fail("the pack ended (or hung) before it could be killed")
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (killed / "manifest.json").exists(), "a killed pack must not look complete"
    report = pack_dataset(str(sample_source), str(killed), video="hevc", shard_size_mb=0.001)
    assert report.shards_skipped >= 1 and report.finalized
    assert_same_tree(reference, killed)


def test_a_different_plan_in_the_destination_is_refused(sample_source, packed_copy, tmp_path):
    dst = tmp_path / "other"
    shutil.copytree(packed_copy, dst)
    with pytest.raises(PackError, match=r"holds \d+ packed shard\(s\) of another plan \(option video: copy -> h264"):
        pack_dataset(str(sample_source), str(dst), video="h264", shard_size_mb=SHARD_SIZE_MB)


@pytest.mark.parametrize("target", ["tar", "parquet"])
def test_verify_catches_a_flipped_byte(packed_copy, tmp_path, target):
    dst = tmp_path / "flip"
    shutil.copytree(packed_copy, dst)
    assert verify(str(dst), decode=True).ok
    path = dst / "shards" / f"shard-000000.{target}"
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    report = verify(str(dst))
    assert not report.ok and any("sha256" in p for p in report.problems)
    result = CliRunner().invoke(cli, ["verify", str(dst)])
    assert result.exit_code != 0 and "shard-000000" in result.output


def test_subset_keeps_source_indices(sample_source, tmp_path):
    dst = tmp_path / "subset"
    report = pack_dataset(str(sample_source), str(dst), episodes=[1, 3, 4, 5])
    assert report.episodes == 4
    index = episodes_index(dst)
    assert [e["episode_index"] for e in index] == [1, 3, 4, 5]
    source = source_episodes(sample_source)
    samples = pq.read_table(dst / "index" / "samples.parquet")
    expected = [i for e in (1, 3, 4, 5) for i in range(source[e]["dataset_from_index"], source[e]["dataset_to_index"])]
    assert samples["index"].to_pylist() == expected
    with pytest.raises(PackError, match=r"episodes \[99\] are not in the source"):
        pack_dataset(str(sample_source), str(tmp_path / "bad"), episodes=[1, 99])


def test_unsupported_codebase_version_points_to_the_converter(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["codebase_version"] = "v2.1"
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match=r"v2.1.*convert_dataset_v21_to_v30"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_missing_and_corrupt_files_are_named(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    with pytest.raises(SourceError, match="source does not exist"):
        pack_dataset(str(tmp_path / "nope"), str(tmp_path / "out0"))
    video = sorted((root / "videos" / "observation.images.top").glob("*/*.mp4"))[1]
    video.write_bytes(b"not an mp4 at all")
    # Caught while planning, before anything is written.
    with pytest.raises(SourceError, match=rf"episode \d+, camera observation.images.top: .*{video.name}: cannot open video"):
        pack_dataset(str(root), str(tmp_path / "out1"))
    assert not (tmp_path / "out1" / "manifest.json").exists()
    data = sorted((root / "data").glob("*/*.parquet"))[0]
    data.unlink()
    with pytest.raises(SourceError, match=rf"{data.name}: missing \(data file of episode 0\)"):
        pack_dataset(str(root), str(tmp_path / "out2"), episodes=[0])


def _shorten_episode_metadata(root: Path, episode: int, frames_missing: int) -> None:
    """Make the metadata claim more rows than the video has frames for one episode."""
    path = sorted((root / "meta" / "episodes").glob("*/*.parquet"))[0]
    table = pq.read_table(path).to_pylist()
    for key in CAMERAS:
        table[episode][f"videos/{key}/to_timestamp"] -= frames_missing / 30
    pq.write_table(pa.Table.from_pylist(table, schema=pq.read_schema(path)), path)


def test_frame_mismatch_errors_pads_or_drops(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    _shorten_episode_metadata(root, 2, 3)
    with pytest.raises(
        FrameMismatchError, match="episode 2, camera observation.images.top: video has 27 frames but the episode has 30 rows"
    ):
        pack_dataset(str(root), str(tmp_path / "err"))
    padded = pack_dataset(str(root), str(tmp_path / "pad"), on_frame_mismatch="pad")
    assert padded.padded_episodes == [2]
    row = next(r for r in episodes_index(tmp_path / "pad") if r["episode_index"] == 2)
    assert row["video/observation.images.top/frames"] == 27 and row["length"] == 30
    manifest = Manifest.from_json((tmp_path / "pad" / "manifest.json").read_text())
    assert manifest.options["on_frame_mismatch"] == "pad" and manifest.extra["padded_episodes"] == [2]
    dropped = pack_dataset(str(root), str(tmp_path / "drop"), on_frame_mismatch="drop-episode")
    assert dropped.dropped_episodes == [2]
    assert 2 not in [r["episode_index"] for r in episodes_index(tmp_path / "drop")]


def test_bad_options_are_refused(sample_source, tmp_path):
    with pytest.raises(ValueError, match=r"resize \(32, 32\) needs a re-encode"):
        pack_dataset(str(sample_source), str(tmp_path / "a"), resize=(32, 32))
    with pytest.raises(PackError, match="window 'w': .*not multiples of 1/fps"):
        pack_dataset(str(sample_source), str(tmp_path / "b"), windows={"w": {"action": [0.01]}})
    with pytest.raises(PackError, match="window 'w': .*not a feature"):
        pack_dataset(str(sample_source), str(tmp_path / "c"), windows={"w": {"nope": [0.0]}})


def test_resize_reencodes_to_the_requested_size(sample_source, tmp_path):
    # The session source's wrist camera is square: one --resize for both would stretch it (issue 49).
    with pytest.raises(
        PackError,
        match=r"--resize would stretch observation.images.wrist 32x32 to 24x32 .*--resize observation.images.wrist=24x24",
    ):
        pack_dataset(str(sample_source), str(tmp_path / "mixed"), video="h264", resize=(24, 32), episodes=[0, 1])
    src = tmp_path / "src"
    write_sample_dataset(src, SampleSpec(episodes=2, lengths=(3, 4), cameras=(CameraSpec("observation.images.top", 48, 64),)))
    dst = tmp_path / "resized"
    pack_dataset(str(src), str(dst), video="h264", resize=(24, 32), episodes=[0, 1])
    row = episodes_index(dst)[0]
    frames = VideoDecoder(member_bytes(dst, row, "observation.images.top")).get_frames_at(indices=[0]).data
    assert tuple(frames.shape[-2:]) == (24, 32)
    assert Manifest.from_json((dst / "manifest.json").read_text()).features["observation.images.top"].shape == (24, 32, 3)


def test_cli_pack_verify_info_sql(sample_source, tmp_path):
    dst = tmp_path / "cli"
    runner = CliRunner()
    result = runner.invoke(
        cli,
        ["pack", str(sample_source), str(dst), "--episodes", "0-4", "--window", 'chunk={"action": [0, 0.0333333, 0.0666667]}'],
    )
    assert result.exit_code == 0, result.output
    assert "packed 5 episodes" in result.output
    assert runner.invoke(cli, ["verify", str(dst), "--decode"]).exit_code == 0
    info = runner.invoke(cli, ["info", str(dst)])
    assert info.exit_code == 0 and "5 / 62" in info.output
    sql = runner.invoke(
        cli, ["sql", str(dst), "SELECT count(*) AS n FROM samples WHERE chunk_action_pad_after = 0", "--format", "json"]
    )
    assert sql.exit_code == 0, sql.output
    lengths = [12, 1, 30, 2, 17]
    assert json.loads(sql.output) == [{"n": sum(max(n - 2, 0) for n in lengths)}]
    frames = runner.invoke(cli, ["sql", str(dst), "SELECT count(*) AS n FROM frames", "--format", "csv"])
    assert frames.output.splitlines() == ["n", "62"]
    bad = runner.invoke(cli, ["sql", str(dst), "SELECT nope FROM samples"])
    assert bad.exit_code != 0 and "SQL failed" in bad.output
    missing = runner.invoke(cli, ["info", str(tmp_path / "none")])
    assert missing.exit_code != 0 and "no manifest.json" in missing.output
