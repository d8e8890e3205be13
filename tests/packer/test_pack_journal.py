"""Never adopt a shard you did not write (issue 21, finding 1).

Whoever can write a shared destination prefix can plant a shard whose receipt names the
victim's plan (the plan digest is computable from the public source, or simply read from
``pack-plan.json``) and whose sizes and digests match the planted files. The pack journal,
kept outside the destination, records what this machine committed: a resume rebuilds what
it did not write, and ``finalize`` publishes only receipts, parquet and ``meta/`` it wrote.
"""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards import PackError, finalize, pack_dataset
from lerobot_shards.cli import main as cli
from tests.pack_tamper import fill_column, plant_shard
from tests.packed_fixtures import *
from tests.packed_fixtures import PACK_WINDOWS, SHARD_SIZE_MB, assert_same_tree

PLANTED = 666.0


def _pack(source, dst, **kwargs):
    return pack_dataset(str(source), str(dst), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, **kwargs)


def _plant(victim, honest, shard):
    """Copy an honest pack's shard (same plan digest) into ``victim`` with action = 666,
    receipt re-sealed: consistent sizes and digests, the victim's plan."""
    for suffix in (".tar", ".parquet", ".json"):
        shutil.copy(honest / "shards" / f"shard-{shard:06d}{suffix}", victim / "shards")
    plant_shard(victim, shard, fill_column("action", PLANTED))
    assert pq.read_table(victim / "shards" / f"shard-{shard:06d}.parquet")["action"].to_pylist()[0][0] == PLANTED


def _actions(root):
    return {v for p in sorted((root / "shards").glob("*.parquet")) for row in pq.read_table(p)["action"].to_pylist() for v in row}


def test_a_resumed_pack_rebuilds_a_planted_shard(sample_source, packed_copy, tmp_path):
    victim = tmp_path / "victim"
    _pack(sample_source, victim, part=(0, 2))
    _plant(victim, packed_copy, 1)  # shard 1 belongs to part 1/2, not packed yet
    report = _pack(sample_source, victim, part=(1, 2))
    assert report.shards_skipped == 0 and report.shards_written == report.shards
    finalize(str(victim))
    assert PLANTED not in _actions(victim)
    assert_same_tree(packed_copy, victim)


def test_trusting_the_destination_adopts_what_it_holds(sample_source, packed_copy, tmp_path):
    """The same plant with ``trust_destination``: adopted, because its files match its
    receipt. This is what the journal prevents by default (and why the flag says so)."""
    victim = tmp_path / "victim"
    _pack(sample_source, victim, part=(0, 2))
    _plant(victim, packed_copy, 1)
    report = _pack(sample_source, victim, part=(1, 2), trust_destination=True)
    assert report.shards_skipped == 1  # the planted shard 1; shard 3 is built
    finalize(str(victim), trust_destination=True)
    assert PLANTED in _actions(victim)


def test_finalize_refuses_receipts_it_did_not_write(sample_source, packed_copy, tmp_path):
    victim = tmp_path / "victim"
    _pack(sample_source, victim, part=(0, 2))
    for shard in (1, 3):
        _plant(victim, packed_copy, shard)
    with pytest.raises(
        PackError, match=r"2 shard receipt\(s\) not in this machine's pack journal .*shard-000001.*--trust-destination"
    ):
        finalize(str(victim))
    assert not (victim / "manifest.json").exists()


def test_finalize_hashes_what_it_publishes(sample_source, tmp_path):
    """A receipt this machine wrote, with its parquet replaced afterwards: finalize hashes
    the parquet as it reads it and refuses, rather than indexing the replacement."""
    victim = tmp_path / "victim"
    _pack(sample_source, victim, part=(0, 1))
    receipt = json.loads((victim / "shards" / "shard-000000.json").read_text())
    plant_shard(victim, 0, fill_column("action", PLANTED))
    (victim / "shards" / "shard-000000.json").write_text(json.dumps(receipt, indent=1, sort_keys=True))
    with pytest.raises(PackError, match=r"shard-000000.parquet: does not match the digest its receipt records"):
        finalize(str(victim))


def test_finalize_refuses_meta_changed_after_the_pack(sample_source, tmp_path):
    victim = tmp_path / "victim"
    _pack(sample_source, victim, part=(0, 1))
    info = victim / "meta" / "info.json"
    info.write_text(info.read_text().replace('"fps": 30', '"fps": 15'))
    with pytest.raises(PackError, match=r"meta/ differs from what the pack wrote \(\['meta/info.json'\]\)"):
        finalize(str(victim))


def test_a_meta_file_planted_with_the_right_size_is_copied_again(sample_source, tmp_path):
    victim = tmp_path / "victim"
    _pack(sample_source, victim, part=(0, 2))
    info = victim / "meta" / "info.json"
    honest = info.read_bytes()
    info.write_bytes(honest.replace(b'"fps": 30', b'"fps": 15'))  # same size
    _pack(sample_source, victim, part=(1, 2))
    assert info.read_bytes() == honest
    finalize(str(victim))


def test_cli_finalize_of_a_copied_destination_names_the_journal_and_the_flag(packed_copy, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(packed_copy, copy)
    (copy / "manifest.json").unlink()
    runner = CliRunner()
    result = runner.invoke(cli, ["finalize", str(copy)])
    assert result.exit_code == 1
    assert "not in this machine's pack journal" in result.output or "no record of this plan's meta/" in result.output
    assert "--trust-destination" in result.output and "Traceback" not in result.output
    result = runner.invoke(cli, ["finalize", str(copy), "--trust-destination"])
    assert result.exit_code == 0, result.output
    assert_same_tree(packed_copy, copy)


def test_a_journal_directory_given_explicitly_is_used(sample_source, tmp_path):
    journal = tmp_path / "journal"
    dst = tmp_path / "dst"
    _pack(sample_source, dst, part=(0, 1), journal=str(journal))
    assert sorted(p.name for p in next(journal.iterdir()).iterdir())[:2] == ["meta.json", "shard-000000.json"]
    with pytest.raises(PackError, match="no record of this plan's meta/"):
        finalize(str(dst))  # the default journal knows nothing of it
    finalize(str(dst), journal=str(journal))
