"""Sample parity with LeRobot (issue 4, contract 1), checked against the independent oracle
in tests/lerobot_reference.py (itself checked against lerobot 0.6.1 by `make parity`)."""

from __future__ import annotations

import pytest
import torch

from lerobot_shards import PackedDataset
from lerobot_shards.testing import read_identity
from tests.lerobot_reference import reference_item
from tests.packed_fixtures import *

WINDOWS = {
    "past_and_future": {
        "action": [-0.1, 0.0, 0.1, 0.2],
        "observation.images.top": [-1 / 30, 0.0, 1 / 30],
        "observation.images.wrist": [0.0, 2 / 30],
    },
    # Wider than any episode, and beyond LeRobot streaming's +-100 frame limit.
    "wide": {"observation.state": [i / 30 for i in range(-150, 151, 30)], "observation.images.wrist": [-5.0, 5.0]},
    # One-element windows: tabular keeps T=1, video is squeezed.
    "single": {"next.reward": [0.0], "observation.images.top": [0.0]},
}


def assert_same_sample(expected: dict, actual: dict, where: str) -> None:
    assert set(expected) == set(actual), f"{where}: keys {set(expected) ^ set(actual)}"
    for key, value in expected.items():
        if isinstance(value, str):
            assert actual[key] == value, f"{where}: {key}"
            continue
        other = actual[key]
        assert other.dtype == value.dtype and other.shape == value.shape, (
            f"{where}: {key} {other.dtype}{tuple(other.shape)} != {value.dtype}{tuple(value.shape)}"
        )
        assert torch.equal(other, value), f"{where}: {key} values differ"


@pytest.mark.parametrize("window", [None, *WINDOWS], ids=lambda w: w or "no-window")
def test_every_anchor_equals_lerobot(sample_source, packed_copy, window):
    delta = WINDOWS.get(window) if window else None
    dataset = PackedDataset(str(packed_copy), delta_timestamps=delta, shuffle=False)
    samples = list(dataset)
    assert sorted(int(s["index"]) for s in samples) == list(range(141))
    for sample in samples:
        assert_same_sample(reference_item(sample_source, int(sample["index"]), delta), sample, f"index {int(sample['index'])}")


def test_one_element_windows_shape_like_lerobot(packed_copy):
    sample = next(iter(PackedDataset(str(packed_copy), delta_timestamps=WINDOWS["single"], shuffle=False)))
    assert sample["next.reward"].shape == (1,)
    assert sample["observation.images.top"].shape == (3, 48, 64)
    assert sample["observation.images.top_is_pad"].shape == (1,)


def test_episode_subset_and_uint8(sample_source, packed_copy):
    delta = WINDOWS["past_and_future"]
    dataset = PackedDataset(str(packed_copy), episodes=[1, 3, 7], delta_timestamps=delta, return_uint8=True, seed=5)
    samples = list(dataset)
    assert sorted({int(s["episode_index"]) for s in samples}) == [1, 3, 7]
    assert len(samples) == 1 + 2 + 40
    for sample in samples:
        assert sample["observation.images.top"].dtype == torch.uint8
        assert_same_sample(reference_item(sample_source, int(sample["index"]), delta, return_uint8=True), sample, "subset")
    with pytest.raises(ValueError, match=r"episodes \[42\] are not in"):
        PackedDataset(str(packed_copy), episodes=[1, 42])


def test_where_filters_anchors_with_sql(packed_copy):
    dataset = PackedDataset(str(packed_copy), where="chunk_action_pad_after = 0", shuffle=False)
    indices = sorted(int(s["index"]) for s in dataset)
    lengths = [12, 1, 30, 2, 17, 25, 9, 40, 5]
    assert len(indices) == sum(max(n - 7, 0) for n in lengths) == dataset.num_anchors
    with pytest.raises(ValueError, match="not a valid predicate"):
        PackedDataset(str(packed_copy), where="no_such_column = 1")


@pytest.mark.parametrize("fixture", ["packed_hevc", "packed_h264"])
def test_reencoded_packs_decode_the_right_frames(request, fixture):
    packed = request.getfixturevalue(fixture)
    delta = {"observation.images.top": [-2 / 30, 0.0, 2 / 30]}
    for sample in PackedDataset(str(packed), delta_timestamps=delta, shuffle=False):
        episode, frame = int(sample["episode_index"]), int(sample["frame_index"])
        top = sample["observation.images.top"]
        length = {0: 12, 1: 1, 2: 30, 3: 2, 4: 17, 5: 25, 6: 9, 7: 40, 8: 5}[episode]
        expected = [min(max(frame + o, 0), length - 1) for o in (-2, 0, 2)]
        assert [read_identity(f.numpy()) for f in top] == [(episode, f) for f in expected]


def test_image_transforms_apply_to_cameras(packed_copy):
    dataset = PackedDataset(str(packed_copy), image_transforms=lambda x: x * 0 + 7, shuffle=False)
    sample = next(iter(dataset))
    assert torch.all(sample["observation.images.top"] == 7) and torch.all(sample["observation.images.wrist"] == 7)


def test_pyav_fallback_decodes_the_same_frames(packed_copy):
    """PyAV is the fallback decoder; its RGB conversion may differ slightly from torchcodec's."""
    ours = PackedDataset(str(packed_copy), decoder="pyav", shuffle=False, return_uint8=True)
    assert ours.decoder_backend == "pyav"
    for sample in ours:
        assert read_identity(sample["observation.images.wrist"].numpy()) == (
            int(sample["episode_index"]),
            int(sample["frame_index"]),
        )
