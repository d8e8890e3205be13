"""Whole batches built inside a consumer: ``default_collate``'s result, with every tensor of a
batch in one reusable shared-memory slot (``lerobot_shards.reader.runtime.frame_ring``), frames
laid out channels-last in memory.

A batch is filled as its samples come: each sample's frames are copied into their row the
moment it is built, so its decoded frames are freed before the next decode (the allocator hands
the next frame the same, warm, memory); its other tensors (a row's few values, views of the
episode's columns when the loader asks the dataset for them) are gathered per key when the batch
is finished, one stack per key instead of a clone and a copy per key per sample. A batch crosses
to the training process as two storages (two file descriptors), whatever its keys: the frames'
slot, reused, and one fresh storage for every other tensor, instead of one per key (issue 57:
eight per batch of a one-camera dataset, each a handshake with the worker's resource-sharer
thread). The other tensors stay out of the
slot so that a trainer keeping ``batch["index"]`` does not keep a batch of frames alive with it.

A batch is exactly ``torch.utils.data.default_collate`` of its samples (tensors stacked along
a new first axis, strings as lists); only where the frame tensors live differs. The samples of
a batch are consecutive draws of one consumer, ``batch_size`` of them (the last batch of a
consumer's stream may be shorter, or is dropped with ``drop_last``), which is how a DataLoader
with ``batch_size`` batches an IterableDataset: the order of batches, and so resume, is the
same as the per-sample path's.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Sequence

import torch
from torch.utils.data import default_collate

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.format.features import LANGUAGE_COLUMNS
from lerobot_shards.reader.decode.unit_float import scale_to_unit_, to_unit_float
from lerobot_shards.reader.decode.wire import ENCODED_KEY, collate as collate_encoded
from lerobot_shards.reader.runtime.frame_ring import FrameRing, layout_bytes, views

LEASE_KEY = "__frame_lease__"
"""Batch key holding ``[worker, slot]`` of the ring slot its frames live in (``None`` if none);
``lerobot_shards.reader.loader.BatchLoader`` removes it before the batch reaches the user."""


def collate_batch(samples: list[dict], *, frame_keys: Sequence[str], ring: FrameRing | None, float_frames: bool = False) -> dict:
    """``default_collate(samples)`` with every tensor copied into one ring slot (same values and
    shapes; the frames under ``frame_keys`` with channels-last strides).

    With ``float_frames``, uint8 frames land in the slot as float32 in [0, 1]: converted
    during the copy and divided by 255 in place, the same float32 operations, so the same
    bits, as the sample path's ``frames.to(float32).div_(255)``.

    The batch carries ``LEASE_KEY``. Samples that carry encoded video (``decode_device``) are
    collated by ``lerobot_shards.reader.decode.stage.collate`` instead (members deduplicated, nothing decoded).
    LeRobot's language columns stay a list of each sample's value (LeRobot's own collate keeps
    them out of ``default_collate`` too).
    """
    languages = [k for k in LANGUAGE_COLUMNS if k in samples[0]]
    if languages:  # lists of messages, one per sample (default_collate would transpose them)
        kept = {k: [s[k] for s in samples] for k in languages}
        batch = collate_batch(
            [{k: v for k, v in s.items() if k not in kept} for s in samples],
            frame_keys=frame_keys,
            ring=ring,
            float_frames=float_frames,
        )
        return {**batch, **kept}
    if any(ENCODED_KEY in s for s in samples):
        batch = collate_encoded(samples)
        batch[LEASE_KEY] = None
        return batch
    frames = [k for k in frame_keys if k in samples[0] and isinstance(samples[0][k], torch.Tensor)]
    if ring is None or not frames:
        batch = default_collate(samples)
        for key in frames if float_frames else ():
            if batch[key].dtype == torch.uint8:
                batch[key] = to_unit_float(batch[key])
        batch[LEASE_KEY] = None
        return batch

    filling = _SlotBatch(samples[0], len(samples), frame_keys, ring, float_frames)
    try:
        for sample in samples:
            filling.add(sample)
    except BaseException:
        filling.abandon()
        raise
    return filling.finish()


class _SlotBatch:
    """One batch being filled into a ring slot, sample by sample (see the module docstring):
    ``add`` copies a sample's tensors into its row, ``finish`` is ``collate_batch``'s result."""

    def __init__(self, first: dict, batch_size: int, frame_keys: Sequence[str], ring: FrameRing, float_frames: bool):
        self.keys = list(first)
        self.tensors = [k for k in self.keys if isinstance(first[k], torch.Tensor)]
        self.frames = [k for k in frame_keys if k in self.tensors]
        self.specs = {k: (first[k].shape, first[k].dtype) for k in self.tensors}
        self.scale = [k for k in self.frames if float_frames and first[k].dtype == torch.uint8]

        def dtype_of(key: str) -> torch.dtype:
            return torch.float32 if key in self.scale else first[key].dtype

        frames = {k: ((batch_size, *first[k].shape), dtype_of(k)) for k in self.frames}
        table = {k: ((batch_size, *first[k].shape), first[k].dtype) for k in self.tensors if k not in frames}
        self.ring = ring
        self.lease, storage = ring.acquire(layout_bytes(frames))
        self.outputs = views(storage, frames, channels_last=self.frames)
        if table:  # every other tensor in one fresh storage of its own
            self.outputs.update(views(ring.scratch(layout_bytes(table)), table, channels_last=()))
        self.others: dict[str, list] = {k: [] for k in self.keys if k not in self.specs}
        # Tabular tensors (a few bytes each) are gathered per key when the batch is finished,
        # one stack each, instead of one copy per key per sample.
        self.rows_of: dict[str, list[torch.Tensor]] = {k: [] for k in self.tensors if k not in frames}
        self.checks = [(k, *self.specs[k]) for k in self.tensors]
        self.rows, self.batch_size = 0, batch_size

    def add(self, sample: dict) -> None:
        """Copy one sample into the next row (its tensors are no longer needed after).

        Raises:
            ValueError: a sample whose keys, shapes or dtypes differ from the batch's first.
        """
        if list(sample) != self.keys:
            raise ValueError(f"samples of one batch hold different keys: {sorted(set(sample) ^ set(self.keys))}")
        for key, shape, dtype in self.checks:
            value = sample[key]
            if not isinstance(value, torch.Tensor) or value.shape != shape or value.dtype != dtype:
                kind = "frames" if key in self.frames else "tensors"
                raise ValueError(f"{key}: samples of one batch hold {kind} of different shapes or dtypes")
        for key in self.frames:
            self.outputs[key][self.rows].copy_(sample[key])
        for key, values in self.rows_of.items():
            values.append(sample[key])
        for key, values in self.others.items():
            values.append(sample[key])
        self.rows += 1

    @property
    def full(self) -> bool:
        return self.rows == self.batch_size

    def finish(self) -> dict:
        """The batch: ``default_collate`` of the samples added, its tensors views of the slot."""
        batch = {}
        for key in self.keys:
            if key in self.outputs:
                out = self.outputs[key] if self.full else self.outputs[key][: self.rows]
                if key in self.rows_of:
                    torch.stack(self.rows_of[key], out=out)
                if key in self.scale:
                    scale_to_unit_(out)
                batch[key] = out
            else:
                batch[key] = default_collate(self.others[key])
        batch[LEASE_KEY] = list(self.lease) if self.lease is not None else None
        self.lease = None
        return batch

    def abandon(self) -> None:
        """The stream stopped mid-batch: the slot goes back to the ring unsent."""
        self.ring.abandon(self.lease)
        self.lease = None


def _slot_batchable(sample: dict, frame_keys: Sequence[str]) -> bool:
    """Whether a sample's batch is filled into a slot row by row: frames, and neither language
    columns (lists per sample) nor encoded video (``decode_device``: collated apart)."""
    return (
        not any(k in sample for k in LANGUAGE_COLUMNS)
        and ENCODED_KEY not in sample
        and any(isinstance(sample.get(k), torch.Tensor) for k in frame_keys)
    )


def batches(
    samples: Iterable[dict],
    *,
    batch_size: int,
    drop_last: bool,
    frame_keys: Sequence[str],
    ring: FrameRing | None,
    float_frames: bool = False,
) -> Generator[dict, None, None]:
    """Group a consumer's samples into batches of ``batch_size`` (see the module docstring)."""
    if batch_size < 1:
        raise ArgumentError(f"batch_size must be >= 1, got {batch_size}")
    pending: list[dict] = []
    filling: _SlotBatch | None = None
    try:
        for sample in samples:
            if filling is None and not pending and ring is not None and _slot_batchable(sample, frame_keys):
                filling = _SlotBatch(sample, batch_size, frame_keys, ring, float_frames)
            if filling is not None:
                filling.add(sample)
                del sample  # its frames are in the slot: freed now, before the next decode
                if filling.full:
                    done, filling = filling, None
                    yield done.finish()
                continue
            pending.append(sample)
            if len(pending) == batch_size:
                yield collate_batch(pending, frame_keys=frame_keys, ring=ring, float_frames=float_frames)
                pending = []
        if filling is not None and filling.rows and not drop_last:
            done, filling = filling, None
            yield done.finish()
        if pending and not drop_last:
            yield collate_batch(pending, frame_keys=frame_keys, ring=ring, float_frames=float_frames)
    finally:
        if filling is not None:
            filling.abandon()
        close = getattr(samples, "close", None)
        if close is not None:  # a source building ahead on a thread stops now, not when collected
            close()


__all__ = ["LEASE_KEY", "batches", "collate_batch"]
