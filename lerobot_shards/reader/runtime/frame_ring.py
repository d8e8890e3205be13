"""Reusable shared-memory buffers for batches of frames, recycled only when nothing uses them.

Why: a DataLoader worker returns a batch through shared memory. Allocated fresh for every
batch (what ``default_collate`` does), a 16-sample batch of four 480x640 cameras is 59 MB of
new shared pages: the kernel zero-fills each on first touch in the worker and maps it again
in the training process. Measured on 2 cores that costs 64 ms per batch against 9 ms for
copying into a buffer already mapped, most of the 86 ms it takes to decode those 64 frames.

How: each worker keeps a ring of ``slots`` buffers (``FrameRing``). A batch's frames are
views into one slot; the batch carries a lease ``(worker, slot)``. In the training process
``RingReleaser`` keeps a reference to every slot storage it has received (so receiving it
again maps nothing new) and hands a slot back (a byte in ``SlotFlags``, shared memory made
before the workers start) only once no tensor in that process uses its storage any more: the
storage's reference count, not a promise about the user's code. A slot the user still holds
(a kept batch, a view of it) stays out of the ring; when no slot is free the worker allocates a
fresh buffer, as ``default_collate`` would. So reuse never overwrites anything alive.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Collection

import torch

from lerobot_shards.core.errors import ArgumentError

MAX_WORKERS = 255
MAX_SLOTS = 16
_FREE, _BUSY = 0, 1
_ALIGN = 64


class SlotFlags:
    """Busy/free byte per (worker, slot), in shared memory inherited by DataLoader workers.

    Created in the training process before the workers start (a ``RawArray`` can only be
    handed to a process at its creation). Each byte has one writer at a time: the worker
    sets it busy, the training process sets it free.
    """

    def __init__(self) -> None:
        self._flags = multiprocessing.RawArray("b", (MAX_WORKERS + 1) * MAX_SLOTS)
        # Per worker: buffers allocated, buffers reused (written by the worker, read here).
        self._counts = multiprocessing.RawArray("q", (MAX_WORKERS + 1) * 2)

    def count(self, worker: int, reused: bool) -> None:
        self._counts[worker * 2 + int(reused)] += 1

    def totals(self) -> dict[str, int]:
        """``frame_buffers_allocated``/``frame_buffers_reused`` over every worker so far."""
        counts = list(self._counts)
        return {"frame_buffers_allocated": sum(counts[0::2]), "frame_buffers_reused": sum(counts[1::2])}

    def _at(self, worker: int, slot: int) -> int:
        return worker * MAX_SLOTS + slot

    def is_free(self, worker: int, slot: int) -> bool:
        return self._flags[self._at(worker, slot)] == _FREE

    def set_busy(self, worker: int, slot: int) -> None:
        self._flags[self._at(worker, slot)] = _BUSY

    def release(self, worker: int, slot: int) -> None:
        self._flags[self._at(worker, slot)] = _FREE

    def reset(self, worker: int) -> None:
        """Mark all of a worker's slots free (a new worker process starts with new buffers)."""
        for slot in range(MAX_SLOTS):
            self.release(worker, slot)


