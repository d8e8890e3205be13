"""BatchLoader (issue 13): batches built in the workers, frames in reused shared buffers.

Contracts: its batches are bit-for-bit the batches of a ``DataLoader`` with the same batch size
and workers (so resume states are interchangeable); a buffer is reused only when nothing in the
training process refers to it (kept batches and views are never overwritten); resume and
exactly-once hold through it; mixtures batch the same way; ``to_device`` gives LeRobot's float32
frames exactly."""

from __future__ import annotations

import pytest
import torch

from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset, to_device
from tests.packed_fixtures import *

TOTAL = 141
WINDOWS = {"action": [0.0, 1 / 30], "observation.images.top": [-1 / 30, 0.0]}
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


def _dataset(packed, **kwargs) -> PackedDataset:
    options = dict(seed=3, episode_pool_size=3, return_uint8=True, delta_timestamps=WINDOWS)
    options.update(kwargs)
    return PackedDataset(str(packed), **options)


def assert_same_batch(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        if isinstance(a[key], torch.Tensor):
            assert isinstance(b[key], torch.Tensor) and a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
            assert torch.equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("return_uint8", [True, False])
def test_batches_equal_the_dataloader_batches(packed_copy, num_workers, return_uint8):
    dataset = _dataset(packed_copy, return_uint8=return_uint8)
    reference = list(torch.utils.data.DataLoader(dataset, batch_size=5, num_workers=num_workers))
    loader = BatchLoader(dataset, batch_size=5, num_workers=num_workers)
    assert len(loader) == len(reference)
    count = 0
    for mine, theirs in zip(loader, reference):
        assert_same_batch(theirs, mine)
        count += 1
    assert count == len(reference) and loader.samples_consumed == TOTAL


def test_buffers_are_reused_only_when_nothing_refers_to_them(packed_copy):
    dataset = _dataset(packed_copy)
    reference = list(torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2))
    # Dropped batches: the workers recycle their buffers (counted, not timed).
    dropping = BatchLoader(dataset, batch_size=4, num_workers=2)
    for mine, theirs in zip(dropping, reference):
        assert_same_batch(theirs, mine)
    assert dropping.stats()["frame_buffers_reused"] > len(reference) // 2, dropping.stats()
    # Kept batches, and views of frames, are never overwritten: their buffers stay out of the ring.
    keeping = BatchLoader(dataset, batch_size=4, num_workers=2)
    kept = list(keeping)
    views = [batch["observation.images.wrist"][-1:] for batch in BatchLoader(dataset, batch_size=4, num_workers=2)]
    for mine, view, theirs in zip(kept, views, reference):
        assert_same_batch(theirs, mine)
        assert torch.equal(view, theirs["observation.images.wrist"][-1:])
    assert keeping.stats()["frame_buffers_reused"] == 0


def test_the_loader_counts_and_resumes(packed_copy):
    full = list(BatchLoader(_dataset(packed_copy), batch_size=6, num_workers=2))
    loader = BatchLoader(_dataset(packed_copy), batch_size=6, num_workers=2)
    for step, _ in enumerate(loader):
        if step == 4:
            state = loader.state_dict()
            break
    assert state["samples_consumed"] == 30 and state["phases"][0]["batch_size"] == 6
    resumed = BatchLoader(_dataset(packed_copy), batch_size=6, num_workers=2)
    resumed.load_state_dict(state)
    resumed.set_epoch(state["epoch"])  # a training loop's usual call keeps the loaded position
    assert len(resumed) == len(full) - 5 and resumed.samples_consumed == 30
    for mine, theirs in zip(resumed, full[5:]):
        assert_same_batch(theirs, mine)
    assert resumed.samples_consumed == TOTAL and resumed.state_dict()["samples_consumed"] == TOTAL
    # Another shape: the rest exactly once.
    other = BatchLoader(_dataset(packed_copy), batch_size=4, num_workers=3)
    other.load_state_dict(state)
    served = [i for batch in full[:5] for i in batch["index"].tolist()] + [i for b in other for i in b["index"].tolist()]
    assert sorted(served) == list(range(TOTAL))
    # A new epoch counts from zero: 141 anchors over 3 workers, 47 each, 12 batches of 4 each.
    other.set_epoch(1)
    assert other.samples_consumed == 0 and len(other) == 3 * 12


def test_mixture_batches_equal_the_dataloader_batches(packed_copy, packed_hevc):
    def mixture():
        return MixtureDataset([str(packed_copy), str(packed_hevc)], names=["copy", "hevc"], seed=2, return_uint8=True)

    reference = list(torch.utils.data.DataLoader(mixture(), batch_size=7, num_workers=2))
    loader = BatchLoader(mixture(), batch_size=7, num_workers=2)
    assert len(loader) == len(reference)
    for mine, theirs in zip(loader, reference):
        assert_same_batch(theirs, mine)
    assert loader.stats()["frame_buffers_reused"] > 0


