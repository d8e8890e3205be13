"""Random access with LeRobot's interface (issue 66): ``PackedLeRobotDataset``.

Contracts: ``ds[i]`` equals ``LeRobotDataset(...)[i]`` (the oracle of tests/lerobot_reference.py,
itself checked against LeRobot 0.6.1 by ``make parity``) at every position, LeRobot's relative
positions and absolute ``index`` under a selection, and what LeRobot's ``EpisodeAwareSampler``
reads (``meta.episodes``, ``episodes``, ``absolute_to_relative_idx``) leads to exactly the
dataset's frames. Cost is counted, never timed: a batch fetches each episode it touches once,
decodes each member's frames forwards, and what a process keeps open stays within its bounds.
"""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
import torch

from lerobot_shards import PackedLeRobotDataset
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.reader.decode import CpuDecoders
from tests.lerobot_reference import reference_item
from tests.packed_fixtures import *
from tests.reader.test_reader_parity import WINDOWS, assert_same_sample

LENGTHS = [12, 1, 30, 2, 17, 25, 9, 40, 5]  # rollover_spec(): the session source's episodes
CAMERAS = 2


@pytest.mark.parametrize("window", [None, "past_and_future", "wide", "single"])
@pytest.mark.parametrize("uint8", [False, True], ids=["float32", "uint8"])
def test_every_position_equals_lerobot(sample_source, packed_copy, window, uint8):
    delta = WINDOWS[window] if window else None
    ds = PackedLeRobotDataset(str(packed_copy), delta_timestamps=delta, return_uint8=uint8)
    assert len(ds) == ds.num_frames == sum(LENGTHS) and ds.num_episodes == len(LENGTHS)
    assert ds.episodes is None and ds.absolute_to_relative_idx is None
    # The whole dataset, one batch of every position in a shuffled order (and position by position).
    order = list(range(len(ds)))
    random.Random(3).shuffle(order)
    for position, sample in zip(order, ds.__getitems__(order)):
        assert int(sample["index"]) == position  # nothing selected: absolute = relative
        expected = reference_item(sample_source, position, delta, return_uint8=uint8)
        assert_same_sample(expected, sample, f"ds[{position}]")
    assert_same_sample(reference_item(sample_source, 77, delta, return_uint8=uint8), ds[77], "ds[77]")


def test_a_selection_is_numbered_as_lerobot_numbers_it(sample_source, packed_copy):
    """``episodes=[7, 1, 3]``: positions run over episodes 1, 3, 7 in storage order; ``index`` is
    absolute; ``absolute_to_relative_idx`` maps it back; ``episodes`` stays as given."""
    delta = WINDOWS["past_and_future"]
    ds = PackedLeRobotDataset(str(packed_copy), episodes=[7, 1, 3], delta_timestamps=delta)
    assert ds.episodes == [7, 1, 3] and ds.num_episodes == 3
    assert len(ds) == LENGTHS[1] + LENGTHS[3] + LENGTHS[7]
    starts = np.cumsum([0, *LENGTHS])
    absolute = [int(i) for e in (1, 3, 7) for i in range(starts[e], starts[e + 1])]
    samples = ds.__getitems__(list(range(len(ds))))
    assert [int(s["index"]) for s in samples] == absolute
    mapping = ds.absolute_to_relative_idx
    assert mapping is not None and len(mapping) == len(ds)
    assert [mapping[a] for a in absolute] == list(range(len(ds)))
    assert starts[2] not in mapping and absolute[0] in mapping
    with pytest.raises(KeyError):
        mapping[int(starts[2])]  # episode 2 is not selected
    for position in (0, 1, len(ds) - 1):
        assert_same_sample(reference_item(sample_source, absolute[position], delta), ds[position], f"ds[{position}]")
    with pytest.raises(ArgumentError, match=r"episodes \[42\] are not in"):
        PackedLeRobotDataset(str(packed_copy), episodes=[1, 42])


