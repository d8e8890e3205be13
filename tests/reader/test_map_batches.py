"""BatchLoader over a map-style ``PackedLeRobotDataset`` in a sampler's order (issue 66).

Contracts: its batches are bit for bit those of ``DataLoader(ds, sampler=S, batch_size=B)``
(the same samples, in the sampler's order, on any number of workers, ``drop_last`` both ways,
a ``Subset`` too); the frames travel in the workers' reused ring slots (counted); a resume
state continues the same order exactly, on another number of workers or batch size; misuse is
refused by name before any worker starts.
"""

from __future__ import annotations

import random

import pytest
import torch

from lerobot_shards import BatchLoader, PackedDataset, PackedLeRobotDataset
from lerobot_shards.core.errors import ArgumentError
from tests.packed_fixtures import *
from tests.reader.test_batch_loader import assert_same_batch

WINDOWS = {"action": [0.0, 1 / 30], "observation.images.top": [-1 / 30, 0.0]}
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create")


def _dataset(packed, **kwargs) -> PackedLeRobotDataset:
    return PackedLeRobotDataset(str(packed), delta_timestamps=WINDOWS, **{"return_uint8": True, **kwargs})


def _order(n: int, seed: int = 5) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_equal_a_dataloader_over_the_same_sampler(packed_copy, num_workers, drop_last):
    ds = _dataset(packed_copy)
    sampler = _order(len(ds))[:47]  # 47 = 6 batches of 7 and 5 left over
    reference = list(torch.utils.data.DataLoader(ds, batch_size=7, sampler=sampler, drop_last=drop_last))
    loader = BatchLoader(ds, batch_size=7, sampler=sampler, num_workers=num_workers, drop_last=drop_last)
    assert len(loader) == len(reference) == (6 if drop_last else 7)
    got = list(loader)
    assert len(got) == len(reference)
    for mine, theirs in zip(got, reference):
        assert_same_batch(theirs, mine)
    assert loader.samples_consumed == (42 if drop_last else 47)


def test_frames_travel_in_reused_ring_slots(packed_copy):
    """What the loader is for: a worker's batches reuse its shared-memory slots instead of fresh
    shared memory per batch (default_collate's), counted."""
    ds = _dataset(packed_copy)
    loader = BatchLoader(ds, batch_size=4, shuffle=True, seed=1, num_workers=2)
    batches = 0
    for batch in loader:
        assert batch["observation.images.top"].dtype == torch.uint8
        batches += 1
    stats = loader.stats()
    assert batches == len(loader) == -(-len(ds) // 4)
    assert stats["frame_buffers_allocated"] + stats["frame_buffers_reused"] == batches
    assert stats["frame_buffers_allocated"] <= 2 * 5 and stats["frame_buffers_reused"] >= batches - 10, stats


def test_shuffle_is_seeded_per_epoch_and_a_subset_reads_through(packed_copy):
    ds = _dataset(packed_copy)
    loader = BatchLoader(ds, batch_size=16, shuffle=True, seed=3)
    first = torch.cat([b["index"] for b in loader])
    again = torch.cat([b["index"] for b in BatchLoader(ds, batch_size=16, shuffle=True, seed=3)])
    assert torch.equal(first, again) and sorted(first.tolist()) == list(range(len(ds)))
    loader.set_epoch(1)
    second = torch.cat([b["index"] for b in loader])
    assert not torch.equal(first, second) and sorted(second.tolist()) == list(range(len(ds)))
    subset = torch.utils.data.Subset(ds, list(range(10, 30)))
    reference = list(torch.utils.data.DataLoader(subset, batch_size=6))
    for mine, theirs in zip(BatchLoader(subset, batch_size=6, num_workers=1), reference, strict=True):
        assert_same_batch(theirs, mine)


@pytest.mark.parametrize(("workers", "batch_size"), [(2, 6), (1, 4)])
def test_a_resume_continues_the_same_order(packed_copy, workers, batch_size):
    """Stopped after 3 batches of 6 on 2 workers, resumed on ``workers`` with ``batch_size``:
    the samples delivered, end to end, are the uninterrupted epoch's."""
    ds = _dataset(packed_copy)
    whole = torch.cat([b["index"] for b in BatchLoader(ds, batch_size=6, shuffle=True, seed=9, num_workers=2)])
    first = BatchLoader(ds, batch_size=6, shuffle=True, seed=9, num_workers=2)
    first.set_epoch(0)
    taken = []
    for batch in first:
        taken.append(batch["index"])
        if len(taken) == 3:
            break
    state = first.state_dict()
    assert state == {"epoch": 0, "samples_consumed": 18, "order": "sampler"}
    resumed = BatchLoader(ds, batch_size=batch_size, shuffle=True, seed=9, num_workers=workers)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)
    assert len(resumed) == -(-(len(ds) - 18) // batch_size)
    rest = [b["index"] for b in resumed]
    assert torch.equal(torch.cat(taken + rest), whole)


def test_misuse_is_refused_by_name(packed_copy):
    ds = _dataset(packed_copy)
    with pytest.raises(ArgumentError, match="sampler and shuffle=True are exclusive"):
        BatchLoader(ds, batch_size=4, sampler=[0, 1], shuffle=True)
    with pytest.raises(ArgumentError, match=r"the sampler gave index 100000; the dataset has \d+ samples"):
        next(iter(BatchLoader(ds, batch_size=4, sampler=[0, 100000], num_workers=2)))
    stream = PackedDataset(str(packed_copy), return_uint8=True)
    with pytest.raises(ArgumentError, match="streams in its own order: shuffle it with shuffle=True on the dataset"):
        BatchLoader(stream, batch_size=4, sampler=[0, 1])
    streaming_state = BatchLoader(stream, batch_size=4).state_dict()
    with pytest.raises(ArgumentError, match="a position in a streaming dataset; this loader reads PackedLeRobotDataset"):
        BatchLoader(ds, batch_size=4).load_state_dict(streaming_state)
    with pytest.raises(ArgumentError, match=r"a position in a sampler's order \(a map-style dataset\)"):
        BatchLoader(stream, batch_size=4).load_state_dict(BatchLoader(ds, batch_size=4).state_dict())


def test_the_readme_snippet_runs_as_written(packed_copy):
    """README's "Random access, as LeRobotDataset" block, on a pack of the suite's 30 fps source."""
    from tests.cli.test_new_user import _readme_block

    code = _readme_block("### Random access, as `LeRobotDataset`", "python").replace("/tmp/packed", str(packed_copy))
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    loader = namespace["loader"]
    assert isinstance(loader, BatchLoader) and namespace["state"] == {"epoch": 0, "samples_consumed": 0, "order": "sampler"}
    batch = next(iter(loader))
    assert batch["action"].shape[:2] == (32, 3) and batch["observation.images.top"].dtype == torch.uint8


class _UnsizedRandomSampler:
    """A sampler without ``__len__`` drawing from its own generator: each pass another order."""

    def __init__(self, n: int, count: int):
        self.n, self.count, self.passes = n, count, 0
        self.draws = random.Random(3)

    def __iter__(self):
        self.passes += 1
        return iter([self.draws.randrange(self.n) for _ in range(self.count)])


def test_counting_an_unsized_sampler_draws_it_once_and_iterates_what_it_counted(packed_copy):
    ds = _dataset(packed_copy)
    sampler = _UnsizedRandomSampler(len(ds), 23)
    loader = BatchLoader(ds, batch_size=5, sampler=sampler, num_workers=0)
    assert len(loader) == 5 and sampler.passes == 1  # drawn once, to count it
    got = [int(i) for batch in loader for i in batch["index"]]
    assert sampler.passes == 1  # the epoch iterated the order it counted, not a second draw
    counted = random.Random(3)
    assert got == [int(ds[counted.randrange(len(ds))]["index"]) for _ in range(23)]
    got_again = [int(i) for batch in loader for i in batch["index"]]
    assert sampler.passes == 2 and got_again != got  # a new pass draws anew, as a DataLoader does
