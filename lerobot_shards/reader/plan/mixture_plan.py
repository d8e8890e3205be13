"""Mixture planning: the pieces an epoch of a mixture draws from, as pure numpy.

An epoch of a mixture is ``plan_epoch`` over a list of **pieces**. A piece is one episode of
the mixture (a global episode id, ``MixtureLayout``) and a range ``[lo, hi)`` of its anchors,
taken in the order of one *cycle* through its dataset. Every property of one dataset's epoch
then holds for a mixture, in both modes: the exact split over ranks and workers with equal
per-rank counts, **one pool of ``pool_size`` pieces per consumer over all datasets
together**, resume and re-split by arithmetic (``lerobot_shards.reader.plan.resume``), exactly once.

**Proportional** (the default): every episode is one piece with all its anchors, so an epoch
is exactly once over the union of the datasets' anchors (``proportional_pieces``).

**Weighted** (weights ``w`` and ``samples_per_epoch`` S): source ``d`` gets a quota ``q_d``, the
largest-remainder apportionment of S by weight, so an epoch draws exactly ``q_d`` anchors of
``d`` (``source_quotas``). Each source streams its anchors in *cycles*: cycle ``c`` visits its
episodes in an order drawn from ``(seed, d, c)`` and each episode's anchors once; epoch ``e``
takes positions ``[e * q_d, (e + 1) * q_d)`` of that endless stream (``weighted_pieces``). A
source with fewer anchors than its quota is repeated (several cycles in one epoch); one with
more goes on, next epoch, where this one stopped. An episode cut by an epoch boundary becomes
two pieces whose anchor sets are disjoint: anchors of a cut episode are taken in an order
drawn from ``(seed, d, c, episode)`` (``PieceMap.anchors``).

Why pieces rather than drawing each sample's source at random: a draw-by-draw source label
keeps an episode of every source half-read at almost any time, so a consumer held at least
one open episode per source (398 per worker at 400 datasets). Pieces keep the pool at
``pool_size`` whatever the number of sources, and the per-epoch ratio of sources is exact, not
a binomial around the weights. Within a window of draws a consumer sees at most ``pool_size``
sources; over an epoch, each in its proportion (docs/DESIGN_NOTES.md §9).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lerobot_shards.reader.plan.epoch_plan import PlanError

_CYCLE_TAG = 0x4359_434C  # "CYCL": a source's episode order in one cycle
_ANCHOR_TAG = 0x414E_4348  # "ANCH": a cut episode's anchor order in one cycle


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


@dataclass(frozen=True, eq=False)
class EpochPieces:
    """The pieces of one epoch: (V,) int64 arrays, in the order given to ``plan_epoch``.

    Attributes:
        episode: the piece's global episode.
        cycle: the cycle of its dataset it belongs to (always 0 in proportional mode).
        lo, hi: its anchors are positions ``[lo, hi)`` of the episode's cycle order.
        whole: the piece holds all of the episode's anchors (its order is the identity).
    """

    episode: np.ndarray
    cycle: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    whole: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        """(V,) anchors per piece: what ``plan_epoch`` splits over the consumers."""
        return self.hi - self.lo

    def __len__(self) -> int:
        return len(self.episode)


def proportional_pieces(layout: MixtureLayout) -> EpochPieces:
    """Every episode once, whole: an epoch exactly once over the union (episodes without
    anchors stay as empty pieces, so piece ``i`` is global episode ``i``)."""
    n = layout.num_episodes
    zeros = np.zeros(n, np.int64)
    return EpochPieces(
        episode=_frozen(np.arange(n, dtype=np.int64)),
        cycle=_frozen(zeros),
        lo=_frozen(zeros.copy()),
        hi=_frozen(layout.anchor_counts.copy()),
        whole=_frozen(np.ones(n, bool)),
    )


def source_quotas(
    weights: Sequence[float] | np.ndarray,
    samples_per_epoch: int,
    *,
    dataset_anchors: np.ndarray,
    names: Sequence[str] | None = None,
) -> np.ndarray:
    """(D,) int64 anchors each source gives an epoch: ``samples_per_epoch`` split by weight,
    the remainder to the largest fractional parts (ties to the earlier source). Sums to
    ``samples_per_epoch`` exactly.

    Raises:
        PlanError: invalid weights (negative, not finite, none positive, wrong length),
            ``samples_per_epoch < 1``, or a source with a positive weight and no anchor
            (it could never be drawn; names it).
    """
    w = _check_weights(weights)
    anchors = np.asarray(dataset_anchors, dtype=np.int64)
    names = list(names) if names is not None else [f"#{d}" for d in range(len(anchors))]
    if len(w) != len(anchors) or len(names) != len(anchors):
        raise PlanError(f"{len(w)} weights and {len(names)} names for {len(anchors)} datasets")
    if not isinstance(samples_per_epoch, (int, np.integer)) or isinstance(samples_per_epoch, bool) or samples_per_epoch < 1:
        raise PlanError(f"samples_per_epoch must be an int >= 1, got {samples_per_epoch!r}")
    empty = (w > 0) & (anchors == 0)
    if empty.any():
        d = int(np.flatnonzero(empty)[0])
        raise PlanError(f"dataset {names[d]!r} has weight {w[d]:g} but no anchor: give it weight 0 or leave it out")
    exact = w / w.sum() * int(samples_per_epoch)
    quotas = np.floor(exact).astype(np.int64)
    remainder = int(samples_per_epoch) - int(quotas.sum())
    if remainder:
        order = np.lexsort((np.arange(len(w)), -(exact - quotas)))  # largest fraction first, then index
        quotas[order[:remainder]] += 1
    return quotas


def cycle_order(counts: np.ndarray, *, seed: int, dataset: int, cycle: int, shuffle: bool) -> np.ndarray:
    """Local episodes of one dataset (those with anchors) in the order cycle ``cycle`` visits them."""
    episodes = np.flatnonzero(np.asarray(counts) > 0)
    if not shuffle:
        return episodes
    return episodes[np.random.default_rng([int(seed), int(dataset), int(cycle), _CYCLE_TAG]).permutation(len(episodes))]


def weighted_pieces(
    layout: MixtureLayout,
    weights: Sequence[float] | np.ndarray,
    *,
    samples_per_epoch: int,
    seed: int,
    epoch: int,
    shuffle: bool = True,
    names: Sequence[str] | None = None,
) -> EpochPieces:
    """The pieces of weighted epoch ``epoch``: each source's quota, taken where its stream of
    cycles stands at the epoch's start (see the module docstring). Cost: O(episodes) per
    cycle met, i.e. O(quota / anchors + 1) cycles per source; reaching epoch ``e`` is O(1).

    Raises:
        PlanError: as ``source_quotas``, or a negative ``seed``/``epoch``.
    """
    for name, value in (("seed", seed), ("epoch", epoch)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise PlanError(f"{name} must be an int >= 0, got {value!r}")
    quotas = source_quotas(weights, samples_per_epoch, dataset_anchors=layout.dataset_anchors, names=names)
    parts: list[tuple[np.ndarray, ...]] = []
    for d in np.flatnonzero(quotas > 0).tolist():
        lo_episode, hi_episode = layout.episode_offsets[d], layout.episode_offsets[d + 1]
        counts = layout.anchor_counts[lo_episode:hi_episode]
        total = int(layout.dataset_anchors[d])
        cycle, offset = divmod(int(epoch) * int(quotas[d]), total)  # Python ints: no overflow at any epoch
        remaining = int(quotas[d])
        while remaining > 0:
            order = cycle_order(counts, seed=seed, dataset=d, cycle=cycle, shuffle=shuffle)
            ends = np.cumsum(counts[order])
            starts = ends - counts[order]
            first = int(np.searchsorted(ends, offset, side="right"))  # the episode holding position `offset`
            last = int(np.searchsorted(ends, offset + remaining, side="left"))  # the one holding the final position
            last = min(last, len(order) - 1)
            chosen = order[first : last + 1]
            lo = np.zeros(len(chosen), np.int64)
            hi = counts[chosen].astype(np.int64).copy()
            lo[0] = offset - starts[first]
            take_end = offset + remaining  # cycle position one past the last anchor taken here
            hi[-1] = min(hi[-1], take_end - starts[last])
            taken = int((hi - lo).sum())
            parts.append((lo_episode + chosen, np.full(len(chosen), cycle, np.int64), lo, hi, (lo == 0) & (hi == counts[chosen])))
            remaining -= taken
            cycle, offset = cycle + 1, 0
    if not parts:
        raise PlanError("no source has a positive quota")
    episode, cyc, lo, hi, whole = (np.concatenate(column) for column in zip(*parts))
    return EpochPieces(_frozen(episode.astype(np.int64)), _frozen(cyc), _frozen(lo), _frozen(hi), _frozen(whole.astype(bool)))


@dataclass(frozen=True, eq=False)
class PieceMap:
    """From a plan's pieces to what a reader fetches: the global episode of each piece and,
    for a draw's anchor position inside its piece, the position in the episode's anchor list.

    Whole pieces map positions to themselves (the pool schedule already draws them in random
    order); a cut piece maps through its episode's cycle order of anchors, so the two pieces
    of an episode cut by an epoch boundary never share an anchor.
    """

    pieces: EpochPieces
    layout: MixtureLayout
    seed: int
    shuffle: bool

    def episode(self, piece: int) -> int:
        return int(self.pieces.episode[piece])

    def anchors(self, piece: int, positions: np.ndarray) -> np.ndarray:
        """Anchor positions in the episode's anchor list for ``positions`` in piece ``piece``."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.pieces.whole[piece]:
            return positions
        episode = int(self.pieces.episode[piece])
        start = int(self.pieces.lo[piece])
        count = int(self.layout.anchor_counts[episode])
        if not self.shuffle:
            return start + positions
        dataset, local = self.layout.to_local(episode)
        key = [int(self.seed), int(dataset), int(self.pieces.cycle[piece]), int(local), _ANCHOR_TAG]
        return np.random.default_rng(key).permutation(count)[start + positions]


def _check_weights(weights: Sequence[float] | np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0 or not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise PlanError(f"weights must be a non-empty 1-D array of non-negative numbers with a positive sum, got {w}")
    return w


def _frozen(arr: np.ndarray) -> np.ndarray:
    arr.setflags(write=False)
    return arr


__all__ = [
    "EpochPieces",
    "MixtureLayout",
    "PieceMap",
    "cycle_order",
    "proportional_pieces",
    "source_quotas",
    "weighted_pieces",
]