@pytest.mark.parametrize("episodes", [None, [8, 2, 5]])
def test_what_lerobots_sampler_reads_leads_to_exactly_the_datasets_frames(packed_copy, episodes):
    """LeRobot's EpisodeAwareSampler takes ``meta.episodes`` rows by episode index, trims
    ``drop_n_last_frames``, and maps absolute indices through ``absolute_to_relative_idx``:
    done here by the contract's words, every frame is reached once, each its own."""
    ds = PackedLeRobotDataset(str(packed_copy), episodes=episodes)
    bounds = ds.meta.episodes
    chosen = range(len(bounds)) if ds.episodes is None else ds.episodes
    mapping = ds.absolute_to_relative_idx
    for drop in (0, 3):
        absolute = [i for e in chosen for i in range(bounds[e]["dataset_from_index"], bounds[e]["dataset_to_index"] - drop)]
        positions = [mapping[a] if mapping is not None else a for a in absolute]
        assert len(set(positions)) == len(positions) and all(0 <= p < len(ds) for p in positions)
        if drop == 0:
            assert sorted(positions) == list(range(len(ds)))
        picked = random.Random(1).sample(range(len(positions)), 6)
        for k, sample in zip(picked, ds.__getitems__([positions[k] for k in picked])):
            assert int(sample["index"]) == absolute[k]
    columns = bounds["dataset_from_index"], bounds["dataset_to_index"]
    assert all(isinstance(c, np.ndarray) and len(c) == len(bounds) == len(LENGTHS) for c in columns)


def test_positions_negative_slices_and_bad_indices(packed_copy):
    ds = PackedLeRobotDataset(str(packed_copy))
    assert int(ds[-1]["index"]) == len(ds) - 1
    assert [int(s["index"]) for s in ds[5:11:3]] == [5, 8]
    for bad in (len(ds), -len(ds) - 1):
        with pytest.raises(IndexError, match="out of range"):
            ds[bad]
    with pytest.raises(IndexError, match="integers"):
        ds.__getitems__([1, 2.5])
    with pytest.raises(IndexError, match="integers"):
        ds[True]
    subset = torch.utils.data.Subset(ds, [3, 9])  # torch's Subset forwards __getitems__
    assert [int(s["index"]) for s in subset.__getitems__([1, 0])] == [9, 3]


def test_a_batch_reads_each_episode_once_and_decodes_each_member_forwards(packed_copy, monkeypatch):
    decoded: list[tuple[int, list[int]]] = []
    real = CpuDecoders.decode

    def spy(decoder, indices, *, where):
        decoded.append((id(decoder), list(indices)))
        return real(decoder, indices, where=where)

    monkeypatch.setattr(CpuDecoders, "decode", staticmethod(spy))
    ds = PackedLeRobotDataset(str(packed_copy), episode_pool_size=16)
    batch = [140, 3, 90, 120, 3, 0, 100, 50, 131, 2]  # episodes 8, 0, 6, 7, 0, 0, 7, 4, 7, 0
    starts = np.cumsum([0, *LENGTHS])
    touched = {int(np.searchsorted(starts, p, side="right") - 1) for p in batch}
    samples = ds.__getitems__(batch)
    assert [int(s["index"]) for s in samples] == batch  # in the order asked, duplicates kept
    stats = ds.stats()
    assert stats["episodes_admitted"] == len(touched) == 5  # one fetch per episode touched
    assert stats["decoder_misses"] == len(touched) * CAMERAS  # one decoder per member touched
    assert stats["frames_decoded"] == len(batch) * CAMERAS
    per_decoder: dict[int, list[int]] = {}
    for decoder, indices in decoded:
        per_decoder.setdefault(decoder, []).extend(indices)
    assert len(per_decoder) == len(touched) * CAMERAS
    assert all(frames == sorted(frames) for frames in per_decoder.values()), "a member was decoded backwards"
    # The same episodes again: nothing is fetched, no decoder opened.
    ds.__getitems__([121, 1, 51, 132])
    assert ds.stats()["episodes_admitted"] == 5 and ds.stats()["decoder_misses"] == len(touched) * CAMERAS


