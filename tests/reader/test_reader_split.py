"""Exactly-once, balanced, deterministic epochs and offset resume, through real DataLoaders
with real worker processes (issue 4, contracts 2-6)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from lerobot_shards import FormatError, IntegrityError, PackedDataset, ResumeStateError, UnsupportedFormatVersionError
from lerobot_shards.reader.runtime import detect_world
from tests.pack_tamper import edit_manifest
from tests.packed_fixtures import *

TOTAL = 141


def _indices(loader) -> list[list[int]]:
    return [batch["index"].tolist() for batch in loader]


def _loader(dataset, *, batch_size: int, num_workers: int):
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
def test_exactly_once_and_equal_counts(packed_copy, world_size, num_workers):
    per_rank = []
    for rank in range(world_size):
        dataset = PackedDataset(
            str(packed_copy), rank=rank, world_size=world_size, seed=7, episode_pool_size=3, return_uint8=True
        )
        batches = _indices(_loader(dataset, batch_size=5, num_workers=num_workers))
        flat = [i for batch in batches for i in batch]
        assert len(flat) == len(dataset) == TOTAL // world_size
        per_rank.append(flat)
    seen = [i for flat in per_rank for i in flat]
    assert len(seen) == len(set(seen)), "an anchor was yielded twice"
    assert len(set(range(TOTAL)) - set(seen)) == TOTAL % world_size < world_size


def test_more_consumers_than_episodes(packed_copy):
    """12 consumers for 3 episodes (8 anchors): no crash, no idle-worker hang, exactly once."""
    seen = []
    for rank in range(4):
        dataset = PackedDataset(str(packed_copy), episodes=[1, 3, 8], rank=rank, world_size=4)
        seen += [i for batch in _indices(_loader(dataset, batch_size=2, num_workers=3)) for i in batch]
    # episodes 1, 3, 8 hold 1 + 2 + 5 = 8 anchors: 2 per rank, nothing dropped.
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 8


def test_deterministic_per_seed_and_reshuffled_per_epoch(packed_copy):
    def run(seed: int, epoch: int) -> list[int]:
        dataset = PackedDataset(str(packed_copy), seed=seed, episode_pool_size=4)
        dataset.set_epoch(epoch)
        return [i for batch in _indices(_loader(dataset, batch_size=8, num_workers=2)) for i in batch]

    first = run(0, 0)
    assert first == run(0, 0)
    assert first != run(0, 1) and sorted(run(0, 1)) == sorted(first) == list(range(TOTAL))
    assert first != run(1, 0)


def test_shuffle_false_is_index_order_per_consumer(packed_copy):
    dataset = PackedDataset(str(packed_copy), shuffle=False)
    assert [int(s["index"]) for s in dataset] == list(range(TOTAL))


def test_pool_mixes_episodes_and_respects_its_bound(packed_copy):
    dataset = PackedDataset(str(packed_copy), seed=3, episode_pool_size=3, return_uint8=True)
    batches = [batch["episode_index"].tolist() for batch in _loader(dataset, batch_size=16, num_workers=2)]
    stats = dataset.stats()
    assert stats["samples"] == TOTAL
    assert stats["max_open_episodes"] <= 3, "pool held more episodes than episode_pool_size"
    assert stats["episodes_admitted"] >= 9 and stats["decoder_misses"] > 0 and stats["bytes_fetched"] > 0
    assert np.mean([len(set(b)) for b in batches[:-1]]) >= 2.0


@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_resume_continues_the_exact_sequence(packed_copy, num_workers):
    def dataset():
        return PackedDataset(str(packed_copy), seed=11, episode_pool_size=4, return_uint8=True)

    batch_size = 4
    full = _indices(_loader(dataset(), batch_size=batch_size, num_workers=num_workers))
    for k in (1, 3, 8, len(full) - 1):
        resumed_ds = dataset()
        consumed = sum(len(b) for b in full[:k])
        resumed_ds.load_state_dict(
            dataset().state_dict(samples_consumed=consumed, batch_size=batch_size, num_workers=num_workers)
        )
        assert (
            len(resumed_ds) == len(resumed_ds.upcoming_anchors(num_workers=0, limit=None).index) == sum(len(b) for b in full[k:])
        )
        resumed = _indices(_loader(resumed_ds, batch_size=batch_size, num_workers=num_workers))
        assert resumed == full[k:], f"resume after {k} batches with {num_workers} workers diverged"


def test_resume_with_different_workers_stays_exactly_once(packed_copy):
    first = PackedDataset(str(packed_copy), seed=2, return_uint8=True)
    batches = _indices(_loader(first, batch_size=4, num_workers=2))
    consumed = sum(len(b) for b in batches[:5])
    resumed = PackedDataset(str(packed_copy), seed=2, return_uint8=True)
    resumed.load_state_dict(first.state_dict(samples_consumed=consumed, batch_size=4, num_workers=2))
    rest = [i for b in _indices(_loader(resumed, batch_size=4, num_workers=3)) for i in b]
    done = [i for b in batches[:5] for i in b]
    assert sorted(done + rest) == list(range(TOTAL))


def test_resume_reads_no_data_to_skip(packed_copy):
    """Skipping is arithmetic: resuming near the end fetches only what the tail needs."""
    full = PackedDataset(str(packed_copy), seed=4, episode_pool_size=2, return_uint8=True)
    list(full)
    tail = PackedDataset(str(packed_copy), seed=4, episode_pool_size=2, return_uint8=True)
    tail.load_state_dict(full.state_dict(samples_consumed=TOTAL - 3, batch_size=1, num_workers=0))
    assert len(list(tail)) == 3
    assert tail.stats()["episodes_admitted"] <= 2 < full.stats()["episodes_admitted"]


def test_resume_state_round_trip_and_errors(packed_copy):
    dataset = PackedDataset(str(packed_copy))
    dataset.set_epoch(3)
    state = dataset.state_dict(samples_consumed=8, batch_size=4, num_workers=2)
    assert state["epoch"] == 3 and state["samples_consumed"] == 8 and state["kind"] == "PackedDataset"
    assert state["phases"] == [{"start": 0, "world_size": 1, "num_workers": 2, "batch_size": 4, "drop_last": False}]
    assert json.loads(json.dumps(state)) == state, "a state is plain JSON"
    # The README's old form cannot say how the epoch was split: refused, not guessed.
    with pytest.raises(ResumeStateError, match=r"not a resume state .*found keys \['batch_size', 'epoch', 'samples_consumed'\]"):
        dataset.load_state_dict({"epoch": 0, "samples_consumed": 3, "batch_size": 2})
    odd = dataset.state_dict(samples_consumed=3, batch_size=2, num_workers=0)
    dataset.load_state_dict(odd)
    with pytest.raises(ValueError, match="samples_consumed=3 does not end a batch"):
        list(dataset)


def test_world_detect_reads_env(monkeypatch):
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    world = detect_world()
    assert (world.rank, world.world_size) == (2, 4)


# -- bad input ------------------------------------------------------------------------------
def _copy(packed_copy, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(packed_copy, dst)
    return dst


def test_truncated_shard_names_shard_and_episode(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    tar = dst / "shards" / "shard-000001.tar"
    tar.write_bytes(tar.read_bytes()[:600])
    with pytest.raises(IntegrityError, match=r"shard-000001 episode \d+: .*shard-000001.tar: ranged read .*truncated"):
        list(PackedDataset(str(dst), shuffle=False))


def test_member_bytes_that_do_not_match_the_index(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    tar = dst / "shards" / "shard-000000.tar"
    data = bytearray(tar.read_bytes())
    data[700] ^= 0xFF
    tar.write_bytes(bytes(data))
    with pytest.raises(
        IntegrityError, match=r"shard-000000.tar shard-000000 episode 0 camera observation.images.top: sha256 .* differs"
    ):
        list(PackedDataset(str(dst), shuffle=False))


def test_unknown_version_and_index_disagreement(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    manifest = (dst / "manifest.json").read_text()
    (dst / "manifest.json").write_text(manifest.replace('"format_version": 3', '"format_version": 99'))
    with pytest.raises(UnsupportedFormatVersionError, match="format_version 99 is not supported"):
        PackedDataset(str(dst))
    (dst / "manifest.json").write_text(manifest.replace('"format_version": 3', '"format_version": 1'))
    with pytest.raises(
        UnsupportedFormatVersionError, match="format_version 1: .*re-pack the source with this version: lerobot-shards pack"
    ):
        PackedDataset(str(dst))
    # Damage to the manifest itself: its content digest no longer matches.
    (dst / "manifest.json").write_text(manifest.replace('"frames": 141', '"frames": 142', 1))
    with pytest.raises(IntegrityError, match="manifest.json: content does not match its content_sha256"):
        PackedDataset(str(dst))
    # A consistent rewrite (digests recomputed) is still checked for coherence.
    (dst / "manifest.json").write_text(manifest)
    edit_manifest(dst, lambda m: m["totals"].update(frames=142))
    with pytest.raises(FormatError, match=r"totals: frames 142 \(the shards add up to 141\)"):
        PackedDataset(str(dst))
    (dst / "manifest.json").unlink()
    with pytest.raises(FormatError, match="no manifest.json; not a packed dataset"):
        PackedDataset(str(dst))
