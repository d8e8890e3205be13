"""The module LeRobot's ``storage_format`` registry loads (issue 66), driven as LeRobot main
drives it (PRs #4363, #4541, #4576, #4549; no LeRobot release has the registry, so the
contract is written here from the PRs):

- a pack's ``meta/info.json`` names its storage format, and the entry point of the group
  ``lerobot.dataset_readers`` under that name is this module, which binds ``DATASET_READER`` and
  ``localize_root`` (the registry imports the module and reads those two names);
- ``DATASET_READER`` is built with exactly the keywords ``make_dataset_reader`` passes, has
  ``episodes``, ``num_frames``, ``num_episodes``, ``absolute_to_relative_idx``, ``get_item`` and
  ``get_items``, and pickles with nothing open;
- ``localize_root`` gives a folder whose ``meta/`` LeRobot's metadata loader reads, and raises
  ``FileNotFoundError`` for a root that holds no pack (so LeRobot asks its other formats).
"""

from __future__ import annotations

import importlib
import json
import pickle
import shutil
from importlib.metadata import entry_points
from types import SimpleNamespace

import pytest
import torch

from lerobot_shards.core.format import STORAGE_FORMAT
from tests.lerobot_reference import reference_item
from tests.pack_tamper import reseal
from tests.packed_fixtures import *
from tests.reader.test_reader_parity import WINDOWS, assert_same_sample

GROUP = "lerobot.dataset_readers"


def _registry_module():
    """The module as LeRobot PR #4576 finds it: the entry point named by the storage format,
    its ``module`` imported."""
    found = [e for e in entry_points(group=GROUP) if e.name == STORAGE_FORMAT]
    assert len(found) == 1, f"the installed package declares no {GROUP} entry point {STORAGE_FORMAT!r}"
    return importlib.import_module(found[0].module)


def _make_reader(module, meta, root, **overrides):
    """``make_dataset_reader(storage_format, **kwargs)`` for a non-default format: the keywords
    LeRobotDataset passes (PR #4363's contract comment), nothing else."""
    kwargs = dict(
        meta=meta,
        root=root,
        episodes=None,
        delta_timestamps=None,
        image_transforms=None,
        tolerance_s=1e-4,
        revision=None,
        return_uint8=False,
        depth_output_unit="mm",
        token=None,
    )
    kwargs.update(overrides)
    return module.DATASET_READER(**kwargs)


def test_a_pack_names_the_format_whose_entry_point_is_this_reader(packed_copy, packed_hevc):
    for pack in (packed_copy, packed_hevc):
        info = json.loads((pack / "meta" / "info.json").read_text())
        assert info["storage_format"] == STORAGE_FORMAT
    module = _registry_module()
    assert callable(module.DATASET_READER) and callable(module.localize_root)
    # The pack's info.json describes what the pack holds (a re-encode's codec), as LeRobot's meta will.
    hevc = json.loads((packed_hevc / "meta" / "info.json").read_text())
    assert hevc["features"]["observation.images.top"]["info"]["video.codec"] == "hevc"


def test_the_reader_meets_the_registry_contract(sample_source, packed_copy):
    module = _registry_module()
    delta = WINDOWS["past_and_future"]
    meta = SimpleNamespace(repo_id="local/sample", root=packed_copy)  # what the reader may read of LeRobot's meta
    reader = _make_reader(module, meta, str(packed_copy), episodes=[3, 7], delta_timestamps=delta, return_uint8=True)
    assert reader.episodes == [3, 7] and reader.num_episodes == 2
    assert reader.num_frames == len(reader) == 2 + 40
    mapping = reader.absolute_to_relative_idx
    first = int(reader.get_item(0)["index"])
    assert mapping[first] == 0 and reader._absolute_to_relative_idx is mapping
    items = reader.get_items([41, 0, 41])  # in order, duplicates kept
    last = int(reader.get_item(41)["index"])
    assert [int(i["index"]) for i in items] == [last, first, last] and last == 96 + 39  # episode 7 starts at 96
    for item in items:
        assert_same_sample(reference_item(sample_source, int(item["index"]), delta, return_uint8=True), item, "get_items")
    # Pickled into a worker (LeRobot trains with spawn): nothing open travels, items are the same.
    copy = pickle.loads(pickle.dumps(reader))
    assert copy.dataset._engine is None
    assert_same_sample(items[1], copy.get_item(0), "after pickling")
    # LeRobotDataset.set_image_transforms / clear_image_transforms reach the reader.
    reader.set_image_transforms(lambda frames: torch.zeros_like(frames))
    assert not reader.get_item(0)["observation.images.top"].any()
    reader.clear_image_transforms()
    assert torch.equal(reader.get_item(0)["observation.images.top"], items[1]["observation.images.top"])
    # Keywords a later LeRobot passes are accepted.
    _make_reader(module, meta, str(packed_copy), video_decoder_cache_size=8)


def test_all_episodes_number_as_lerobot_does_without_a_selection(packed_copy):
    reader = _make_reader(_registry_module(), SimpleNamespace(repo_id="local/sample"), str(packed_copy))
    assert reader.episodes is None and reader.absolute_to_relative_idx is None
    assert [int(i["index"]) for i in reader.get_items([0, 140])] == [0, 140]


def test_localize_root_gives_the_packs_meta_or_says_it_is_not_a_pack(packed_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("LEROBOT_SHARDS_CACHE", str(tmp_path / "cache"))
    module = _registry_module()
    folder = module.localize_root("local/sample", str(packed_copy), None, token=None, force_cache_sync=False)
    for rel in ("meta/info.json", "meta/tasks.parquet", "meta/stats.json"):
        assert (folder / rel).read_bytes() == (packed_copy / rel).read_bytes()
    assert sorted(p.name for p in (folder / "meta" / "episodes").rglob("*.parquet")) == sorted(
        p.name for p in (packed_copy / "meta" / "episodes").rglob("*.parquet")
    )
    # Again: the same folder, nothing read; force_cache_sync writes it anew.
    assert module.localize_root("local/sample", str(packed_copy)) == folder
    (folder / "meta" / "stats.json").write_text("{}")
    assert module.localize_root("local/sample", str(packed_copy), force_cache_sync=True) == folder
    assert (folder / "meta" / "stats.json").read_bytes() == (packed_copy / "meta" / "stats.json").read_bytes()
    with pytest.raises(FileNotFoundError, match="not a lerobot-shards pack"):
        module.localize_root("local/other", str(tmp_path / "nothing-here"))


def test_an_older_packs_info_is_given_the_storage_format(sample_source, packed_copy, tmp_path, monkeypatch):
    """Packs before 2026-12-06 copied their source's info.json: localized, it says the format
    (and the features as packed), so LeRobot routes to this reader."""
    monkeypatch.setenv("LEROBOT_SHARDS_CACHE", str(tmp_path / "cache"))
    older = tmp_path / "older"
    shutil.copytree(packed_copy, older)
    shutil.copy(sample_source / "meta" / "info.json", older / "meta" / "info.json")  # what packs held then
    manifest = reseal(older)
    assert "storage_format" not in json.loads((older / "meta" / "info.json").read_text())
    folder = _registry_module().localize_root("local/older", str(older))
    said = json.loads((folder / "meta" / "info.json").read_text())
    assert said["storage_format"] == STORAGE_FORMAT and said["features"] == manifest["features"]