class FrameRing:
    """One DataLoader worker's buffers (see the module docstring).

    Args:
        flags: the shared busy/free table.
        worker: this worker's id; ``None`` in the training process itself (no sharing:
            buffers are ordinary memory, reused once no tensor uses them, by their
            storage's use count, as the training process's ``RingReleaser`` decides for
            workers' buffers).
        slots: buffers in the ring, at most ``MAX_SLOTS``; the DataLoader holds up to
            ``prefetch_factor`` batches per worker and the trainer one more, so
            ``prefetch_factor + 2`` slots never run dry.
    """

    def __init__(self, flags: SlotFlags, worker: int | None, slots: int):
        if not 1 <= slots <= MAX_SLOTS:
            raise ArgumentError(f"slots must be in [1, {MAX_SLOTS}], got {slots}")
        self.flags, self.worker, self.slots = flags, worker, slots
        self._storages: list[torch.UntypedStorage | None] = [None] * slots
        self.fresh_allocations = 0  # in the training process itself (no table row)
        if worker is not None:
            if worker > MAX_WORKERS:
                self.worker = None  # beyond the table: fall back to fresh buffers
            else:
                flags.reset(worker)

    def acquire(self, nbytes: int) -> tuple[tuple[int, int] | None, torch.UntypedStorage]:
        """A storage of at least ``nbytes`` and its lease (``None`` for a fresh, unleased one)."""
        if self.worker is None:
            return None, self._local(nbytes)
        for slot in range(self.slots):
            if not self.flags.is_free(self.worker, slot):
                continue
            storage = self._storages[slot]
            if storage is not None and storage.nbytes() >= nbytes:
                reused = True
            else:
                reused, storage = False, torch.UntypedStorage._new_shared(nbytes)
                self._storages[slot] = storage
            self.flags.count(self.worker, reused)
            self.flags.set_busy(self.worker, slot)
            return (self.worker, slot), storage
        self.flags.count(self.worker, False)
        return None, torch.UntypedStorage._new_shared(nbytes)

    def scratch(self, nbytes: int) -> torch.UntypedStorage:
        """A fresh storage of ``nbytes`` a batch's other tensors share (shared memory in a
        worker, as ``default_collate`` would make each of them; freed with them)."""
        return torch.UntypedStorage._new_shared(nbytes) if self.worker is not None else torch.UntypedStorage(nbytes)

    def abandon(self, lease: tuple[int, int] | None) -> None:
        """Hand back a slot whose batch was never sent (a stream closed mid-batch): nothing else
        has seen it, so the worker frees it itself."""
        if lease is not None:
            self.flags.release(*lease)

    def _local(self, nbytes: int) -> torch.UntypedStorage:
        """In the training process: a slot's storage that nothing else uses, else a new one."""
        for slot, storage in enumerate(self._storages):
            if storage is None or (storage.nbytes() >= nbytes and torch._C._storage_Use_Count(storage._cdata) <= 1):
                if storage is None or storage.nbytes() < nbytes:
                    storage = self._storages[slot] = torch.UntypedStorage(nbytes)
                    self.fresh_allocations += 1
                return storage
        self.fresh_allocations += 1
        return torch.UntypedStorage(nbytes)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (in elements) of ``shape``: what ``set_`` uses when given none."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def views(
    storage: torch.UntypedStorage,
    layout: dict[str, tuple[tuple[int, ...], torch.dtype]],
    *,
    channels_last: Collection[str] | None = None,
) -> dict[str, torch.Tensor]:
    """Tensors of the given shapes and dtypes, one after another in ``storage``: frames
    (``(..., C, H, W)``; the keys in ``channels_last``, or every key of 3 or more dimensions
    when it is None) laid out channels-last in memory (``(..., H, W, C)``) and returned as a
    ``(..., C, H, W)`` view; the others contiguous.

    Why channels-last: decoders hand out frames as ``(C, H, W)`` views of ``(H, W, C)`` pixels.
    Copying them into a channels-first buffer is a transposing copy, 3-7x slower than a
    straight one (4.6 ms against 0.7 ms for 16 480x640 frames); it was a sixth of a worker's
    time. The values and shapes are ``default_collate``'s; only the strides differ, and
    ``to_device`` makes frames contiguous on the device.
    """
    out, offset = {}, 0
    for key, (shape, dtype) in layout.items():
        element = torch.empty((), dtype=dtype).element_size()
        size = torch.Size(shape).numel() * element
        if len(shape) >= 3 and (channels_last is None or key in channels_last):
            *lead, channels, height, width = shape
            physical_shape = (*lead, height, width, channels)
            physical = torch.empty(0, dtype=dtype).set_(
                storage, offset // element, physical_shape, _contiguous_strides(physical_shape)
            )
            dims = list(range(len(lead)))
            out[key] = physical.permute(*dims, len(lead) + 2, len(lead), len(lead) + 1)
        else:
            out[key] = torch.empty(0, dtype=dtype).set_(storage, offset // element, shape, _contiguous_strides(shape))
        offset += -(-size // _ALIGN) * _ALIGN
    return out


def layout_bytes(layout: dict[str, tuple[tuple[int, ...], torch.dtype]]) -> int:
    """Bytes ``views`` needs for ``layout``."""
    total = 0
    for shape, dtype in layout.values():
        total += -(-(torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()) // _ALIGN) * _ALIGN
    return max(total, _ALIGN)


class RingReleaser:
    """The training process's side: keeps received slot storages mapped, hands a slot back
    once no tensor uses it (its storage's use count is back to this object's own).

    Only a slot whose batch this process has received and not yet handed back is ever
    released: a slot that is busy again for a batch still on its way (the worker reused it
    after the last release) must not be freed on the strength of the previous batch.
    """

    def __init__(self, flags: SlotFlags):
        self.flags = flags
        self._held: dict[tuple[int, int], torch.UntypedStorage] = {}
        self._pending: set[tuple[int, int]] = set()
        self.released = 0

    def received(self, lease: tuple[int, int] | None, storage: torch.UntypedStorage | None) -> None:
        """Note a batch's lease; its storage stays referenced here for the next receipt."""
        if lease is not None and storage is not None:
            key = (int(lease[0]), int(lease[1]))
            self._held[key] = storage
            self._pending.add(key)

    def sweep(self) -> None:
        """Hand back every received slot that no tensor of this process uses any more."""
        for key in list(self._pending):
            # One use: the storage object held here (Python wrappers count, each once).
            if torch._C._storage_Use_Count(self._held[key]._cdata) <= 1:
                self._pending.discard(key)
                self.flags.release(*key)
                self.released += 1

    def clear(self) -> None:
        """Forget every slot (the workers that owned them are gone)."""
        self._held.clear()
        self._pending.clear()


__all__ = ["MAX_SLOTS", "FrameRing", "RingReleaser", "SlotFlags", "layout_bytes", "views"]
