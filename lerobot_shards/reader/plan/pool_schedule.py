"""One consumer's draw order through its pieces, with a bounded episode pool.

A consumer owns a list of pieces (episode anchor ranges, from the epoch plan) and keeps at
most ``pool_size`` of them open. The draw order is a pure function of (seed, epoch,
consumer, piece lengths): it never depends on I/O timing, so a resumed run recomputes it
and skips ahead instantly.

Design ("slots"):

* There are ``P = min(pool_size, pieces)`` slots. Pieces go to slots in plan order, each to
  the slot with the smallest anchor load so far (ties: lowest slot), so slots drain at
  about the same time. A slot serves its pieces one after another, so at most ``P`` pieces
  are open at any draw: a hard memory bound for the reader's pool.
* The draw sequence is a uniformly random interleaving of the slot streams, i.e. a uniform
  random permutation of the multiset ``{s repeated L_s times}`` (``L_s`` = anchors of slot
  ``s``). Draw ``t`` labelled ``s`` takes the next anchor of slot ``s``.
* Inside a piece the anchors come in a random permutation keyed by (seed, epoch, episode,
  piece_start): it does not depend on which consumer holds the piece.
* Skip-ahead: labels are generated in blocks of ``block_size`` draws. A block's per-slot
  counts are a multivariate hypergeometric draw from the slots' remaining counts, and the
  labels are shuffled inside the block; this is exactly a uniform permutation of the
  multiset. Reaching draw ``p`` costs O(p / block_size) small hypergeometric draws plus
  one block: the block-start counts are a running sum, cached once computed.

With ``shuffle=False`` there is one slot and no permutation: anchors come in plan order.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from lerobot_shards.reader.plan.epoch_plan import EpochPlan, PlanError

DEFAULT_BLOCK_SIZE = 65536

# Tags keep the reader's seeded streams apart: the same (seed, epoch, consumer, block)
# must not seed both the block counts and the block shuffle.
_COUNTS_TAG = 0x504F_4F4C  # "POOL"
_LABELS_TAG = 0x4C41_424C  # "LABL"
_PIECE_PERM_TAG = 0x5045_524D  # "PERM"

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1


class PieceSpans(NamedTuple):
    """Pieces with the draws that need them, ordered by first draw.

    Attributes:
        piece: (n,) int64 piece indices (into the schedule's piece arrays).
        first_draw: (n,) int64 draw number of the piece's first anchor.
        last_draw: (n,) int64 draw number of the piece's last anchor (inclusive); after it
            the piece can be evicted.
    """

    piece: np.ndarray
    first_draw: np.ndarray
    last_draw: np.ndarray


class PoolSchedule:
    """The draw sequence of one consumer.

    Args:
        piece_episode: (pieces,) episode of each piece, in plan order.
        piece_start, piece_stop: (pieces,) half-open anchor-position range of each piece.
            Empty pieces are allowed and never drawn.
        pool_size: most pieces open at once, ``>= 1``.
        seed, epoch: non-negative ints, the plan's.
        consumer: non-negative consumer id; seeds the interleaving.
        shuffle: interleave ``pool_size`` slots and permute inside pieces; ``False`` draws
            every anchor in plan order.
        block_size: draws per skip-ahead block, ``>= 1``. Part of the sequence's
            definition: changing it changes the order.

    Raises:
        PlanError: arrays of different shapes, a negative or reversed range, or an
            out-of-range scalar.

    Not thread-safe: ``draws`` and ``admission_order`` fill internal caches.
    """

    def __init__(
        self,
        piece_episode: np.ndarray,
        piece_start: np.ndarray,
        piece_stop: np.ndarray,
        *,
        pool_size: int,
        seed: int,
        epoch: int,
        consumer: int,
        shuffle: bool,
        block_size: int = DEFAULT_BLOCK_SIZE,
    ) -> None:
        episode = np.asarray(piece_episode, dtype=np.int64)
        start = np.asarray(piece_start, dtype=np.int64)
        stop = np.asarray(piece_stop, dtype=np.int64)
        if not (episode.ndim == start.ndim == stop.ndim == 1 and len(episode) == len(start) == len(stop)):
            raise PlanError(
                f"piece_episode, piece_start, piece_stop must be 1-D of one length, got shapes "
                f"{episode.shape}, {start.shape}, {stop.shape}"
            )
        if len(start) and (start.min() < 0 or (stop < start).any()):
            bad = int(np.flatnonzero((start < 0) | (stop < start))[0])
            raise PlanError(f"piece {bad} has range [{int(start[bad])}, {int(stop[bad])}); expected 0 <= start <= stop")
        for name, value, low in (
            ("pool_size", pool_size, 1),
            ("block_size", block_size, 1),
            ("seed", seed, 0),
            ("epoch", epoch, 0),
            ("consumer", consumer, 0),
        ):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise PlanError(f"{name} must be an int >= {low}, got {value!r}")

        self.seed, self.epoch, self.consumer = int(seed), int(epoch), int(consumer)
        self.shuffle = bool(shuffle)
        self.pool_size, self.block_size = int(pool_size), int(block_size)
        self.piece_episode, self.piece_start, self.piece_stop = episode, start, stop
        lengths = stop - start
        nonempty = np.flatnonzero(lengths > 0)
        self.num_slots = min(self.pool_size if self.shuffle else 1, len(nonempty))

        # slot_of_piece: (pieces,) slot of each piece, -1 for empty pieces.
        self.slot_of_piece = np.full(len(lengths), -1, dtype=np.int64)
        self.slot_of_piece[nonempty] = _assign_slots(lengths[nonempty], self.num_slots)
        # Slot-major flat layout: the slot streams laid end to end, slot s's pieces in plan
        # order at global positions [slot_base[s], slot_base[s+1]), so one searchsorted
        # maps (slot, k-th draw of the slot) to a piece.
        self._flat_piece = nonempty[np.argsort(self.slot_of_piece[nonempty], kind="stable")]
        flat_len = lengths[self._flat_piece]
        self._flat_end = np.cumsum(flat_len, dtype=np.int64)
        self._flat_begin = self._flat_end - flat_len
        # slot_counts: (P,) anchors of each slot.
        self.slot_counts = np.zeros(self.num_slots, dtype=np.int64)
        np.add.at(self.slot_counts, self.slot_of_piece[nonempty], lengths[nonempty])
        self._slot_base = np.zeros(self.num_slots + 1, dtype=np.int64)
        np.cumsum(self.slot_counts, out=self._slot_base[1:])
        self._total = int(self._slot_base[-1])
        # Each piece's range inside its slot's stream, for occurrence lookups.
        self._local_begin = np.zeros(len(lengths), dtype=np.int64)
        self._local_begin[self._flat_piece] = self._flat_begin - self._slot_base[self.slot_of_piece[self._flat_piece]]
        self._local_end = self._local_begin + lengths

        self._num_blocks = -(-self._total // self.block_size)
        # _table[b]: per-slot draws before block b; rows 0.._filled are valid. Filled lazily
        # so a skip to draw p costs p / block_size hypergeometric draws; (blocks+1) x P int64.
        self._table = np.zeros((self._num_blocks + 1, self.num_slots), dtype=np.int64)
        self._filled = 0
        self._blocks: OrderedDict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = OrderedDict()
        self._perms: dict[int, np.ndarray] = {}
        if self.shuffle:
            self._piece_key = _mix(
                np.full(len(lengths), _PIECE_PERM_TAG, dtype=_U64),
                np.full(len(lengths), self.seed & _MASK64, dtype=_U64),
                np.full(len(lengths), self.epoch, dtype=_U64),
                episode.astype(_U64),
                start.astype(_U64),
            )

    @classmethod
    def from_plan(cls, plan: EpochPlan, consumer: int, *, pool_size: int, block_size: int = DEFAULT_BLOCK_SIZE) -> PoolSchedule:
        """Build the schedule of ``consumer`` in ``plan`` (seed, epoch, shuffle from the plan).

        Raises:
            PlanError: ``consumer`` is out of range, or ``pool_size``/``block_size`` < 1.
        """
        episode, start, stop = plan.pieces_of(consumer)
        return cls(
            episode,
            start,
            stop,
            pool_size=pool_size,
            seed=plan.seed,
            epoch=plan.epoch,
            consumer=consumer,
            shuffle=plan.shuffle,
            block_size=block_size,
        )

    def __len__(self) -> int:
        """Total draws: the anchors of all pieces."""
        return self._total

    @property
    def num_pieces(self) -> int:
        """Pieces of this consumer, empty ones included."""
        return len(self.piece_start)

    def draws(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Return draws ``[start, stop)``.

        Returns:
            ``(piece, anchor_pos)``: (stop - start,) int64 arrays; ``piece`` indexes this
            schedule's pieces, ``anchor_pos`` is the position in the episode's anchor list
            (inside ``[piece_start, piece_stop)``).

        Raises:
            PlanError: not ``0 <= start <= stop <= len(self)``.
        """
        self._check_range(start, stop)
        if start == stop:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if self.num_slots == 1:
            pos = np.arange(start, stop, dtype=np.int64)
        else:
            parts = []
            for b in range(start // self.block_size, (stop - 1) // self.block_size + 1):
                labels, _, occ = self._block(b)
                lo = max(start - b * self.block_size, 0)
                hi = min(stop - b * self.block_size, len(labels))
                lab = labels[lo:hi]
                parts.append(self._slot_base[lab] + self._table[b, lab] + occ[lo:hi])
            pos = np.concatenate(parts)
        idx = np.searchsorted(self._flat_end, pos, side="right")
        piece = self._flat_piece[idx]
        offset = pos - self._flat_begin[idx]
        if self.shuffle:
            offset = self._permuted(piece, offset, stop)
        return piece, self.piece_start[piece] + offset

    def slot_draws_before(self, t: int) -> np.ndarray:
        """Return (P,) int64: how many of draws ``[0, t)`` each slot made.

        Raises:
            PlanError: ``t`` not in ``[0, len(self)]``.
        """
        self._check_range(t, t)
        if t == self._total:
            return self.slot_counts.copy()
        if self.num_slots == 1:
            return np.array([t], dtype=np.int64)
        b, within = divmod(t, self.block_size)
        labels, _, _ = self._block(b)
        return self._table[b] + np.bincount(labels[:within], minlength=self.num_slots)

    def admission_order(self, start: int = 0, stop: int | None = None) -> PieceSpans:
        """Return the pieces needed by draws ``[start, stop)``, in the order first needed.

        A piece is needed when one of its draws falls in the range; pieces already open at
        ``start`` (first draw before it) come first. The reader prefetches in this order
        and evicts a piece after its ``last_draw``. ``stop`` defaults to ``len(self)``.

        Returns:
            ``PieceSpans`` sorted by ``first_draw``. Cost: the blocks of the range plus one
            block per distinct block holding a first or last draw outside it.

        Raises:
            PlanError: not ``0 <= start <= stop <= len(self)``.
        """
        stop = self._total if stop is None else stop
        self._check_range(start, stop)
        if start == stop:
            empty = np.zeros(0, dtype=np.int64)
            return PieceSpans(empty, empty, empty)
        before, upto = self.slot_draws_before(start), self.slot_draws_before(stop)
        flat = []
        for s in range(self.num_slots):
            # Pieces of slot s whose stream range meets [before[s], upto[s]).
            lo = np.searchsorted(self._flat_end, self._slot_base[s] + before[s], side="right")
            hi = np.searchsorted(self._flat_begin, self._slot_base[s] + upto[s], side="left")
            flat.append(np.arange(lo, hi, dtype=np.int64))
        piece = self._flat_piece[np.concatenate(flat)]
        slot = self.slot_of_piece[piece]
        first = self._draw_of_occurrence(slot, self._local_begin[piece])
        last = self._draw_of_occurrence(slot, self._local_end[piece] - 1)
        order = np.argsort(first, kind="stable")
        return PieceSpans(piece[order], first[order], last[order])

    def open_pieces_at(self, t: int) -> np.ndarray:
        """Return the pieces the pool holds while making draw ``t``: first <= t <= last.

        Returns:
            (n,) int64 piece indices, ``n <= min(pool_size, pieces)``, by first draw.

        Raises:
            PlanError: ``t`` not in ``[0, len(self))``.
        """
        if not 0 <= t < self._total:
            raise PlanError(f"draw t must be in [0, {self._total}), got {t}")
        return self.admission_order(t, t + 1).piece

    # -- internals ---------------------------------------------------------------------

    def _check_range(self, start: int, stop: int) -> None:
        if not 0 <= start <= stop <= self._total:
            raise PlanError(f"draw range [{start}, {stop}) must satisfy 0 <= start <= stop <= {self._total}")

    def _extend_table(self, upto_block: int) -> None:
        """Fill ``_table`` rows up to ``upto_block`` (inclusive)."""
        upto_block = min(upto_block, self._num_blocks)
        for b in range(self._filled, upto_block):
            size = min(self.block_size, self._total - b * self.block_size)
            rng = np.random.default_rng([self.seed, self.epoch, self.consumer, b, _COUNTS_TAG])
            # "marginals" is O(slots); the "count" method allocates O(remaining anchors).
            counts = rng.multivariate_hypergeometric(self.slot_counts - self._table[b], size, method="marginals")
            self._table[b + 1] = self._table[b] + counts
        self._filled = max(self._filled, upto_block)

    def _block(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return block ``b``'s ``(labels, by_label, occurrence)``, each (block draws,).

        ``labels[i]`` is draw ``b*block_size+i``'s slot, ``occurrence[i]`` how many earlier
        draws of the block share it, and ``by_label`` the draws sorted by (label, position).
        """
        cached = self._blocks.get(b)
        if cached is not None:
            self._blocks.move_to_end(b)
            return cached
        self._extend_table(b + 1)
        counts = self._table[b + 1] - self._table[b]
        labels = np.repeat(np.arange(self.num_slots, dtype=np.int32), counts)
        np.random.default_rng([self.seed, self.epoch, self.consumer, b, _LABELS_TAG]).shuffle(labels)
        by_label = np.argsort(labels, kind="stable").astype(np.int64)
        occurrence = np.empty(len(labels), dtype=np.int64)
        occurrence[by_label] = np.arange(len(labels)) - np.repeat(np.cumsum(counts) - counts, counts)
        self._blocks[b] = (labels, by_label, occurrence)
        # A few blocks cover sequential reads across a block edge and admission lookups.
        while len(self._blocks) > 4:
            self._blocks.popitem(last=False)
        return labels, by_label, occurrence

    def _draw_of_occurrence(self, slot: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Return the draw numbers at which slot ``slot[i]`` makes its ``k[i]``-th draw."""
        if self.num_slots == 1 or len(k) == 0:
            return k.astype(np.int64, copy=True)
        # Make sure the filled table reaches past every requested occurrence.
        step = 16
        while self._filled < self._num_blocks and (self._table[self._filled, slot] <= k).any():
            self._extend_table(self._filled + step)
            step *= 2
        block = np.empty(len(k), dtype=np.int64)
        for s in np.unique(slot):
            sel = slot == s
            block[sel] = np.searchsorted(self._table[: self._filled + 1, s], k[sel], side="right") - 1
        out = np.empty(len(k), dtype=np.int64)
        for b in np.unique(block):
            sel = block == b
            _, by_label, _ = self._block(int(b))
            counts = self._table[b + 1] - self._table[b]
            label_start = np.cumsum(counts) - counts
            s = slot[sel]
            out[sel] = b * self.block_size + by_label[label_start[s] + k[sel] - self._table[b, s]]
        return out

    def _permuted(self, piece: np.ndarray, offset: np.ndarray, stop: int) -> np.ndarray:
        """Map offsets inside pieces through each piece's anchor permutation."""
        uniq, inverse = np.unique(piece, return_inverse=True)
        missing = [int(u) for u in uniq if int(u) not in self._perms]
        if missing:
            self._perms.update(zip(missing, _piece_permutations(self._piece_key[missing], self._lengths(missing))))
        perms = [self._perms[int(u)] for u in uniq]
        sizes = np.array([len(p) for p in perms], dtype=np.int64)
        if sizes.sum() <= 4 * len(offset):
            # Short pieces: one gather from the concatenated permutations.
            base = np.cumsum(sizes) - sizes
            result = np.concatenate(perms)[base[inverse] + offset]
        else:
            # Long pieces read in small steps: gather per piece, never copy whole permutations.
            result = np.empty_like(offset)
            by_piece = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[by_piece], np.arange(len(uniq) + 1))
            for i, perm in enumerate(perms):
                sel = by_piece[bounds[i] : bounds[i + 1]]
                result[sel] = perm[offset[sel]]
        # Keep only pieces still unfinished at `stop`: sequential reads then hold at most
        # num_slots permutations, like the pool itself.
        done = self.slot_draws_before(stop)
        keys = np.fromiter(self._perms.keys(), dtype=np.int64, count=len(self._perms))
        finished = self._local_end[keys] <= done[self.slot_of_piece[keys]]
        if len(keys) - finished.sum() > 4 * self.num_slots:
            finished = ~np.isin(keys, uniq)
        for key in keys[finished].tolist():
            del self._perms[key]
        return result

    def _lengths(self, pieces: list[int]) -> np.ndarray:
        return self.piece_stop[pieces] - self.piece_start[pieces]


def _assign_slots(lengths: np.ndarray, num_slots: int) -> np.ndarray:
    """Greedy list scheduling: each piece, in order, to the least-loaded slot (ties: lowest).

    Returns (pieces,) int64 slots. O(pieces log slots); about 0.4 s per million pieces.
    """
    if num_slots <= 1:
        return np.zeros(len(lengths), dtype=np.int64)
    heap = [(0, s) for s in range(num_slots)]
    slots = []
    for length in lengths.tolist():
        load, s = heap[0]
        slots.append(s)
        heapq.heapreplace(heap, (load + length, s))
    return np.array(slots, dtype=np.int64)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    z = x + _GOLDEN
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


def _mix(*parts: np.ndarray) -> np.ndarray:
    h = np.zeros(len(parts[0]), dtype=_U64)
    for part in parts:
        h = _splitmix64(h ^ part)
    return h


def _piece_permutations(keys: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """Return one permutation of ``range(lengths[i])`` per piece, keyed by ``keys[i]``.

    Sorting counter-based SplitMix64 values is a uniform random permutation up to hash
    quality, and unlike one ``default_rng`` per piece (~45 us each) it vectorizes over the
    many short pieces a SQL filter can leave.
    """
    owner = np.repeat(np.arange(len(lengths)), lengths)
    begin = np.cumsum(lengths) - lengths
    pos = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(begin, lengths)
    values = _splitmix64(keys[owner] + pos.astype(_U64) * _GOLDEN)
    order = np.lexsort((values, owner))
    return np.split(pos[order], np.cumsum(lengths)[:-1])