def test_to_device_gives_lerobot_float_frames(packed_copy):
    as_float = list(torch.utils.data.DataLoader(_dataset(packed_copy, return_uint8=False), batch_size=8))
    as_uint8 = BatchLoader(_dataset(packed_copy), batch_size=8)
    for theirs, mine in zip(as_float, as_uint8):
        moved = to_device(mine, "cpu")
        assert_same_batch(theirs, moved)
        assert all(moved[k].is_contiguous() for k in ("observation.images.top", "observation.images.wrist"))


def test_frames_are_channels_last_in_memory_with_default_collate_values(packed_copy):
    """Decoders give (C, H, W) views of (H, W, C) pixels; the ring keeps that layout so the copy
    into it is a straight one. Shapes and values are default_collate's; strides are not."""
    reference = next(iter(torch.utils.data.DataLoader(_dataset(packed_copy), batch_size=5)))
    batch = next(iter(BatchLoader(_dataset(packed_copy), batch_size=5, num_workers=1)))
    frames = batch["observation.images.top"]  # (B, T, C, H, W)
    assert frames.shape == reference["observation.images.top"].shape
    assert frames.stride()[2] == 1 and frames.permute(0, 1, 3, 4, 2).is_contiguous()
    assert torch.equal(frames, reference["observation.images.top"])


def test_in_process_batches_kept_by_the_caller_are_never_overwritten(packed_copy):
    """num_workers=0 reuses the training process's own buffers by use count: a kept batch
    (all of them here) keeps its buffer and is never written again."""
    reference = list(torch.utils.data.DataLoader(_dataset(packed_copy), batch_size=4))
    loader = BatchLoader(_dataset(packed_copy), batch_size=4)
    kept = list(loader)
    assert len(kept) == len(reference)
    for theirs, mine in zip(reference, kept):
        assert_same_batch(theirs, mine)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_mixture_float_frames_take_the_ring_path_with_the_same_values(packed_copy, packed_hevc, num_workers, monkeypatch):
    """Float32 frames of a mixture are converted in the ring, as a pack's are (by capability,
    ``with_uint8_frames``, not by class), cameras one dataset lacks included: the same values
    as the sample path's float32 frames and zero fills."""
    from lerobot_shards.reader.runtime import batching

    def mixture():
        # Each dataset lacks a camera the other has: zero-filled and masked in the other's samples.
        return MixtureDataset(
            [str(packed_copy), str(packed_hevc)],
            names=["copy", "hevc"],
            seed=2,
            key_map={"copy": {"observation.images.top": "observation.images.top_copy"}},
        )

    reference = list(torch.utils.data.DataLoader(mixture(), batch_size=7, num_workers=num_workers))
    assert reference[0]["observation.images.top"].dtype == torch.float32
    conversions = []
    monkeypatch.setattr(batching, "scale_to_unit_", lambda t: conversions.append(t.shape) or t.div_(255.0))
    loader = BatchLoader(mixture(), batch_size=7, num_workers=num_workers)
    for mine, theirs in zip(loader, reference, strict=True):
        assert_same_batch(theirs, mine)
    if num_workers == 0:  # in this process: one in-ring conversion per camera per batch
        assert len(conversions) == 3 * len(reference)


def test_a_batch_crosses_as_two_storages_and_keeping_its_index_keeps_no_frames(packed_copy):
    """Issue 57: every tensor of a batch but the frames shares one storage (one file descriptor
    handed to the training process, not one per key), the frames another (the reused slot); a
    kept ``batch["index"]`` does not hold the frames' slot."""
    loader = BatchLoader(_dataset(packed_copy, delta_timestamps=None), batch_size=16, num_workers=1)
    kept, batches = [], 0
    for batch in loader:
        tensors = [v for v in batch.values() if isinstance(v, torch.Tensor)]
        storages = {t.untyped_storage().data_ptr() for t in tensors}
        frames = {batch[k].untyped_storage().data_ptr() for k in ("observation.images.top", "observation.images.wrist")}
        assert len(frames) == 1 and len(storages) == 2, sorted(k for k in batch if isinstance(batch[k], torch.Tensor))
        kept.append(batch["index"])  # a trainer logging indices keeps these, not the frames
        batches += 1
    stats = loader.stats()
    # Slots were handed back although every batch's index tensor is still held (the first
    # batch is built in this process, DESIGN_NOTES section 29: the worker's ring holds the rest).
    assert stats["frame_buffers_reused"] >= batches - 1 - stats["frame_buffers_allocated"] > 0
    # At most the ring's slots (prefetch_factor 2 + 3): were a kept index holding its batch's
    # frames, every one of the nine batches would need a slot of its own.
    assert stats["frame_buffers_allocated"] <= 5 < batches, stats
    assert sorted(int(i) for t in kept for i in t) == list(range(TOTAL))


