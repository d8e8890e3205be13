"""Mixture planning: which dataset, episode and anchor every draw reads, as pure numpy.

Two modes, both pure functions of (seed, epoch, job shape, per-episode anchor counts):

**Proportional** (default weights = anchor counts). An epoch is exactly once over the union
of all datasets: it is ``plan_epoch`` over the datasets' episodes laid end to end
(``MixtureLayout``: global episode = ``episode_offsets[d] + local episode``). Every property
of the single-dataset plan carries over unchanged, including the pool: one
``PoolSchedule`` per consumer whose ``pool_size`` bounds the open episodes over *all*
datasets together.

**Weighted** (explicit weights + ``samples_per_epoch`` S). Each rank draws ``S //
world_size`` samples, split over its workers (counts differ by at most 1). Consumer ``c``'s
draw ``t`` reads source ``label(t)`` (``SourceLabels``: block-generated, instant
skip-ahead); its ``k``-th draw from source ``d`` is position ``k`` of an endless stream of
*cycles*: cycle ``q`` is ``plan_epoch`` of source ``d`` keyed by ``(epoch, d, q)`` over all
consumers (so consumers draw disjoint anchors within a cycle), consumer ``c`` takes its
share of it through a ``PoolSchedule``, and the next cycle reshuffles. A cycle is drained
before the next starts, so a source never has two cycles open.

Pool across sources (weighted mode). Draws interleave sources at random, so every source
with a positive weight has a partly drawn episode open at almost any time: one open
episode per drawn source is unavoidable unless episodes are refetched. Source ``d`` gets
``source_pool_sizes(weights, pool_size)[d] = max(1, round(pool_size * w_d / sum(w)))``
slots of its own, so a consumer holds at most ``sum_d pool_d <= pool_size + sources``
episodes (each rounding adds at most one). Slots proportional to weight keep the draws
per open episode per batch about equal across sources (``batch * w_d / pool_d ~ batch /
pool_size``): the same decorrelation as one dataset with ``pool_size`` open episodes.
``pool_size`` slots per source would hold ``pool_size * sources`` episodes instead (3,200
for 400 sources and 8 slots).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from reader.plan.epoch_plan import EpochPlan, PlanError, plan_epoch, split_stream
from reader.plan.pool_schedule import DEFAULT_BLOCK_SIZE as POOL_BLOCK_SIZE
from reader.plan.pool_schedule import PoolSchedule

DEFAULT_BLOCK = 65536
_TAG = 0x6D6978  # "mix": separates the source-label stream from other seeded streams
_CYCLE_TAG = 0x4359_434C  # "CYCL": keys one source's cycle plan


class SourceLabels:
    """Source labels of one consumer's weighted draws: an endless, seekable sequence.

    Block ``b`` (``block_size`` draws) holds ``multinomial(block_size, p)`` draws of each
    source (``p = weights / sum(weights)``), in a random order; both come from
    ``default_rng([seed, epoch, consumer, b, _TAG])``. Any draw's label, and the per-source
    counts before any position, cost O(position / block_size) small multinomial draws (cached
    as a running sum) plus one block.

    Args:
        weights: (sources,) non-negative, finite, positive sum; a zero weight is never drawn.
        seed, epoch, consumer: the stream's key.
        block_size: draws per block; part of the sequence's definition.

    Raises:
        PlanError: bad weights or block size.
    """

    def __init__(self, weights: np.ndarray, *, seed: int, epoch: int, consumer: int, block_size: int = DEFAULT_BLOCK):
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1 or len(weights) == 0 or not np.isfinite(weights).all() or (weights < 0).any() or weights.sum() <= 0:
            raise PlanError(f"weights must be a non-empty 1-D array of non-negative numbers with a positive sum, got {weights}")
        if not isinstance(block_size, (int, np.integer)) or block_size < 1:
            raise PlanError(f"block_size must be an int >= 1, got {block_size!r}")
        self.p = weights / weights.sum()
        self.seed, self.epoch, self.consumer, self.block_size = int(seed), int(epoch), int(consumer), int(block_size)
        # _before[b]: (sources,) draws of each source in blocks [0, b); grown on demand.
        self._before = np.zeros((1, len(self.p)), dtype=np.int64)
        self._cached: tuple[int, np.ndarray] | None = None

    @property
    def num_sources(self) -> int:
        return len(self.p)

    def _rng(self, block: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, self.consumer, block, _TAG])

    def _extend(self, blocks: int) -> None:
        """Make ``_before`` cover blocks ``[0, blocks]``."""
        have = len(self._before) - 1
        if blocks <= have:
            return
        counts = np.stack([self._rng(b).multinomial(self.block_size, self.p) for b in range(have, blocks)])
        self._before = np.concatenate([self._before, self._before[-1] + np.cumsum(counts, axis=0)])

    def _block_labels(self, block: int) -> np.ndarray:
        if self._cached is not None and self._cached[0] == block:
            return self._cached[1]
        rng = self._rng(block)
        counts = rng.multinomial(self.block_size, self.p)
        labels = np.repeat(np.arange(len(counts), dtype=np.int64), counts)[rng.permutation(self.block_size)]
        self._cached = (block, labels)
        return labels

    def counts_before(self, position: int) -> np.ndarray:
        """Return (sources,) int64: draws of each source in ``[0, position)``."""
        if position < 0:
            raise PlanError(f"position must be >= 0, got {position}")
        block, within = divmod(int(position), self.block_size)
        self._extend(block)
        total = self._before[block].copy()
        if within:
            total += np.bincount(self._block_labels(block)[:within], minlength=len(self.p))
        return total

    def labels(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Return draws ``[start, stop)`` as ``(source, rank)``: (stop - start,) int64 arrays.

        ``rank[i]`` is how many earlier draws (from 0) came from the same source: the
        position of draw ``start + i`` in its source's stream.

        Raises:
            PlanError: not ``0 <= start <= stop``.
        """
        if not 0 <= start <= stop:
            raise PlanError(f"need 0 <= start <= stop, got [{start}, {stop})")
        if start == stop:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        seen = self.counts_before(start)
        first, last = start // self.block_size, (stop - 1) // self.block_size
        parts = []
        for block in range(first, last + 1):
            lo = max(start - block * self.block_size, 0)
            hi = min(stop - block * self.block_size, self.block_size)
            parts.append(self._block_labels(block)[lo:hi])
        labels = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return labels, seen[labels] + _occurrence(labels, len(self.p))