def test_open_decoders_stay_bounded_however_many_episodes_are_read(packed_copy):
    """LeRobot's decoder cache once kept every decoder a DataLoader worker opened (workers grew
    to tens of GB over a run). Here a process holds at most ``episode_pool_size`` episodes (and
    their decoders) between batches, and a batch touching more is read in runs that fit."""
    ds = PackedLeRobotDataset(str(packed_copy), episode_pool_size=2)
    order = list(range(len(ds)))
    random.Random(0).shuffle(order)
    peak = 0
    for start in range(0, len(order), 8):
        ds.__getitems__(order[start : start + 8])
        engine = ds._random_access()
        assert engine.cache.held <= 2 and engine.open_decoders() <= 2 * CAMERAS
        peak = max(peak, engine.cache.counters["max_held"])
    assert peak <= 2
    assert ds.stats()["episodes_admitted"] > len(LENGTHS)  # evicted episodes were read again
    # A byte bound alone: every episode is larger than 1 byte, so one is held at a time.
    small = PackedLeRobotDataset(str(packed_copy), open_bytes=1)
    small.__getitems__(order[:16])
    assert small._random_access().cache.counters["max_held"] == 1 and small._random_access().cache.held == 1


def _as_list(batch: list[dict]) -> list[dict]:
    return batch


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_give_the_training_process_items(packed_copy, context):
    delta = WINDOWS["past_and_future"]
    ds = PackedLeRobotDataset(str(packed_copy), delta_timestamps=delta, return_uint8=True, episodes=[0, 2, 7])
    order = list(range(len(ds)))
    random.Random(7).shuffle(order)
    expected = ds.__getitems__(order[:24])  # the parent has an engine (open decoders) before the workers start
    loader = torch.utils.data.DataLoader(
        ds, batch_size=6, sampler=order[:24], num_workers=2, multiprocessing_context=context, collate_fn=_as_list
    )
    got = [sample for batch in loader for sample in batch]
    assert len(got) == len(expected)
    for a, b in zip(expected, got):
        assert_same_sample(a, b, f"index {int(a['index'])}")
    state = pickle.loads(pickle.dumps(ds))  # nothing open crosses: the engine is made again where used
    assert state._engine is None and ds._engine is not None
    assert int(state[5]["index"]) == int(ds[5]["index"])


def test_image_transforms_apply_to_every_camera_as_lerobot_does(sample_source, packed_copy):
    def flip(frames: torch.Tensor) -> torch.Tensor:
        return frames.flip(-1)

    ds = PackedLeRobotDataset(str(packed_copy), image_transforms=flip, delta_timestamps=WINDOWS["past_and_future"])
    sample = ds[44]
    expected = reference_item(sample_source, 44, WINDOWS["past_and_future"])
    for key in ("observation.images.top", "observation.images.wrist"):
        expected[key] = flip(expected[key])
    assert_same_sample(expected, sample, "transformed")
    ds.clear_image_transforms()
    assert_same_sample(reference_item(sample_source, 44, WINDOWS["past_and_future"]), ds[44], "cleared")
    with pytest.raises(TypeError, match="callable"):
        ds.set_image_transforms(3)


def test_a_mixture_is_its_datasets_end_to_end(packed_copy, packed_h264):
    """Positions run over the datasets in mixture order; each item is its pack's own (with
    ``dataset_index``/``dataset_name``); ``meta.episodes`` are mixture positions."""
    mixture = PackedLeRobotDataset([str(packed_copy), str(packed_h264)], names=["copy", "h264"])
    copy, h264 = PackedLeRobotDataset(str(packed_copy)), PackedLeRobotDataset(str(packed_h264))
    assert len(mixture) == len(copy) + len(h264) and mixture.episodes is None and mixture.absolute_to_relative_idx is None
    for position in (0, 40, len(copy) - 1, len(copy), len(copy) + 100, len(mixture) - 1):
        dataset, local = (0, position) if position < len(copy) else (1, position - len(copy))
        sample = mixture[position]
        assert int(sample["dataset_index"]) == dataset and sample["dataset_name"] == ["copy", "h264"][dataset]
        own = (copy, h264)[dataset][local]
        assert_same_sample(own, {k: v for k, v in sample.items() if k in own}, f"mixture[{position}]")
    bounds = mixture.meta.episodes
    assert len(bounds) == 2 * len(LENGTHS) and bounds["dataset_to_index"][-1] == len(mixture)
    weights = mixture.sample_weights([3, 1])
    assert weights.shape == (len(mixture),)
    assert torch.isclose(weights[: len(copy)].sum() / weights.sum(), torch.tensor(0.75, dtype=weights.dtype))
    with pytest.raises(ArgumentError, match="selects episodes of one pack"):
        PackedLeRobotDataset([str(packed_copy)], episodes=[1])
    with pytest.raises(ArgumentError, match="one weight"):
        mixture.sample_weights([1])
