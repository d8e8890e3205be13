"""The epoch plan: which anchors each consumer draws, as pure numpy arithmetic.

The plan depends only on the per-episode anchor counts, the seed, the epoch and the job
shape, so every rank computes it on its own (no collectives) and resume can recompute it.

Steps (see ``plan_epoch``):

1. Order the episodes: a permutation seeded by ``(seed, epoch)``, or index order.
2. Conceptually concatenate every episode's anchors in that order into one stream of ``N``
   anchors. Positions are *anchor positions* ``0..n_i-1`` inside an episode's anchor
   list, never frame numbers: a SQL filter leaves an arbitrary subset of frames.
3. Give each rank ``N // world_size`` consecutive anchors of the stream and drop the last
   ``N % world_size`` (at most ``world_size - 1``; the dropped ones change with the
   episode order, so every epoch drops different anchors).
4. Split each rank's range contiguously over its workers, counts differing by at most 1.

Nothing N-sized is ever built: a consumer's share is a short list of *pieces*,
``(episode, anchor_start, anchor_stop)`` ranges, and the split only cuts at most
``num_consumers - 1`` episodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lerobot_shards.core.errors import PlanError

# Mixed into the episode-order seed so that no other stream of the reader seeded with
# (seed, epoch, ...) can coincide with this one.
EPISODE_ORDER_TAG = 0x4550_4F52  # "EPOR"


@dataclass(frozen=True, eq=False)
class StreamSplit:
    """A stream of consecutive items cut into per-consumer pieces.

    The stream is the concatenation of ``items`` (item ``i`` contributes ``lengths[i]``
    units); consumer ``c`` owns the pieces ``consumer_ptr[c]:consumer_ptr[c + 1]`` of the
    flat piece arrays, in stream order.

    Attributes:
        per_rank_count: units per rank (identical on every rank).
        dropped: units cut from the end of the stream, ``< world_size``.
        consumer_counts: (C,) int64 units per consumer, rank-major.
        consumer_ptr: (C + 1,) int64 offsets into the piece arrays.
        piece_item: (pieces,) int64 index of the item (position in ``lengths``) a piece is from.
        piece_offset: (pieces,) int64 offset of the piece's first unit inside its item.
        piece_length: (pieces,) int64 units in the piece, always ``> 0``.
    """

    per_rank_count: int
    dropped: int
    consumer_counts: np.ndarray
    consumer_ptr: np.ndarray
    piece_item: np.ndarray
    piece_offset: np.ndarray
    piece_length: np.ndarray


def split_stream(lengths: np.ndarray, *, world_size: int, workers_per_rank: int) -> StreamSplit:
    """Cut the concatenation of items into equal per-rank, balanced per-worker pieces.

    Rank ``r`` receives stream units ``[r * per_rank, (r + 1) * per_rank)`` with
    ``per_rank = total // world_size``; inside a rank the workers get contiguous ranges
    whose counts differ by at most 1, earlier workers taking the extra unit. Items of
    length 0 yield no piece; consumers may receive no piece.

    Args:
        lengths: (items,) non-negative integer lengths, in stream order.
        world_size: ranks, ``>= 1``.
        workers_per_rank: consumers per rank, ``>= 1``.

    Returns:
        The ``StreamSplit``. Cost is O(items + consumers) (two sorted runs are merged).

    Raises:
        PlanError: ``lengths`` is not a 1-D array of non-negative integers, or the
            world shape is not positive.
    """
    lengths = _as_counts(lengths, "lengths")
    _check_positive(world_size=world_size, workers_per_rank=workers_per_rank)
    ends = np.cumsum(lengths, dtype=np.int64)
    total = int(ends[-1]) if len(ends) else 0
    per_rank = total // world_size
    kept = per_rank * world_size

    base, extra = divmod(per_rank, workers_per_rank)
    worker_counts = base + (np.arange(workers_per_rank, dtype=np.int64) < extra)
    consumer_counts = np.tile(worker_counts, world_size)
    bounds = np.zeros(len(consumer_counts) + 1, dtype=np.int64)
    np.cumsum(consumer_counts, out=bounds[1:])

    # A piece starts wherever an item or a consumer starts; both lists are sorted, so the
    # stable sort is a linear merge of two runs.
    starts = ends - lengths
    cuts = np.sort(np.concatenate([starts[starts < kept], bounds[:-1][bounds[:-1] < kept]]), kind="stable")
    if len(cuts):
        cuts = cuts[np.concatenate([[True], cuts[1:] != cuts[:-1]])]
    piece_stop = np.append(cuts[1:], kept).astype(np.int64)
    # side="right" skips zero-length items, which end where the next item starts.
    piece_item = np.searchsorted(ends, cuts, side="right").astype(np.int64)
    piece_offset = cuts - starts[piece_item] if len(cuts) else np.zeros(0, dtype=np.int64)
    consumer_ptr = np.searchsorted(cuts, bounds, side="left").astype(np.int64)
    return StreamSplit(
        per_rank_count=per_rank,
        dropped=total - kept,
        consumer_counts=_frozen(consumer_counts),
        consumer_ptr=_frozen(consumer_ptr),
        piece_item=_frozen(piece_item),
        piece_offset=_frozen(piece_offset.astype(np.int64)),
        piece_length=_frozen(piece_stop - cuts),
    )


@dataclass(frozen=True, eq=False)
class EpochPlan:
    """Every consumer's anchors for one epoch, as pieces of episodes.

    Consumer ``c`` (``rank * workers_per_rank + worker``) draws, over the epoch, exactly
    the anchors ``piece_start[j]..piece_stop[j]-1`` of episode ``piece_episode[j]`` for
    ``j`` in ``consumer_ptr[c]:consumer_ptr[c + 1]``, pieces in plan order. Across all
    consumers every anchor appears exactly once, except ``dropped`` anchors at the end of
    the stream. Arrays are read-only.

    Attributes:
        seed, epoch, shuffle, world_size, workers_per_rank: the inputs of ``plan_epoch``.
        num_anchors: anchors of all episodes, ``N``.
        episode_order: (E,) int64 episode indices in stream order (0-anchor ones included).
        per_rank_count: anchors per rank, ``N // world_size``.
        dropped: anchors left out this epoch, ``N - per_rank_count * world_size``.
        consumer_counts: (C,) int64 anchors per consumer.
        consumer_ptr: (C + 1,) int64 offsets into the piece arrays.
        piece_episode: (pieces,) int64 episode index (into ``anchor_counts``).
        piece_start, piece_stop: (pieces,) int64 half-open anchor-position range.
    """

    seed: int
    epoch: int
    shuffle: bool
    world_size: int
    workers_per_rank: int
    num_anchors: int
    episode_order: np.ndarray
    per_rank_count: int
    dropped: int
    consumer_counts: np.ndarray
    consumer_ptr: np.ndarray
    piece_episode: np.ndarray
    piece_start: np.ndarray
    piece_stop: np.ndarray

    @property
    def num_consumers(self) -> int:
        """Consumers in the plan, ``world_size * workers_per_rank``."""
        return self.world_size * self.workers_per_rank

    @property
    def num_pieces(self) -> int:
        """Pieces over all consumers."""
        return len(self.piece_episode)

    def pieces_of(self, consumer: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return consumer ``consumer``'s pieces in plan order.

        Returns:
            ``(episode, start, stop)``: (pieces,) int64 read-only views; anchors are
            ``[start, stop)`` positions in each episode's anchor list.

        Raises:
            PlanError: ``consumer`` is not in ``[0, num_consumers)``.
        """
        if not 0 <= consumer < self.num_consumers:
            raise PlanError(f"consumer must be in [0, {self.num_consumers}), got {consumer}")
        lo, hi = int(self.consumer_ptr[consumer]), int(self.consumer_ptr[consumer + 1])
        return self.piece_episode[lo:hi], self.piece_start[lo:hi], self.piece_stop[lo:hi]


