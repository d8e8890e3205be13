"""Weighted source selection for mixtures: pure numpy, instant skip-ahead.

A consumer's draw ``t`` comes from source ``label(t)``. Labels are generated in blocks:
block ``b``'s per-source counts are a multinomial draw with the weights (from an RNG seeded
by (seed, epoch, consumer, b)), then permuted within the block. The counts before any
position ``p`` therefore cost O(p / block_size * sources): resuming at 1e7 is instant, and
which source a draw came from is a pure function of the RNG, never of I/O.
"""

from __future__ import annotations

import numpy as np

from reader.epoch_plan import PlanError

DEFAULT_BLOCK = 65536
_TAG = 0x6D6978  # "mix": separates these streams from other seeded streams


class SourceLabels:
    """Source labels of one consumer's weighted draws."""

    def __init__(self, weights: np.ndarray, *, seed: int, epoch: int, consumer: int, block_size: int = DEFAULT_BLOCK):
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim != 1 or len(weights) == 0 or (weights < 0).any() or weights.sum() <= 0:
            raise PlanError(f"weights must be a non-empty 1-D array of non-negative numbers with a positive sum, got {weights}")
        self.p = weights / weights.sum()
        self.seed, self.epoch, self.consumer, self.block_size = seed, epoch, consumer, block_size
        self._counts: list[np.ndarray] = []  # per block

    def _rng(self, block: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, self.consumer, block, _TAG])

    def _block_counts(self, block: int) -> np.ndarray:
        while len(self._counts) <= block:
            self._counts.append(self._rng(len(self._counts)).multinomial(self.block_size, self.p))
        return self._counts[block]

    def _block_labels(self, block: int) -> np.ndarray:
        counts = self._block_counts(block)
        labels = np.repeat(np.arange(len(counts)), counts)
        rng = self._rng(block)
        rng.multinomial(self.block_size, self.p)  # advance past the counts draw
        return labels[rng.permutation(len(labels))]

    def counts_before(self, position: int) -> np.ndarray:
        """(sources,) draws of each source in [0, position)."""
        block, within = divmod(position, self.block_size)
        total = np.zeros(len(self.p), dtype=np.int64)
        for b in range(block):
            total += self._block_counts(b)
        if within:
            total += np.bincount(self._block_labels(block)[:within], minlength=len(self.p))
        return total

    def labels(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Labels of draws [start, stop) and each draw's rank within its source's stream."""
        if not 0 <= start <= stop:
            raise PlanError(f"need 0 <= start <= stop, got [{start}, {stop})")
        seen = self.counts_before(start)
        out_labels, out_ranks = [], []
        position = start
        while position < stop:
            block, within = divmod(position, self.block_size)
            take = min(stop - position, self.block_size - within)
            labels = self._block_labels(block)[within : within + take]
            ranks = np.empty(take, dtype=np.int64)
            for source in np.unique(labels):
                where = labels == source
                ranks[where] = seen[source] + np.arange(where.sum())
                seen[source] += where.sum()
            out_labels.append(labels)
            out_ranks.append(ranks)
            position += take
        if not out_labels:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_labels), np.concatenate(out_ranks)
