"""The packer's source seam (issues 33, 67): ``run/`` and ``shard/`` see a ``Source`` in the
pack's own terms; a format owns its layout (what to stage, metadata, rows, videos, the pack's
``meta/``) and is a row of ``SOURCE_FORMATS``. LeRobot v2.1 is the second format, packed
directly: a v2.1 dataset packs to the samples LeRobot gives on its v3 form (here: the v3 dataset
the test's v2.1 was laid out from, whose frames and rows it holds; ``make parity`` checks LeRobot
0.6.1 on its own converter's output of a dataset LeRobot 0.3.3 wrote)."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from lerobot_shards import PackedLeRobotDataset, SourceError, check_dataset, pack_dataset
from lerobot_shards.packer.source import SOURCE_FORMATS, LeRobotSource, LeRobotV21Source, Source, format_of, open_dataset_source
from lerobot_shards.testing import rollover_spec, to_v21, write_sample_dataset_v21
from tests.lerobot_reference import reference_item
from tests.packed_fixtures import *
from tests.reader.test_reader_parity import WINDOWS, assert_same_sample


@pytest.fixture(scope="module")
def v21_source(sample_source, tmp_path_factory):
    """The session's v3 source laid out as LeRobot v2.1 (per-episode parquet and mp4)."""
    root = tmp_path_factory.mktemp("v21") / "lerobot-v21"
    to_v21(sample_source, root)
    return root


def test_each_format_has_every_member_of_the_interface(sample_source, v21_source):
    members = [name for name in dir(Source) if not name.startswith("_")] + list(Source.__annotations__)
    for root, kind in ((sample_source, LeRobotSource), (v21_source, LeRobotV21Source)):
        source = open_dataset_source(root)
        assert isinstance(source, kind)
        missing = [name for name in members if not hasattr(source, name)]
        assert not missing, (kind.__name__, missing)
    assert [f.name for f in SOURCE_FORMATS] == ["LeRobot v2.1", "LeRobot v3"]
    assert format_of(v21_source).name == "LeRobot v2.1" and format_of(sample_source).name == "LeRobot v3"


@pytest.mark.parametrize("window", [None, "past_and_future", "wide"])
def test_a_v21_dataset_packs_to_the_samples_lerobot_gives(sample_source, v21_source, tmp_path, window):
    """Every sample of a pack of the v2.1 layout equals LeRobot's of the same data (the oracle
    reads the v3 form), in copy mode: each episode's mp4 stream-copied as it is."""
    report = pack_dataset(str(v21_source), str(tmp_path / "pack"), shard_size_mb=SHARD_SIZE_MB)
    assert report.episodes == 9 and report.reencoded_episodes == []
    delta = WINDOWS[window] if window else None
    ds = PackedLeRobotDataset(str(tmp_path / "pack"), delta_timestamps=delta)
    assert len(ds) == 141
    for position in range(len(ds)):
        assert_same_sample(reference_item(sample_source, position, delta), ds[position], f"v2.1 ds[{position}]")
    manifest = json.loads((tmp_path / "pack" / "manifest.json").read_text())
    assert manifest["source"]["codebase_version"] == "v2.1"
    info = json.loads((tmp_path / "pack" / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["storage_format"] == "lerobot_shards"
    # The pack's meta/ is LeRobot v3's, as LeRobot's converter makes it.
    assert sorted(p.relative_to(tmp_path / "pack" / "meta").as_posix() for p in (tmp_path / "pack" / "meta").rglob("*.*")) == [
        "episodes/chunk-000/file-000.parquet",
        "info.json",
        "stats.json",
        "tasks.parquet",
    ]


def test_an_episode_selection_and_a_reencode_of_a_v21_dataset(sample_source, v21_source, tmp_path):
    pack_dataset(str(v21_source), str(tmp_path / "pack"), episodes=[2, 7], video="h264", shard_size_mb=SHARD_SIZE_MB)
    ds = PackedLeRobotDataset(str(tmp_path / "pack"), delta_timestamps=WINDOWS["past_and_future"])
    assert ds.episodes == [2, 7] and len(ds) == 30 + 40
    sample = ds[35]
    expected = reference_item(sample_source, int(sample["index"]), WINDOWS["past_and_future"])
    for key in ("action", "observation.state", "index", "task_index", "action_is_pad"):
        assert torch.equal(sample[key], expected[key]), key


def test_v21_quirks_are_said_and_what_lerobot_cannot_read_is_refused(sample_source, tmp_path):
    """Without ``episodes_stats.jsonl`` (LeRobot's converter stops there) the pack says so and
    keeps no statistics; an ``index`` that is not the running row number (LeRobot's windows would
    read other rows) is refused naming the episode; ``check`` says what it reads."""
    root = write_sample_dataset_v21(tmp_path / "no-stats", rollover_spec(episodes=3, lengths=(12, 1, 30)), episodes_stats=False)
    source = open_dataset_source(root)
    notes = source.reading_notes()
    assert any("episodes_stats.jsonl: missing, which LeRobot's converter needs" in n for n in notes), notes
    report = pack_dataset(str(root), str(tmp_path / "pack"))
    assert report.finalized and not (tmp_path / "pack" / "meta" / "stats.json").exists()
    assert PackedLeRobotDataset(str(tmp_path / "pack")).meta.stats == {}

    shifted = tmp_path / "shifted"
    shutil.copytree(root, shifted)
    path = shifted / "data" / "chunk-000" / "episode_000001.parquet"
    table = pq.read_table(path)
    pq.write_table(
        table.set_column(table.schema.get_field_index("index"), "index", pa.array([i + 100 for i in table["index"].to_pylist()])),
        path,
    )
    with pytest.raises(
        SourceError, match=r"episode_000001.parquet: episode 1: rows have index 1\d\d\.\.\d+; the episodes metadata says"
    ):
        pack_dataset(str(shifted), str(tmp_path / "pack-shifted"))
    checked = check_dataset(str(root))
    assert checked.source_format == "LeRobot v2.1"


def test_a_v2_0_dataset_is_refused_with_the_converters(tmp_path):
    root = write_sample_dataset_v21(tmp_path / "v20", rollover_spec(episodes=2, lengths=(4, 5)))
    info = json.loads((root / "meta" / "info.json").read_text())
    (root / "meta" / "info.json").write_text(json.dumps({**info, "codebase_version": "v2.0"}))
    with pytest.raises(SourceError, match=r"codebase_version 'v2.0' is not v2.1"):
        pack_dataset(str(root), str(tmp_path / "pack"))