def plan_epoch(
    anchor_counts: np.ndarray,
    *,
    seed: int,
    epoch: int,
    world_size: int,
    workers_per_rank: int,
    shuffle: bool,
) -> EpochPlan:
    """Plan one epoch: order the episodes and split their anchors over all consumers.

    Args:
        anchor_counts: (E,) non-negative integer anchors per episode; 0 skips an episode.
        seed: non-negative integer seed, shared by all ranks.
        epoch: non-negative epoch number; each epoch reorders the episodes.
        world_size: ranks, ``>= 1``.
        workers_per_rank: DataLoader workers per rank, ``>= 1`` (use 1 for ``num_workers=0``).
        shuffle: permute the episodes with ``default_rng([seed, epoch, EPISODE_ORDER_TAG])``;
            otherwise keep index order.

    Returns:
        The ``EpochPlan``. With fewer anchors than consumers some (or all) consumers get
        nothing. Cost is O(E log E) for the permutation plus O(E + consumers).

    Raises:
        PlanError: ``anchor_counts`` is not a 1-D array of non-negative integers, ``seed``
            or ``epoch`` is negative, or the world shape is not positive.
    """
    counts = _as_counts(anchor_counts, "anchor_counts")
    for name, value in (("seed", seed), ("epoch", epoch)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise PlanError(f"{name} must be a non-negative int, got {value!r}")
    _check_positive(world_size=world_size, workers_per_rank=workers_per_rank)
    if shuffle:
        order = np.random.default_rng([int(seed), int(epoch), EPISODE_ORDER_TAG]).permutation(len(counts))
    else:
        order = np.arange(len(counts))
    order = order.astype(np.int64)
    split = split_stream(counts[order], world_size=world_size, workers_per_rank=workers_per_rank)
    return EpochPlan(
        seed=int(seed),
        epoch=int(epoch),
        shuffle=bool(shuffle),
        world_size=world_size,
        workers_per_rank=workers_per_rank,
        num_anchors=int(counts.sum()),
        episode_order=_frozen(order),
        per_rank_count=split.per_rank_count,
        dropped=split.dropped,
        consumer_counts=split.consumer_counts,
        consumer_ptr=split.consumer_ptr,
        piece_episode=_frozen(order[split.piece_item]),
        piece_start=split.piece_offset,
        piece_stop=_frozen(split.piece_offset + split.piece_length),
    )


def _as_counts(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise PlanError(f"{name} must be 1-D, got shape {arr.shape}")
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise PlanError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.min() < 0:
        bad = int(np.flatnonzero(arr < 0)[0])
        raise PlanError(f"{name} must be >= 0, got {int(arr[bad])} at index {bad}")
    return arr.astype(np.int64, copy=False)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise PlanError(f"{name} must be an int >= 1, got {value!r}")


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr
