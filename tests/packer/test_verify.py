"""verify: a clean pack passes; every kind of damage is reported naming the file (and episode),
and the CLI exits non-zero."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards import verify
from lerobot_shards.cli import main as cli
from tests.pack_tamper import edit_episodes_index
from tests.packed_fixtures import *
from tests.packed_fixtures import CAMERAS, episodes_index


@pytest.fixture
def damaged(packed_copy, tmp_path):
    dst = tmp_path / "damaged"
    shutil.copytree(packed_copy, dst)
    return dst


def _cli_fails(dst, *args) -> str:
    result = CliRunner().invoke(cli, ["verify", str(dst), *args])
    assert result.exit_code != 0
    return result.output


def test_a_clean_pack_verifies_and_decodes(packed_copy):
    report = verify(str(packed_copy), decode=True)
    assert report.ok, report.problems
    assert report.episodes_checked == 9 and report.members_decoded == 9 * len(CAMERAS)
    result = CliRunner().invoke(cli, ["verify", str(packed_copy), "--decode"])
    assert result.exit_code == 0 and "18 members decoded" in result.output


def test_a_flipped_byte_inside_a_member_names_the_episode(damaged):
    row = episodes_index(damaged)[2]
    tar = damaged / "shards" / f"shard-{row['shard']:06d}.tar"
    data = bytearray(tar.read_bytes())
    data[row[f"video/{CAMERAS[0]}/offset"] + 100] ^= 0xFF
    tar.write_bytes(bytes(data))
    problems = verify(str(damaged)).problems
    assert any(f"{tar.name}: sha256" in p for p in problems)
    assert any(
        f"episode {row['episode_index']} camera {CAMERAS[0]}: sha256" in p and "differs from the recorded" in p for p in problems
    )
    assert "differs from the recorded" in _cli_fails(damaged)


def test_missing_and_truncated_shards(damaged):
    (damaged / "shards" / "shard-000001.parquet").unlink()
    tar = damaged / "shards" / "shard-000000.tar"
    tar.write_bytes(tar.read_bytes()[:-1024])
    problems = verify(str(damaged)).problems
    assert "shards/shard-000001.parquet: missing" in problems
    assert any(p.startswith("shards/shard-000000.tar: ") and "manifest says" in p for p in problems)
    _cli_fails(damaged)


def test_edited_index_files_fail_their_digests(damaged):
    samples = pq.read_table(damaged / "index" / "samples.parquet")
    pq.write_table(samples.slice(1), damaged / "index" / "samples.parquet")
    episodes = pq.read_table(damaged / "index" / "episodes.parquet")
    frames = f"video/{CAMERAS[1]}/frames"
    changed = episodes.set_column(episodes.schema.get_field_index(frames), frames, pa.array([1] * episodes.num_rows, pa.int64()))
    pq.write_table(changed, damaged / "index" / "episodes.parquet")
    problems = verify(str(damaged)).problems
    assert any(p.startswith("index/samples.parquet: ") and "manifest says" in p for p in problems)
    assert any(p.startswith("index/episodes.parquet: ") and "manifest says" in p for p in problems)


def test_a_consistently_resealed_index_is_still_checked_against_the_shards(damaged):
    # A writer who recomputes every digest cannot make the indexes disagree with the data
    # unnoticed: anchors, pad counts and frame counts are recomputed from what is packed.
    samples = pq.read_table(damaged / "index" / "samples.parquet")
    pq.write_table(samples.slice(1), damaged / "index" / "samples.parquet")
    frames = f"video/{CAMERAS[1]}/frames"
    edit_episodes_index(damaged, lambda rows: [r.update({frames: min(3, r["length"])}) for r in rows])
    problems = verify(str(damaged), decode=True).problems
    assert any("index/samples.parquet: 140 rows, the manifest says 141 frames" in p for p in problems)
    # The member's sample table (12 samples) is compared with the index before decoding.
    assert any(f"camera {CAMERAS[1]}: mp4 box stsz: claims 12 samples; the dataset records 3 frames" in p for p in problems)


def test_no_manifest_is_an_incomplete_pack(damaged):
    (damaged / "manifest.json").unlink()
    assert verify(str(damaged)).problems == [f"{damaged}: no manifest.json; not a packed dataset, or its pack has not finished"]
    assert "no manifest.json" in _cli_fails(damaged)
