"""Whole batches built inside a consumer: ``default_collate``'s result, with the frames of a
batch copied into one reusable shared-memory slot (``lerobot_shards.reader.runtime.frame_ring``), laid out
channels-last in memory.

A batch is exactly ``torch.utils.data.default_collate`` of its samples (tensors stacked along
a new first axis, strings as lists); only where the frame tensors live differs. The samples of
a batch are consecutive draws of one consumer, ``batch_size`` of them (the last batch of a
consumer's stream may be shorter, or is dropped with ``drop_last``), which is how a DataLoader
with ``batch_size`` batches an IterableDataset: the order of batches, and so resume, is the
same as the per-sample path's.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

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
    """``default_collate(samples)`` with the tensors under ``frame_keys`` copied into a ring slot
    (same values and shapes; channels-last strides).

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

    def dtype_of(key: str) -> torch.dtype:
        dtype = samples[0][key].dtype
        return torch.float32 if float_frames and dtype == torch.uint8 else dtype

    layout = {k: ((len(samples), *samples[0][k].shape), dtype_of(k)) for k in frames}
    lease, storage = ring.acquire(layout_bytes(layout))
    outputs = views(storage, layout)
    batch = {}
    for key in samples[0]:
        values = [s[key] for s in samples]
        if key in outputs:
            if any(v.shape != values[0].shape or v.dtype != values[0].dtype for v in values):
                raise ValueError(f"{key}: samples of one batch hold frames of different shapes or dtypes")
            for row, value in zip(outputs[key], values):
                row.copy_(value)
            if float_frames and values[0].dtype == torch.uint8:
                scale_to_unit_(outputs[key])
            batch[key] = outputs[key]
        else:
            batch[key] = default_collate(values)
    batch[LEASE_KEY] = list(lease) if lease is not None else None
    return batch


def batches(
    samples: Iterable[dict],
    *,
    batch_size: int,
    drop_last: bool,
    frame_keys: Sequence[str],
    ring: FrameRing | None,
    float_frames: bool = False,
) -> Iterator[dict]:
    """Group a consumer's samples into batches of ``batch_size`` (see the module docstring)."""
    if batch_size < 1:
        raise ArgumentError(f"batch_size must be >= 1, got {batch_size}")
    pending: list[dict] = []
    for sample in samples:
        pending.append(sample)
        if len(pending) == batch_size:
            yield collate_batch(pending, frame_keys=frame_keys, ring=ring, float_frames=float_frames)
            pending = []
    if pending and not drop_last:
        yield collate_batch(pending, frame_keys=frame_keys, ring=ring, float_frames=float_frames)


__all__ = ["LEASE_KEY", "batches", "collate_batch"]
