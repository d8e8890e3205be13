"""The PyAV fallback is not a trap (issue 44): it keeps a member's container and decoder open for
the member's whole admission (as torchcodec's decoder is), decodes on from where it stopped
instead of seeking when that is cheaper, and gives torchcodec's frames in any order of access.
Counted (opens, seeks, decodes), never timed."""

from __future__ import annotations

import random

import pytest
import torch

from lerobot_shards import PackedDataset
from lerobot_shards.reader.decode.backends import pyav as pyav_backend
from tests.packed_fixtures import *
from tests.packed_fixtures import member_bytes

CAMERAS = ("observation.images.top", "observation.images.wrist")
WINDOW = {"observation.images.top": [-2 / 30, -1 / 30, 0.0], "observation.images.wrist": [-1 / 30, 0.0]}


@pytest.fixture
def counted(monkeypatch):
    """Counts of containers FFmpeg opened (``av.open``) and seeks made, in this process."""
    import av

    counts = {"opens": 0, "seeks": 0}
    open_container, seek = av.open, pyav_backend.PyAVDecoder._seek_to

    def opening(*args, **kwargs):
        counts["opens"] += 1
        return open_container(*args, **kwargs)

    def seeking(self, position):
        counts["seeks"] += 1
        return seek(self, position)

    monkeypatch.setattr(av, "open", opening)
    monkeypatch.setattr(pyav_backend.PyAVDecoder, "_seek_to", seeking)
    return counts


def test_the_pyav_path_opens_a_member_once_per_admission(packed_copy, counted):
    dataset = PackedDataset(
        str(packed_copy), decoder="pyav", seed=5, episode_pool_size=3, return_uint8=True, delta_timestamps=WINDOW
    )
    samples = sum(1 for _ in dataset)
    stats = dataset.stats()
    members = stats["episodes_admitted"] * len(CAMERAS)
    # Was: a container and a codec context per sample per camera (samples x cameras opens).
    assert counted["opens"] == members == stats["decoder_misses"]
    assert samples >= 5 * stats["episodes_admitted"]


def test_frames_asked_in_order_decode_on_without_seeking(packed_copy, counted):
    """A pass in index order seeks once per member (to its first frame); sliding windows reuse
    the frames the previous call converted."""
    dataset = PackedDataset(str(packed_copy), decoder="pyav", shuffle=False, return_uint8=True, delta_timestamps=WINDOW)
    samples = sum(1 for _ in dataset)
    assert counted["seeks"] == counted["opens"] == 9 * len(CAMERAS)  # 9 episodes
    assert samples * len(CAMERAS) > 10 * counted["seeks"]  # was: a seek (and an open) per frame


@pytest.mark.parametrize("packed", ["packed_copy", "packed_hevc", "packed_h264"])
def test_pyav_gives_torchcodec_frames_in_any_order(packed, request):
    """Bit-exact with torchcodec on AV1 (LeRobot's default), hevc and h264, frames asked in a
    random order with repeats and jumps back, on one decoder kept open throughout."""
    from lerobot_shards.reader.decode.backends import TorchCodecDecoder
    from tests.packed_fixtures import episodes_index

    root = request.getfixturevalue(packed)
    rng = random.Random(7)
    for row in episodes_index(root)[:4]:
        for camera in CAMERAS:
            data = member_bytes(root, row, camera)
            frames = row["length"]
            reference = TorchCodecDecoder(data, None).frames(list(range(frames)))
            decoder = pyav_backend.PyAVDecoder(data, None)
            asks = [sorted(rng.sample(range(frames), min(frames, rng.randint(1, 3)))) for _ in range(3 * frames)]
            for indices in asks:
                assert torch.equal(decoder.frames(indices), reference[indices]), (packed, row["episode_index"], indices)
            decoder.close()


def test_a_decoder_that_cannot_continue_seeks_and_stays_exact(packed_h264, counted):
    """Jumps backwards and past keyframes seek (to the keyframe at or before the frame); steps
    forward within reach decode on."""
    from lerobot_shards.reader.decode.backends import TorchCodecDecoder
    from tests.packed_fixtures import episodes_index

    row = max(episodes_index(packed_h264), key=lambda r: r["length"])
    data = member_bytes(packed_h264, row, CAMERAS[0])
    reference = TorchCodecDecoder(data, None).frames(list(range(row["length"])))
    decoder = pyav_backend.PyAVDecoder(data, None)
    last = row["length"] - 1
    plan = [[0], [1], [2], [last], [0], [last - 1], [last]]
    seeks = []
    for indices in plan:
        before = counted["seeks"]
        assert torch.equal(decoder.frames(indices), reference[indices])
        seeks.append(counted["seeks"] - before)
    # First frame: a seek; 1 and 2 decode on; a jump to the end, back to 0 and back to the end seek;
    # last - 1 after 0 seeks (a keyframe lies between); [last] after [last - 1] decodes on.
    assert seeks == [1, 0, 0, 1, 1, 1, 0], seeks


def test_falling_back_to_pyav_is_said_once_with_the_rate(monkeypatch):
    """``decoder="auto"`` without torchcodec decodes with PyAV and says so once per process: why
    torchcodec did not import, and what PyAV gives instead."""
    from lerobot_shards import DecoderFallbackWarning
    from lerobot_shards.reader.decode import backends, frames

    monkeypatch.setattr(backends.TorchCodecBackend, "unavailable", classmethod(lambda cls: "torchcodec: no FFmpeg here"))
    monkeypatch.setattr(frames, "_FALLBACK_SAID", False)
    with pytest.warns(DecoderFallbackWarning, match=r"decoding with pyav: torchcodec: no FFmpeg here\. .* 0\.86x of torchcodec"):
        assert frames.CpuDecoders("auto").backend == "pyav"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert frames.CpuDecoders("auto").backend == "pyav"  # said once
        assert frames.CpuDecoders("pyav").backend == "pyav"  # asked for: nothing to say
