"""Resume arithmetic: from ``samples_consumed`` to each DataLoader worker's position.

How PyTorch's DataLoader serves an ``IterableDataset`` with ``k`` workers: each worker
batches its own stream (``batch_size`` samples, its last batch partial unless
``drop_last``), and the main process takes batches round-robin over workers ``0..k-1``,
skipping workers that have finished. The order is fixed by the workers' sample counts,
not by timing: a task the loader sends to a finished worker is skipped, and the rotation
continues in worker order.

A new DataLoader always restarts its rotation at worker 0, so resuming is not "worker w
continues old worker w": new worker ``i`` must continue the ``i``-th old worker in the
rotation that was pending, and finished old workers get no successor.

Everything here is O(k) phases of numpy (the set of active workers changes at most k
times), never a loop per batch: ``samples_consumed`` may be 1e7 with ``batch_size=1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lerobot_shards.reader.plan.epoch_plan import PlanError, split_stream


class WorkerProgress(NamedTuple):
    """Where a DataLoader stands after some samples.

    Attributes:
        delivered: (k,) int64 samples each worker has delivered.
        rotation: workers that still have batches to deliver, in the order the loader
            serves them next (the first is the next batch's worker).
    """

    delivered: np.ndarray
    rotation: list[int]


def worker_progress(
    worker_counts: np.ndarray,
    *,
    batch_size: int,
    samples_consumed: int,
    drop_last: bool = False,
) -> WorkerProgress:
    """Locate a DataLoader's round robin after ``samples_consumed`` samples.

    Args:
        worker_counts: (k,) samples in each worker's stream (workers of one rank).
        batch_size: the DataLoader's batch size, ``>= 1``.
        samples_consumed: samples the trainer received from this loader, from its start.
        drop_last: the DataLoader's ``drop_last``: each worker drops its partial batch.

    Returns:
        ``WorkerProgress(delivered, rotation)``.

    Raises:
        PlanError: ``samples_consumed`` is negative, exceeds the samples the loader
            delivers, or does not end a batch (with the batch edges around it).
    """
    counts = _as_int_array(worker_counts, "worker_counts")
    _check_int("batch_size", batch_size, 1)
    _check_int("samples_consumed", samples_consumed, 0)
    k = len(counts)
    if drop_last:
        num_batches = counts // batch_size
        last_size = np.full(k, batch_size, dtype=np.int64)
    else:
        num_batches = -(-counts // batch_size)
        last_size = counts - (num_batches - 1) * batch_size
    deliverable = np.where(num_batches > 0, (num_batches - 1) * batch_size + last_size, 0)
    total = int(deliverable.sum())
    if samples_consumed > total:
        raise PlanError(
            f"samples_consumed={samples_consumed} exceeds the {total} samples the {k} workers deliver "
            f"(worker_counts={counts.tolist()}, batch_size={batch_size}, drop_last={drop_last})"
        )

    left = samples_consumed
    rounds_done = 0  # rounds every active worker has completed
    for level in np.unique(num_batches[num_batches > 0]).tolist():
        # Rounds [rounds_done, level) have the same active workers; all but the last are
        # full batches, and in the last one the workers with `level` batches end.
        active = np.flatnonzero(num_batches >= level)
        per_round = len(active) * batch_size
        full_rounds = level - 1 - rounds_done
        if left < full_rounds * per_round:
            rounds, rest = divmod(left, per_round)
            if rest % batch_size:
                before = samples_consumed - rest % batch_size
                raise _boundary_error(samples_consumed, before, before + batch_size)
            served = rest // batch_size
            delivered = np.minimum(deliverable, (rounds_done + rounds) * batch_size)
            delivered[active[:served]] += batch_size
            return WorkerProgress(delivered, active[served:].tolist() + active[:served].tolist())
        left -= full_rounds * per_round
        sizes = np.where(num_batches[active] == level, last_size[active], batch_size)
        ends = np.cumsum(sizes)
        if left < ends[-1]:
            served = int(np.searchsorted(ends, left, side="right"))
            done = int(ends[served - 1]) if served else 0
            if left != done:
                before = samples_consumed - (left - done)
                raise _boundary_error(samples_consumed, before, before + int(sizes[served]))
            delivered = np.minimum(deliverable, (level - 1) * batch_size)
            delivered[active[:served]] += sizes[:served]
            # Workers that just delivered their last batch leave the rotation.
            wrapped = [int(w) for w in active[:served] if num_batches[w] > level]
            return WorkerProgress(delivered, active[served:].tolist() + wrapped)
        left -= int(ends[-1])
        rounds_done = level
    # Everything delivered (left == 0 here, since samples_consumed <= total).
    return WorkerProgress(deliverable.astype(np.int64), [])


@dataclass(frozen=True, eq=False)
class ResumedStreams:
    """What each new consumer serves after a resume: segments of old consumer streams.

    New consumer ``c`` (``rank * workers_per_rank + worker``) serves, in order, draws
    ``[segment_start[j], segment_stop[j])`` of old consumer ``segment_source[j]``'s draw
    sequence, for ``j`` in ``consumer_ptr[c]:consumer_ptr[c + 1]``.

    Attributes:
        world_size, workers_per_rank: the new job shape.
        exact: True when the resumed sequence is exactly the uninterrupted one (same
            shape); False after a re-split (same coverage, different order).
        dropped: old remaining draws left out to keep per-rank counts equal.
        consumer_counts: (C,) int64 draws per new consumer.
        consumer_ptr: (C + 1,) int64 offsets into the segment arrays.
        segment_source, segment_start, segment_stop: (segments,) int64.
    """

    world_size: int
    workers_per_rank: int
    exact: bool
    dropped: int
    consumer_counts: np.ndarray
    consumer_ptr: np.ndarray
    segment_source: np.ndarray
    segment_start: np.ndarray
    segment_stop: np.ndarray

    def segments_of(self, consumer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(source, start, stop)`` (segments,) int64 arrays of ``consumer``, in order.

        Raises:
            PlanError: ``consumer`` is not in ``[0, world_size * workers_per_rank)``.
        """
        num = self.world_size * self.workers_per_rank
        if not 0 <= consumer < num:
            raise PlanError(f"consumer must be in [0, {num}), got {consumer}")
        lo, hi = int(self.consumer_ptr[consumer]), int(self.consumer_ptr[consumer + 1])
        return self.segment_source[lo:hi], self.segment_start[lo:hi], self.segment_stop[lo:hi]

    def through(self, earlier: ResumedStreams) -> ResumedStreams:
        """Rewrite these segments, which index ``earlier``'s new consumers, into ``earlier``'s sources.

        For a second resume in one epoch: ``second.through(first)`` gives segments of the
        original plan's consumer streams.

        Raises:
            PlanError: a segment reaches past an ``earlier`` consumer's stream.
        """
        source, start, stop, owner = [], [], [], []
        for c in range(len(self.consumer_counts)):
            src, lo, hi = self.segments_of(c)
            for s, a, b in zip(src.tolist(), lo.tolist(), hi.tolist()):
                if b > earlier.consumer_counts[s]:
                    raise PlanError(f"segment [{a}, {b}) of stream {s} reaches past its {int(earlier.consumer_counts[s])} draws")
                e_src, e_lo, e_hi = earlier.segments_of(s)
                ends = np.cumsum(e_hi - e_lo)
                begins = ends - (e_hi - e_lo)
                # Earlier segments overlapping [a, b) of stream s, clipped to it.
                for j in range(int(np.searchsorted(ends, a, side="right")), len(ends)):
                    if begins[j] >= b:
                        break
                    cut_lo, cut_hi = max(a, begins[j]), min(b, ends[j])
                    source.append(int(e_src[j]))
                    start.append(int(e_lo[j] + cut_lo - begins[j]))
                    stop.append(int(e_lo[j] + cut_hi - begins[j]))
                    owner.append(c)
        ptr = np.searchsorted(np.array(owner, dtype=np.int64), np.arange(len(self.consumer_counts) + 1))
        return ResumedStreams(
            world_size=self.world_size,
            workers_per_rank=self.workers_per_rank,
            exact=self.exact and earlier.exact,
            dropped=self.dropped + earlier.dropped,
            consumer_counts=self.consumer_counts,
            consumer_ptr=ptr.astype(np.int64),
            segment_source=np.array(source, dtype=np.int64),
            segment_start=np.array(start, dtype=np.int64),
            segment_stop=np.array(stop, dtype=np.int64),
        )


def assign_resumed_streams(
    old_consumer_counts: np.ndarray,
    *,
    old_world_size: int,
    batch_size: int,
    samples_consumed: int,
    new_world_size: int,
    new_workers_per_rank: int,
    drop_last: bool = False,
) -> ResumedStreams:
    """Decide which old draws each new consumer serves after resuming mid-epoch.

    Every old rank consumed ``samples_consumed`` samples (per-rank counts are equal), so
    each rank's worker positions follow from ``worker_progress`` without communication.

    * Same shape (world size and workers per rank): new worker ``i`` of a rank serves the
      rest of the ``i``-th worker of that rank's pending rotation; workers beyond the
      rotation get nothing. This reproduces the uninterrupted batch sequence exactly.
    * Changed shape: the remaining draws of all old consumers of all ranks, in consumer
      order, are split once over the new consumers like an epoch plan (equal per-rank
      counts, dropping at most ``new_world_size - 1``; workers differ by at most 1), each
      new consumer getting contiguous segments of old sequences. The sequence then
      differs from an uninterrupted run, but every remaining draw is still served exactly
      once (except the dropped ones).

    Args:
        old_consumer_counts: (old C,) draws per old consumer, rank-major.
        old_world_size: old ranks; ``old C`` must be a multiple of it.
        batch_size: the DataLoader's batch size (same before and after).
        samples_consumed: samples each rank received this epoch before the interruption.
        new_world_size, new_workers_per_rank: the resumed job's shape (``num_workers=0``
            counts as 1 worker).
        drop_last: the DataLoader's ``drop_last`` in the old run.

    Returns:
        ``ResumedStreams`` over ``new_world_size * new_workers_per_rank`` consumers.

    Raises:
        PlanError: a bad shape, per-rank totals that differ, or a ``samples_consumed``
            that ``worker_progress`` rejects.
    """
    counts = _as_int_array(old_consumer_counts, "old_consumer_counts")
    _check_int("old_world_size", old_world_size, 1)
    _check_int("new_world_size", new_world_size, 1)
    _check_int("new_workers_per_rank", new_workers_per_rank, 1)
    per_rank = _per_rank(counts, old_world_size)
    progress = [
        worker_progress(row, batch_size=batch_size, samples_consumed=samples_consumed, drop_last=drop_last) for row in per_rank
    ]
    if old_world_size == new_world_size and per_rank.shape[1] == new_workers_per_rank:
        return _exact_resume(counts, progress, new_world_size, new_workers_per_rank)
    return _resplit_resume(counts, progress, new_world_size, new_workers_per_rank)


def _per_rank(counts: np.ndarray, old_world_size: int) -> np.ndarray:
    """The old consumers' draws as ``(ranks, workers)``; every rank's total equal."""
    if len(counts) == 0 or len(counts) % old_world_size:
        raise PlanError(
            f"old_consumer_counts has {len(counts)} entries; expected a positive multiple of old_world_size={old_world_size}"
        )
    per_rank = counts.reshape(old_world_size, len(counts) // old_world_size)
    totals = per_rank.sum(axis=1)
    if (totals != totals[0]).any():
        raise PlanError(f"old per-rank totals must be equal, got {totals.tolist()}")
    return per_rank


def _exact_resume(counts: np.ndarray, progress: list, world_size: int, workers_per_rank: int) -> ResumedStreams:
    """Same shape: new worker ``i`` of a rank serves the rest of the ``i``-th worker of that
    rank's pending rotation (the uninterrupted batch sequence)."""
    old_workers = len(counts) // world_size
    source, start, stop, owner = [], [], [], []
    for rank, (delivered, rotation) in enumerate(progress):
        for i, w in enumerate(rotation):
            old = rank * old_workers + w
            source.append(old)
            start.append(int(delivered[w]))
            stop.append(int(counts[old]))
            owner.append(rank * workers_per_rank + i)
    num_new = world_size * workers_per_rank
    owner_arr = np.array(owner, dtype=np.int64)
    start_arr, stop_arr = np.array(start, dtype=np.int64), np.array(stop, dtype=np.int64)
    return ResumedStreams(
        world_size=world_size,
        workers_per_rank=workers_per_rank,
        exact=True,
        dropped=0,
        consumer_counts=np.bincount(owner_arr, weights=stop_arr - start_arr, minlength=num_new).astype(np.int64),
        consumer_ptr=np.searchsorted(owner_arr, np.arange(num_new + 1)).astype(np.int64),
        segment_source=np.array(source, dtype=np.int64),
        segment_start=start_arr,
        segment_stop=stop_arr,
    )


def _resplit_resume(counts: np.ndarray, progress: list, world_size: int, workers_per_rank: int) -> ResumedStreams:
    """Another shape: the remaining draws of every old consumer, in consumer order, split once
    over the new consumers like an epoch plan."""
    delivered = np.concatenate([p.delivered for p in progress])
    split = split_stream(counts - delivered, world_size=world_size, workers_per_rank=workers_per_rank)
    seg_start = delivered[split.piece_item] + split.piece_offset
    return ResumedStreams(
        world_size=world_size,
        workers_per_rank=workers_per_rank,
        exact=False,
        dropped=split.dropped,
        consumer_counts=split.consumer_counts,
        consumer_ptr=split.consumer_ptr,
        segment_source=split.piece_item,
        segment_start=seg_start,
        segment_stop=seg_start + split.piece_length,
    )


@dataclass(frozen=True)
class Phase:
    """A stretch of one epoch served by one loader shape.

    Attributes:
        start: the per-rank ``samples_consumed`` at which this phase began (0 for the first;
            the counter runs on across resumes within the epoch).
        world_size, num_workers, batch_size, drop_last: the loader's shape in this phase
            (``num_workers=0`` serves like one worker).
    """

    start: int
    world_size: int
    num_workers: int
    batch_size: int
    drop_last: bool = False

    def __post_init__(self) -> None:
        _check_int("start", self.start, 0)
        _check_int("world_size", self.world_size, 1)
        _check_int("num_workers", self.num_workers, 0)
        _check_int("batch_size", self.batch_size, 1)

    @property
    def workers_per_rank(self) -> int:
        return max(1, self.num_workers)

    def same_loader(self, other: Phase) -> bool:
        """Whether ``other`` continues this phase's batch sequence exactly (same shape)."""
        return (self.world_size, self.workers_per_rank, self.batch_size, self.drop_last) == (
            other.world_size,
            other.workers_per_rank,
            other.batch_size,
            other.drop_last,
        )


def identity_streams(counts: np.ndarray, *, world_size: int, workers_per_rank: int) -> ResumedStreams:
    """Streams of an epoch's first phase: consumer ``c`` serves all of plan stream ``c``."""
    counts = _as_int_array(counts, "counts")
    if len(counts) != world_size * workers_per_rank:
        raise PlanError(f"{len(counts)} plan streams for {world_size} ranks x {workers_per_rank} workers")
    ids = np.arange(len(counts), dtype=np.int64)
    return ResumedStreams(
        world_size=world_size,
        workers_per_rank=workers_per_rank,
        exact=True,
        dropped=0,
        consumer_counts=counts,
        consumer_ptr=np.arange(len(counts) + 1, dtype=np.int64),
        segment_source=ids,
        segment_start=np.zeros(len(counts), dtype=np.int64),
        segment_stop=counts.copy(),
    )


def resume_streams(
    plan_counts: np.ndarray,
    phases: Sequence[Phase],
    *,
    resumed_at: int,
    world_size: int,
    workers_per_rank: int,
) -> ResumedStreams:
    """What each consumer of a resumed loader serves, after any chain of earlier resumes.

    The epoch was planned on ``phases[0]``'s shape (``plan_counts``: draws per plan stream);
    each later phase began at its ``start`` on its own shape; the trainer saved at
    ``resumed_at`` (per-rank samples this epoch) and resumes on ``world_size`` x
    ``workers_per_rank``. Every transition is ``assign_resumed_streams`` on the streams of the
    phase before it (an exact continuation when the shape is kept, else a re-split of the
    rest), composed back onto the plan's streams, so any chain serves the epoch's draws
    exactly once, each phase with equal counts per rank and at most ``world_size - 1`` more
    draws dropped per re-split. With one phase and the same shape the result is exactly
    the uninterrupted sequence.

    Returns:
        ``ResumedStreams`` whose segments index the plan's streams.

    Raises:
        PlanError: no phase, phases out of order, or an offset that does not end a batch of
            the phase it falls in (``worker_progress``).
    """
    if not phases:
        raise PlanError("a resume needs the phase the epoch was planned on")
    starts = [phase.start for phase in phases]
    if starts[0] != 0 or any(b < a for a, b in zip(starts, starts[1:])) or resumed_at < starts[-1]:
        raise PlanError(f"phases must start at 0 and ascend up to the resume point {resumed_at}, got starts {starts}")
    streams = identity_streams(plan_counts, world_size=phases[0].world_size, workers_per_rank=phases[0].workers_per_rank)
    targets = [(later.start, later.world_size, later.workers_per_rank) for later in phases[1:]]
    targets.append((resumed_at, world_size, workers_per_rank))
    for phase, (at, new_world, new_workers) in zip(phases, targets):
        step = assign_resumed_streams(
            streams.consumer_counts,
            old_world_size=phase.world_size,
            batch_size=phase.batch_size,
            samples_consumed=at - phase.start,
            new_world_size=new_world,
            new_workers_per_rank=new_workers,
            drop_last=phase.drop_last,
        )
        streams = step.through(streams)
    return streams


def _boundary_error(found: int, before: int, after: int) -> PlanError:
    return PlanError(
        f"samples_consumed={found} does not end a batch: the loader's batches end at {before} and {after} "
        f"around it; expected one of those (was batch_size or num_workers changed?)"
    )


def _as_int_array(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise PlanError(f"{name} must be 1-D, got shape {arr.shape}")
    if len(arr) and not np.issubdtype(arr.dtype, np.integer):
        raise PlanError(f"{name} must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if len(arr) and arr.min() < 0:
        raise PlanError(f"{name} must be >= 0, got {arr.tolist()}")
    return arr


def _check_int(name: str, value: int, low: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
        raise PlanError(f"{name} must be an int >= {low}, got {value!r}")
