"""One consumer segment's draws as episode coordinates (pure: plan + schedule, no I/O).

Shared by ``PackedDataset`` and ``MixtureDataset``: which episode position and anchor each
draw reads, whether it is that piece's last draw (so the pool can evict), and the order in
which episodes are first needed (so prefetch fetches exactly what comes next).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from reader.epoch_plan import EpochPlan
from reader.pool_schedule import PoolSchedule

_DRAW_BLOCK = 4096


@dataclass
class SegmentDraws:
    """Draws ``[start, stop)`` of ``consumer`` in ``plan``.

    Attributes:
        admission: episode positions in the order they are first needed.
    """

    plan: EpochPlan
    consumer: int
    start: int
    stop: int
    pool_size: int

    def __post_init__(self) -> None:
        self._schedule = PoolSchedule.from_plan(self.plan, self.consumer, pool_size=self.pool_size)
        self._episode_of_piece = self.plan.pieces_of(self.consumer)[0]  # schedule pieces are consumer-local
        spans = self._schedule.admission_order(self.start, self.stop) if self.stop > self.start else None
        self._last_draw = dict(zip(spans.piece.tolist(), spans.last_draw.tolist())) if spans is not None else {}
        self.admission = [int(self._episode_of_piece[p]) for p in spans.piece] if spans is not None else []

    def __iter__(self) -> Iterator[tuple[int, int, bool]]:
        """Yield ``(episode position, anchor position, is the piece's last draw)``."""
        for block_start in range(self.start, self.stop, _DRAW_BLOCK):
            pieces, anchors = self._schedule.draws(block_start, min(self.stop, block_start + _DRAW_BLOCK))
            for offset, (piece, anchor) in enumerate(zip(pieces.tolist(), anchors.tolist())):
                yield int(self._episode_of_piece[piece]), anchor, self._last_draw.get(piece) == block_start + offset