@dataclass(frozen=True, eq=False)
class MixtureLayout:
    """The datasets' episodes laid end to end: global episode = ``episode_offsets[d] + local``.

    Attributes:
        episode_counts: (D,) int64 episodes of each dataset.
        episode_offsets: (D + 1,) int64 first global episode of each dataset; the last entry
            is the number of episodes.
        anchor_counts: (E,) int64 anchors of every episode, in global episode order.
        dataset_anchors: (D,) int64 anchors of each dataset.
    """

    episode_counts: np.ndarray
    episode_offsets: np.ndarray
    anchor_counts: np.ndarray
    dataset_anchors: np.ndarray

    @classmethod
    def from_anchor_counts(cls, anchor_counts: Sequence[np.ndarray]) -> MixtureLayout:
        """Build the layout from each dataset's (episodes,) anchor counts, in dataset order.

        Raises:
            PlanError: no dataset, or a count array that is not 1-D non-negative integers.
        """
        if len(anchor_counts) == 0:
            raise PlanError("a mixture needs at least one dataset")
        arrays = []
        for d, counts in enumerate(anchor_counts):
            arr = np.asarray(counts)
            if arr.ndim != 1 or (len(arr) and (not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0)):
                raise PlanError(f"dataset {d}: anchor counts must be a 1-D array of integers >= 0, got {arr!r}")
            arrays.append(arr.astype(np.int64, copy=False))
        episode_counts = np.array([len(a) for a in arrays], dtype=np.int64)
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum(episode_counts, out=offsets[1:])
        return cls(
            episode_counts=_frozen(episode_counts),
            episode_offsets=_frozen(offsets),
            anchor_counts=_frozen(np.concatenate(arrays)),
            dataset_anchors=_frozen(np.array([int(a.sum()) for a in arrays], dtype=np.int64)),
        )

    @property
    def num_datasets(self) -> int:
        return len(self.episode_counts)

    @property
    def num_episodes(self) -> int:
        return int(self.episode_offsets[-1])

    @property
    def num_anchors(self) -> int:
        return int(self.dataset_anchors.sum())

    def to_local(self, global_episode: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(dataset, local episode)`` int64 arrays for global episode ids.

        Raises:
            PlanError: an id outside ``[0, num_episodes)``.
        """
        g = np.asarray(global_episode, dtype=np.int64)
        if g.size and (g.min() < 0 or g.max() >= self.num_episodes):
            raise PlanError(f"global episodes must be in [0, {self.num_episodes}), got range [{g.min()}, {g.max()}]")
        # side="right" skips datasets without episodes (equal consecutive offsets).
        dataset = np.searchsorted(self.episode_offsets, g, side="right") - 1
        return dataset, g - self.episode_offsets[dataset]

    def to_global(self, dataset: np.ndarray | int, local_episode: np.ndarray | int) -> np.ndarray:
        """Return global episode ids (int64) for ``(dataset, local episode)`` pairs.

        Raises:
            PlanError: a dataset or local episode out of range.
        """
        d = np.asarray(dataset, dtype=np.int64)
        e = np.asarray(local_episode, dtype=np.int64)
        if d.size and (d.min() < 0 or d.max() >= self.num_datasets):
            raise PlanError(f"datasets must be in [0, {self.num_datasets}), got range [{d.min()}, {d.max()}]")
        bad = (e < 0) | (e >= self.episode_counts[d])
        if bad.any():
            i = int(np.flatnonzero(np.atleast_1d(bad))[0])
            raise PlanError(
                f"local episode {int(np.atleast_1d(e)[i])} is outside dataset {int(np.atleast_1d(d)[i])}'s "
                f"{int(self.episode_counts[np.atleast_1d(d)[i]])} episodes"
            )
        return self.episode_offsets[d] + e


class MixtureDraws(NamedTuple):
    """Draws of one consumer, each (n,) int64 or bool, in draw order.

    Attributes:
        dataset: dataset of each draw.
        cycle: the source's cycle (weighted mode; always 0 in proportional mode).
        episode: local episode index inside the dataset (position in its anchor counts).
        anchor: anchor position inside the episode's anchor list.
        piece: piece index inside the (dataset, cycle) schedule (proportional mode: inside
            the consumer's single schedule).
        first: the draw is its piece's first: the episode must be admitted.
        last: the draw is its piece's last: the episode can be evicted after it.
    """

    dataset: np.ndarray
    cycle: np.ndarray
    episode: np.ndarray
    anchor: np.ndarray
    piece: np.ndarray
    first: np.ndarray
    last: np.ndarray


def plan_proportional(
    layout: MixtureLayout, *, seed: int, epoch: int, world_size: int, workers_per_rank: int, shuffle: bool = True
) -> EpochPlan:
    """Plan an exactly-once epoch over the union: ``plan_epoch`` of the global episodes.

    The plan's ``piece_episode`` holds global episode ids; map them with
    ``layout.to_local``. Raises ``PlanError`` like ``plan_epoch``.
    """
    return plan_epoch(
        layout.anchor_counts, seed=seed, epoch=epoch, world_size=world_size, workers_per_rank=workers_per_rank, shuffle=shuffle
    )


class ProportionalConsumerSchedule:
    """One consumer's draws in a proportional plan, as ``MixtureDraws`` (cycle always 0).

    Args:
        plan: from ``plan_proportional``.
        layout: the layout the plan was built from.
        consumer: ``rank * workers_per_rank + worker`` in the plan's job shape.
        pool_size: episodes open at once over all datasets together.

    Raises:
        PlanError: consumer or pool_size out of range.
    """

    def __init__(self, plan: EpochPlan, layout: MixtureLayout, consumer: int, *, pool_size: int, block_size: int = POOL_BLOCK_SIZE):
        if len(layout.anchor_counts) != len(plan.episode_order):
            raise PlanError(f"plan has {len(plan.episode_order)} episodes but the layout {len(layout.anchor_counts)}")
        self.layout, self.consumer = layout, int(consumer)
        self.schedule = PoolSchedule.from_plan(plan, consumer, pool_size=pool_size, block_size=block_size)

    def __len__(self) -> int:
        return len(self.schedule)

    def draws(self, start: int, stop: int) -> MixtureDraws:
        """Return draws ``[start, stop)``. Raises ``PlanError`` outside ``[0, len(self)]``."""
        piece, anchor = self.schedule.draws(start, stop)
        first, last = _piece_flags(self.schedule, start, stop, piece)
        dataset, episode = self.layout.to_local(self.schedule.piece_episode[piece])
        return MixtureDraws(dataset, np.zeros(len(piece), np.int64), episode, anchor, piece, first, last)


def source_pool_sizes(weights: np.ndarray, pool_size: int) -> np.ndarray:
    """Split a consumer's pool over sources: ``max(1, round(pool_size * p_d))``, 0 for weight 0.

    Returns (sources,) int64. See the module docstring for the bound and the rationale.

    Raises:
        PlanError: bad weights or ``pool_size < 1``.
    """
    w = _check_weights(weights)
    if not isinstance(pool_size, (int, np.integer)) or isinstance(pool_size, bool) or pool_size < 1:
        raise PlanError(f"pool_size must be an int >= 1, got {pool_size!r}")
    sizes = np.maximum(1, np.rint(pool_size * w / w.sum())).astype(np.int64)
    return np.where(w > 0, sizes, 0)


def cycle_key(epoch: int, dataset: int, cycle: int) -> int:
    """The ``epoch`` argument of source ``dataset``'s ``cycle``-th plan in ``epoch``.

    A 63-bit hash of ``(epoch, dataset, cycle)``: distinct sources and cycles get
    independent episode orders, and no (epoch, cycle) pair aliases another.
    """
    state = np.random.SeedSequence([int(epoch), int(dataset), int(cycle), _CYCLE_TAG]).generate_state(2, np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


@dataclass(frozen=True, eq=False)
class WeightedMixturePlan:
    """One epoch of weighted draws for every consumer (arithmetic only; build with ``create``).

    Attributes:
        layout: the datasets' episodes.
        weights: (D,) float64 normalized weights.
        samples_per_epoch, seed, epoch, world_size, workers_per_rank, shuffle: the inputs.
        pool_size: total pool budget of a consumer (split by ``source_pool_sizes``).
        block_size: the ``SourceLabels`` block size.
        per_rank_count: ``samples_per_epoch // world_size``, identical on every rank.
        consumer_counts: (C,) int64 draws per consumer, rank-major.
        cycle_shares: (D, C) int64 anchors consumer ``c`` draws from one cycle of source ``d``.
        pool_sizes: (D,) int64 slots of each source in a consumer's pool.
        names: dataset names, for error messages.
    """

    layout: MixtureLayout
    weights: np.ndarray
    samples_per_epoch: int
    seed: int
    epoch: int
    world_size: int
    workers_per_rank: int
    shuffle: bool
    pool_size: int
    block_size: int
    per_rank_count: int
    consumer_counts: np.ndarray
    cycle_shares: np.ndarray
    pool_sizes: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def create(
        cls,
        layout: MixtureLayout,
        weights: Sequence[float] | np.ndarray,
        *,
        samples_per_epoch: int,
        seed: int,
        epoch: int,
        world_size: int,
        workers_per_rank: int,
        shuffle: bool = True,
        pool_size: int = 16,
        block_size: int = DEFAULT_BLOCK,
        names: Sequence[str] | None = None,
    ) -> WeightedMixturePlan:
        """Validate the inputs and compute the per-consumer counts and cycle shares.

        Raises:
            PlanError: weights of the wrong length or invalid, ``samples_per_epoch < 1``, a
                bad job shape, or a dataset with a positive weight whose cycle gives some
                consumer no anchor (fewer anchors than consumers): it could never be drawn
                there. Names the dataset.
        """
        w = _check_weights(weights)
        names = tuple(names) if names is not None else tuple(f"#{d}" for d in range(layout.num_datasets))
        if len(w) != layout.num_datasets or len(names) != layout.num_datasets:
            raise PlanError(f"{len(w)} weights and {len(names)} names for {layout.num_datasets} datasets")
        for name, value, low in (("samples_per_epoch", samples_per_epoch, 1), ("seed", seed, 0), ("epoch", epoch, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise PlanError(f"{name} must be an int >= {low}, got {value!r}")
        requested = split_stream(np.array([samples_per_epoch]), world_size=world_size, workers_per_rank=workers_per_rank)
        shares = np.stack(
            [
                split_stream(np.array([n]), world_size=world_size, workers_per_rank=workers_per_rank).consumer_counts
                for n in layout.dataset_anchors
            ]
        )
        starved = (w > 0) & (shares.min(axis=1) == 0)
        if starved.any():
            d = int(np.flatnonzero(starved)[0])
            raise PlanError(
                f"dataset {names[d]!r} has {int(layout.dataset_anchors[d])} anchors, fewer than the "
                f"{world_size * workers_per_rank} consumers (world_size {world_size} x {workers_per_rank} workers) "
                f"need to each get one per cycle; give it weight 0, drop it, or use fewer workers"
            )
        return cls(
            layout=layout,
            weights=_frozen(w / w.sum()),
            samples_per_epoch=int(samples_per_epoch),
            seed=int(seed),
            epoch=int(epoch),
            world_size=int(world_size),
            workers_per_rank=int(workers_per_rank),
            shuffle=bool(shuffle),
            pool_size=int(pool_size),
            block_size=int(block_size),
            per_rank_count=requested.per_rank_count,
            consumer_counts=requested.consumer_counts,
            cycle_shares=_frozen(shares),
            pool_sizes=_frozen(source_pool_sizes(w, pool_size)),
            names=names,
        )

    @property
    def num_consumers(self) -> int:
        return self.world_size * self.workers_per_rank

    def source_plan(self, dataset: int, cycle: int) -> EpochPlan:
        """Return cycle ``cycle`` of source ``dataset``: its anchors split over all consumers."""
        lo, hi = self.layout.episode_offsets[dataset], self.layout.episode_offsets[dataset + 1]
        return plan_epoch(
            self.layout.anchor_counts[lo:hi],
            seed=self.seed,
            epoch=cycle_key(self.epoch, dataset, cycle),
            world_size=self.world_size,
            workers_per_rank=self.workers_per_rank,
            shuffle=self.shuffle,
        )

    def consumer(self, consumer: int) -> WeightedConsumerSchedule:
        """Return consumer ``consumer``'s draw sequence. Raises ``PlanError`` if out of range."""
        return WeightedConsumerSchedule(self, consumer)


class WeightedConsumerSchedule:
    """One consumer's weighted draws: source labels, then each source's cycle schedules.

    Keeps one ``PoolSchedule`` per source (its current cycle): memory is O(sources + the
    current cycles' pieces). Not thread-safe (caches).
    """

    def __init__(self, plan: WeightedMixturePlan, consumer: int):
        if not isinstance(consumer, (int, np.integer)) or not 0 <= consumer < plan.num_consumers:
            raise PlanError(f"consumer must be in [0, {plan.num_consumers}), got {consumer!r}")
        self.plan, self.consumer = plan, int(consumer)
        self.labels = SourceLabels(plan.weights, seed=plan.seed, epoch=plan.epoch, consumer=self.consumer, block_size=plan.block_size)
        self._schedules: dict[int, tuple[int, PoolSchedule]] = {}

    def __len__(self) -> int:
        return int(self.plan.consumer_counts[self.consumer])

    def source_schedule(self, dataset: int, cycle: int) -> PoolSchedule:
        """Return this consumer's ``PoolSchedule`` over its share of source ``dataset``'s cycle."""
        cached = self._schedules.get(dataset)
        if cached is not None and cached[0] == cycle:
            return cached[1]
        schedule = PoolSchedule.from_plan(
            self.plan.source_plan(dataset, cycle), self.consumer, pool_size=int(max(1, self.plan.pool_sizes[dataset]))
        )
        self._schedules[dataset] = (cycle, schedule)
        return schedule

    def draws(self, start: int, stop: int) -> MixtureDraws:
        """Return draws ``[start, stop)`` (``0 <= start <= stop <= len(self)``).

        Cost: the source labels (O(start / block_size) to reach ``start``), plus per source
        drawn one ``PoolSchedule.draws`` per cycle met (a new cycle builds its plan:
        O(episodes log episodes) of that source).

        Raises:
            PlanError: the range is outside ``[0, len(self)]``.
        """
        if not 0 <= start <= stop <= len(self):
            raise PlanError(f"draw range [{start}, {stop}) must satisfy 0 <= start <= stop <= {len(self)}")
        n = stop - start
        dataset, rank = self.labels.labels(start, stop)
        cycle, episode, anchor, piece = (np.zeros(n, np.int64) for _ in range(4))
        first, last = np.zeros(n, bool), np.zeros(n, bool)
        order = np.argsort(dataset, kind="stable")
        bounds = np.searchsorted(dataset[order], np.arange(self.plan.layout.num_datasets + 1))
        for d in np.flatnonzero(np.diff(bounds)).tolist():
            where = order[bounds[d] : bounds[d + 1]]  # draws of source d, in draw order
            share = int(self.plan.cycle_shares[d, self.consumer])
            cyc, pos = np.divmod(rank[where], share)
            # Ranks are consecutive, so each cycle met is one contiguous run of positions.
            for run in np.split(np.arange(len(where)), np.flatnonzero(np.diff(cyc)) + 1):
                k, p0 = int(cyc[run[0]]), int(pos[run[0]])
                p1 = p0 + len(run)
                schedule = self.source_schedule(d, k)
                pc, an = schedule.draws(p0, p1)
                fi, la = _piece_flags(schedule, p0, p1, pc)
                at = where[run]
                cycle[at], piece[at], anchor[at] = k, pc, an
                episode[at] = schedule.piece_episode[pc]
                first[at], last[at] = fi, la
        return MixtureDraws(dataset, cycle, episode, anchor, piece, first, last)


def admission_order(draws: MixtureDraws) -> list[tuple[int, int]]:
    """Return the ``(dataset, episode)`` pieces the draws need, in the order first needed.

    Pieces already open at the range's start (their first draw is earlier) are included at
    their first appearance, so a reader can prefetch exactly this list.
    """
    key = np.stack([draws.dataset, draws.cycle, draws.piece], axis=1)
    _, first_index = np.unique(key, axis=0, return_index=True)
    first_index.sort()
    return list(zip(draws.dataset[first_index].tolist(), draws.episode[first_index].tolist()))


def _piece_flags(schedule: PoolSchedule, start: int, stop: int, piece: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) bool flags of draws ``[start, stop)`` of ``schedule``."""
    if stop == start:
        return np.zeros(0, bool), np.zeros(0, bool)
    spans = schedule.admission_order(start, stop)
    first_draw = np.full(schedule.num_pieces, -1, dtype=np.int64)
    last_draw = np.full(schedule.num_pieces, -1, dtype=np.int64)
    first_draw[spans.piece], last_draw[spans.piece] = spans.first_draw, spans.last_draw
    t = np.arange(start, stop, dtype=np.int64)
    return first_draw[piece] == t, last_draw[piece] == t


def _occurrence(labels: np.ndarray, num_labels: int) -> np.ndarray:
    """For each position, how many earlier positions hold the same label."""
    by_label = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=num_labels)
    occurrence = np.empty(len(labels), dtype=np.int64)
    occurrence[by_label] = np.arange(len(labels)) - np.repeat(np.cumsum(counts) - counts, counts)
    return occurrence


def _check_weights(weights: Sequence[float] | np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0 or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise PlanError(f"weights must be a non-empty 1-D array of non-negative numbers with a positive sum, got {w}")
    return w


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


def weighted_segment_blocks(plan: WeightedMixturePlan, segments: list[tuple[int, int, int]], *, block: int = 4096):
    """Each segment ``(plan consumer, start, stop)`` of a weighted plan as blocks of
    ``(admitted, draws)`` in the form ``reader.runtime.consumer.Consumer`` serves (see
    ``reader.plan.consumer_draws.segment_blocks``). Admissions cover the block and the one
    after it, so prefetch runs a block ahead of the draws.
    """

    def one(consumer: int, start: int, stop: int):
        schedule = plan.consumer(consumer)
        upcoming = schedule.draws(start, min(stop, start + block)) if start < stop else None
        reported: set[tuple[int, int, int]] = set()
        for lo in range(start, stop, block):
            hi = min(stop, lo + block)
            draws = upcoming
            upcoming = schedule.draws(hi, min(stop, hi + block)) if hi < stop else None
            admitted = []
            for batch in (draws, upcoming):
                if batch is None:
                    continue
                key = np.stack([batch.dataset, batch.cycle, batch.piece], axis=1)
                _, first = np.unique(key, axis=0, return_index=True)
                for i in np.sort(first).tolist():
                    piece = (int(batch.dataset[i]), int(batch.cycle[i]), int(batch.piece[i]))
                    if piece not in reported:
                        reported.add(piece)
                        admitted.append((piece[0], int(batch.episode[i])))
            yield admitted, list(
                zip(draws.dataset.tolist(), draws.episode.tolist(), draws.anchor.tolist(), draws.last.tolist())
            )

    return (one(consumer, start, stop) for consumer, start, stop in segments)
