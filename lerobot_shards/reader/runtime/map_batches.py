"""Batches of a map-style dataset in a sampler's order, built whole in the workers.

``DataLoader(ds, sampler=..., batch_size=B, num_workers=W)`` over a map-style dataset sends
batch ``b`` of the sampler's order to worker ``b % W`` and collates it there into fresh shared
memory. For 480x640 frames that fresh memory costs more than the copy (the kernel zero-fills
every new page in the worker and maps it again in the trainer: ``frame_ring``'s module says
how much); measured with ``PackedLeRobotDataset`` under a ``DataLoader`` on 2 cores, a random
batch spent as long moving its frames as decoding them (docs/BENCHMARKS.md, issue 66).

``MapBatches`` is what ``BatchLoader`` runs instead: the same batches, in the same order, each
read with the dataset's ``__getitems__`` (one read per episode touched, frames decoded in
order) and copied into the worker's ring of reused shared-memory slots. The order is the
sampler's, drawn once per epoch in the training process (``SamplerOrder``) and handed to the
workers with the dataset; worker ``w`` of ``W`` builds batches ``w, w + W, ...`` of it, which
is the DataLoader's own assignment, so the batches arrive in the sampler's order.

Resume is a position in that order (samples consumed): the workers start there, cut into
batches of the loader's size, on any number of workers. It is exact when the sampler gives the
same order again for the epoch: ``shuffle=True`` here (a permutation seeded by ``seed`` and the
epoch), ``torch.utils.data.SequentialSampler``, or a sampler with ``set_epoch`` and a seed
(``DistributedSampler``). A sampler drawing from the global random state (LeRobot's
``EpisodeAwareSampler(shuffle=True)``) gives another order on resume, as ``lerobot-train``
does on a ``LeRobotDataset``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.reader.runtime.batching import batches
from lerobot_shards.reader.runtime.frame_ring import FrameRing, SlotFlags


def is_map_style(dataset: Any) -> bool:
    """Whether ``dataset`` is read by index (``ds[i]``, ``len``), not streamed."""
    return (
        not isinstance(dataset, torch.utils.data.IterableDataset)
        and hasattr(dataset, "__getitem__")
        and hasattr(dataset, "__len__")
    )


class SamplerOrder:
    """One epoch's order of a map-style dataset: its sampler's indices (see the module).

    Args:
        length: ``len(dataset)``.
        sampler: indices to read, in order (a ``torch.utils.data.Sampler`` or any sized
            iterable of ints); None with ``shuffle``: a seeded permutation; None without: 0..n-1.
        shuffle: a permutation of ``range(length)`` seeded by ``seed`` and the epoch.
        seed: the permutation's seed.

    Raises:
        ArgumentError: both ``sampler`` and ``shuffle``.
    """

    def __init__(self, length: int, *, sampler: Iterable[int] | None, shuffle: bool, seed: int):
        if sampler is not None and shuffle:
            raise ArgumentError("sampler and shuffle=True are exclusive (as DataLoader's): the sampler chooses the order")
        self.length, self.sampler, self.shuffle, self.seed = length, sampler, shuffle, seed
        self.epoch = 0
        # The order ``size`` drew to count an unsized sampler: the epoch's next ``draw`` is it.
        self._counted: tuple[int, np.ndarray] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch (passed on to a sampler that has ``set_epoch``)."""
        self.epoch = int(epoch)
        self._counted = None
        set_epoch = getattr(self.sampler, "set_epoch", None)
        if set_epoch is not None:
            set_epoch(self.epoch)

    def draw(self) -> np.ndarray:
        """This epoch's indices, in order (the ones ``size`` drew to count them, if it did).

        Raises:
            ArgumentError: an index outside ``[0, length)`` (what the dataset would raise on,
                said before any worker starts).
        """
        counted, self._counted = self._counted, None
        if counted is not None and counted[0] == self.epoch:
            return counted[1]
        if self.sampler is None and not self.shuffle:
            return np.arange(self.length, dtype=np.int64)
        if self.sampler is None:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
            return torch.randperm(self.length, generator=generator).numpy().astype(np.int64)
        order = np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        if len(order) and (order.min() < 0 or order.max() >= self.length):
            bad = int(order[(order < 0) | (order >= self.length)][0])
            raise ArgumentError(f"the sampler gave index {bad}; the dataset has {self.length} samples")
        return order

    def size(self) -> int:
        """Indices per epoch, without drawing them when the sampler knows its length. A sampler
        without ``__len__`` is drawn to count it, once: the epoch then iterates that order, so
        counting neither consumes a random sampler's draw nor gives a count of another order."""
        if self.sampler is None:
            return self.length
        try:
            return len(self.sampler)  # type: ignore[arg-type]
        except TypeError:
            order = self.draw()
            self._counted = (self.epoch, order)
            return len(order)


def batch_count(samples: int, batch_size: int, drop_last: bool) -> int:
    """Batches of ``batch_size`` over ``samples`` (the last one short unless ``drop_last``)."""
    full, rest = divmod(max(0, samples), batch_size)
    return full + (0 if drop_last else int(rest > 0))


def read_batch(dataset: Any, indices: Sequence[int]) -> list[dict]:
    """The samples at ``indices``: one ``__getitems__`` call where the dataset has it (what a
    DataLoader calls), else one ``ds[i]`` each."""
    many = getattr(dataset, "__getitems__", None)
    if many is not None:
        return list(many(list(indices)))
    return [dataset[i] for i in indices]


class MapBatches(torch.utils.data.IterableDataset):
    """What ``BatchLoader``'s workers run for a map-style dataset (see the module).

    ``order`` and ``start`` are set by the loader before each iteration starts its workers.
    """

    def __init__(
        self, dataset: Any, *, batch_size: int, drop_last: bool, flags: SlotFlags, slots: int, frame_keys: Sequence[str]
    ):
        super().__init__()
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.flags, self.slots, self.frame_keys = flags, slots, list(frame_keys)
        self.order = np.zeros(0, dtype=np.int64)
        self.start = 0

    def __iter__(self) -> Iterator[dict]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (int(info.id), int(info.num_workers)) if info is not None else (0, 1)
        ring = FrameRing(self.flags, worker if info is not None else None, self.slots)
        return batches(
            self._samples(worker, workers), batch_size=self.batch_size, drop_last=False, frame_keys=self.frame_keys, ring=ring
        )

    def _samples(self, worker: int, workers: int) -> Iterator[dict]:
        """This worker's batches' samples, a batch at a time (each cut at ``batch_size``, so
        ``batches`` groups them as they were read)."""
        rest = self.order[self.start :]
        count = batch_count(len(rest), self.batch_size, self.drop_last)
        for batch in range(worker, count, workers):
            yield from read_batch(self.dataset, rest[batch * self.batch_size : (batch + 1) * self.batch_size].tolist())


__all__ = ["MapBatches", "SamplerOrder", "batch_count", "is_map_style", "read_batch"]