def test_a_sample_is_copied_into_its_row_when_it_is_built(packed_copy):
    """Issue 57: the batch builder keeps no sample: each sample's decoded frames are freed before
    the next one is decoded (the allocator reuses their memory), counted by weak references."""
    import weakref

    from lerobot_shards.reader.runtime import FrameRing, SlotFlags, batches

    dataset = _dataset(packed_copy, delta_timestamps=None)
    alive: list[weakref.ref] = []
    most_alive = 0

    def watched():
        nonlocal most_alive
        for sample in dataset:
            most_alive = max(most_alive, sum(r() is not None for r in alive))
            alive.append(weakref.ref(sample["observation.images.top"]))
            yield sample

    keys = ["observation.images.top", "observation.images.wrist"]
    got = list(batches(watched(), batch_size=16, drop_last=False, frame_keys=keys, ring=FrameRing(SlotFlags(), None, 4)))
    assert sum(len(b["index"]) for b in got) == TOTAL
    assert most_alive <= 1, most_alive  # at most the sample just handed over, never a batch of them


class _CountCopies(torch.overrides.TorchFunctionMode):
    """Counts the tensor copies made from Python while active: ``clone``, ``copy_``, ``stack``."""

    def __init__(self):
        super().__init__()
        self.calls = {"clone": 0, "copy_": 0, "stack": 0}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.calls:
            self.calls[name] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("windows", [None, WINDOWS], ids=["single", "windows"])
def test_a_batch_copies_each_frame_once_and_gathers_each_row_key_once(packed_copy, windows):
    """Issue 57: building a batch copies each sample's frames into their row once, and gathers
    each tabular key with one stack per batch: no per-sample clone or copy of a row's values (a
    clone and a copy per key per sample were half the time outside decode on one camera). The
    per-sample path still gives each sample rows that own their memory (they cross to the
    training process alone)."""
    dataset = _dataset(packed_copy, delta_timestamps=windows)
    cameras = ("observation.images.top", "observation.images.wrist")
    loader = iter(BatchLoader(dataset, batch_size=16, num_workers=0))
    next(loader)  # the first batch opens decoders and allocates the slot
    with _CountCopies() as counted:
        batch = next(loader)
    rows = [k for k, v in batch.items() if isinstance(v, torch.Tensor) and k not in cameras]
    assert len(rows) >= 7, rows  # the row's columns, and with windows each key's is_pad
    assert counted.calls == {"clone": 0, "copy_": 16 * len(cameras), "stack": len(rows)}, counted.calls

    sample = next(iter(_dataset(packed_copy, delta_timestamps=windows)))
    for key, value in sample.items():
        if isinstance(value, torch.Tensor) and key not in cameras:
            assert value.untyped_storage().nbytes() == value.numel() * value.element_size(), key


def test_workers_building_ahead_give_the_same_batches_frames_and_errors(packed_copy, tmp_path):
    """Issue 57: a worker builds its next samples on a thread of its own (``build_ahead``, on
    by default) while it fills the batch. The batches, the frames decoded and where an error
    comes are those of a worker on one thread."""
    import random
    import shutil

    from lerobot_shards.core.format import video_column
    from tests.pack_tamper import replace_member
    from tests.packed_fixtures import episodes_index

    def run(packed, ahead: int):
        dataset = _dataset(packed)
        got: list[dict] = []
        try:
            for batch in BatchLoader(dataset, batch_size=5, num_workers=1, build_ahead=ahead):
                got.append(batch)
        except Exception as error:  # the DataLoader re-raises the worker's error in this process
            return got, dataset.stats()["frames_decoded"], (type(error).__name__, str(error).strip().splitlines()[-1])
        return got, dataset.stats()["frames_decoded"], None

    one, ahead = run(packed_copy, 0), run(packed_copy, 2)
    assert len(one[0]) == len(ahead[0]) == -(-TOTAL // 5)
    for a, b in zip(one[0], ahead[0]):
        assert_same_batch(a, b)
    assert one[1] == ahead[1] == TOTAL * 3  # a window of two frames on one camera, one on the other
    assert one[2] is None and ahead[2] is None

    damaged = tmp_path / "damaged"
    shutil.copytree(packed_copy, damaged)
    camera = "observation.images.wrist"
    episode = next(r for r in episodes_index(damaged) if r["episode_index"] == 4)
    replace_member(damaged, 4, camera, random.Random(4).randbytes(episode[video_column(camera, "size")]))
    one, ahead = run(damaged, 0), run(damaged, 2)
    assert one[2] is not None and "episode 4" in one[2][1], one[2]
    assert ahead[2] == one[2]
    assert 0 < len(one[0]) == len(ahead[0])  # the error came after the same batches
    for a, b in zip(one[0], ahead[0]):
        assert_same_batch(a, b)


@pytest.mark.parametrize("options", [{"batch_size": 0}, {"num_workers": -1}, {"build_ahead": -1}])
def test_a_loader_refuses_negative_counts_by_name(packed_copy, options):
    from lerobot_shards.core.errors import ArgumentError

    arguments = {"batch_size": 4, **options}
    with pytest.raises(ArgumentError, match=r"batch_size must be >= 1, num_workers and build_ahead >= 0, got"):
        BatchLoader(_dataset(packed_copy), **arguments)
