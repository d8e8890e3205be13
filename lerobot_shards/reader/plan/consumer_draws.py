"""One consumer segment's draws as episode coordinates (pure: plan + schedule, no I/O).

Shared by ``PackedDataset`` and ``MixtureDataset``: which episode position and anchor each
draw reads, whether it is that piece's last draw (so the pool can evict), and the order in
which episodes are first needed (so prefetch fetches exactly what comes next).

The admission order is found lazily, a window of draws at a time, just far enough ahead of
the draws being made: starting an iterator (an epoch, or a resume at any offset) then costs
the same whatever the segment's length, instead of one pass over every remaining draw.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lerobot_shards.reader.plan.epoch_plan import EpochPlan
from lerobot_shards.reader.plan.mixture_plan import PieceMap
from lerobot_shards.reader.plan.pool_schedule import PoolSchedule

_DRAW_BLOCK = 4096
# Admissions are looked for at most this many draws ahead: with very long pieces the next
# admissions may lie far away, and scanning to them would cost a pass over the draws between.
# Minutes of training at any realistic sample rate, so prefetch still starts in time.
MAX_LOOKAHEAD_DRAWS = 1 << 18


class Segment(NamedTuple):
    """A piece of a planned consumer's stream that this consumer serves: draws
    ``[start, stop)`` of plan consumer ``consumer`` (one phase of an epoch)."""

    consumer: int
    start: int
    stop: int


def first_draws(segments: list[Segment], count: int) -> list[Segment]:
    """The segments cut to their first ``count`` draws in all (a consumer's first batch)."""
    out = []
    for segment in segments:
        if count <= 0:
            break
        stop = min(segment.stop, segment.start + count)
        out.append(Segment(segment.consumer, segment.start, stop))
        count -= stop - segment.start
    return out


class Admission(NamedTuple):
    """A piece entering the pool: the piece and the catalog episode it reads."""

    piece: int
    episode: int


class Draw(NamedTuple):
    """One sample to make: its piece, catalog episode, anchor position in the episode's anchor
    list, and whether it is the piece's last draw (the pool then releases the piece)."""

    piece: int
    episode: int
    anchor: int
    last: bool


class Block(NamedTuple):
    """A stretch of a segment's draws and the pieces first needed from it on, in order (so
    prefetch fetches exactly what comes next)."""

    admitted: list[Admission]
    draws: list[Draw]


@dataclass
class SegmentDraws:
    """Draws ``[start, stop)`` of ``consumer`` in ``plan``."""

    plan: EpochPlan
    consumer: int
    start: int
    stop: int
    pool_size: int

    def __post_init__(self) -> None:
        self._schedule = PoolSchedule.from_plan(self.plan, self.consumer, pool_size=self.pool_size)
        self._episode_of_piece = self.plan.pieces_of(self.consumer)[0]  # schedule pieces are consumer-local
        self._last_draw: dict[int, int] = {}  # piece -> its last draw, for every admitted piece
        self._admitted: list[int] = []  # episode positions, in the order first needed
        self._first_draws: list[int] = []  # (ascending) first draw of each admitted piece
        self._scanned = self.start  # admissions are known for pieces drawn in [start, _scanned)
        self._window = self._schedule.block_size

    @property
    def admission(self) -> list[int]:
        """Episode positions of the whole segment in the order first needed (scans it all)."""
        self._scan(self.stop)
        return list(self._admitted)

    def _scan(self, until: int) -> None:
        """Learn the pieces first drawn in ``[_scanned, until)`` (and their last draws)."""
        until = min(until, self.stop)
        if until <= self._scanned:
            return
        spans = self._schedule.admission_order(self._scanned, until)
        for piece, first, last in zip(spans.piece.tolist(), spans.first_draw.tolist(), spans.last_draw.tolist()):
            if piece in self._last_draw:
                continue  # met an earlier window too; pieces come sorted by first draw
            self._last_draw[piece] = last
            self._admitted.append(int(self._episode_of_piece[piece]))
            self._first_draws.append(max(first, self.start))
        self._scanned = until

    def _scan_ahead(self, draw: int, ahead: int) -> None:
        """Scan past ``draw`` until ``ahead`` pieces first drawn at or after it are known, or
        ``MAX_LOOKAHEAD_DRAWS`` draws past it are scanned."""
        self._scan(draw)
        limit = min(self.stop, draw + MAX_LOOKAHEAD_DRAWS)
        while self._scanned < limit and len(self._first_draws) - bisect.bisect_left(self._first_draws, draw) < ahead:
            self._scan(min(limit, self._scanned + self._window))
            self._window = min(2 * self._window, MAX_LOOKAHEAD_DRAWS)  # long pieces: few scans

    def blocks(self, *, ahead: int = 1) -> Iterator[tuple[list[int], list[tuple[int, int, bool]]]]:
        """Yield ``(newly admitted episode positions, draws)`` per block of draws.

        ``draws`` are ``(episode position, anchor position, is the piece's last draw)``.
        Before each block, admissions are known for every piece the block draws and for at
        least ``ahead`` pieces first drawn after it (fewer near the segment's end or when
        they lie more than ``MAX_LOOKAHEAD_DRAWS`` draws away), so a prefetcher given them
        in order can run ahead of the draws.
        """
        reported = 0
        for block_start in range(self.start, self.stop, _DRAW_BLOCK):
            block_stop = min(self.stop, block_start + _DRAW_BLOCK)
            self._scan(block_stop)
            self._scan_ahead(block_stop, ahead)
            admitted, reported = self._admitted[reported:], len(self._admitted)
            pieces, anchors = self._schedule.draws(block_start, block_stop)
            episode_of_piece, last_draw = self._episode_of_piece, self._last_draw
            draws = [
                (int(episode_of_piece[piece]), anchor, last_draw[piece] == block_start + offset)
                for offset, (piece, anchor) in enumerate(zip(pieces.tolist(), anchors.tolist()))
            ]
            yield admitted, draws

    def __iter__(self) -> Iterator[tuple[int, int, bool]]:
        """Yield ``(episode position, anchor position, is the piece's last draw)``."""
        for _, draws in self.blocks():
            yield from draws


def segment_blocks(
    plan: EpochPlan,
    segments: list[Segment],
    *,
    pool_size: int,
    ahead: int,
    pieces: PieceMap | None = None,
) -> Iterator[Iterator[Block]]:
    """Each segment as ``Block``s in the form ``lerobot_shards.reader.runtime.consumer.Consumer`` serves: the
    pieces first needed (at least ``ahead`` pieces beyond the block) and the block's draws.

    The plan's episodes are pieces. Without ``pieces`` each piece is a whole episode with the
    same number; with a ``PieceMap`` (a weighted mixture) a piece names its episode and its
    draws' anchor positions map to positions in the episode's anchor list (computed once per
    open piece, dropped after its last draw).
    """

    def one(consumer: int, start: int, stop: int):
        mapped: dict[int, np.ndarray] = {}

        def anchor(piece: int, position: int) -> int:
            if pieces is None or pieces.pieces.whole[piece]:
                return position
            table = mapped.get(piece)
            if table is None:
                table = mapped[piece] = pieces.anchors(piece, np.arange(int(pieces.pieces.counts[piece])))
            return int(table[position])

        episode_of = (lambda piece: piece) if pieces is None else pieces.episode
        for admitted, block in SegmentDraws(plan, consumer, start, stop, pool_size).blocks(ahead=ahead):
            draws = []
            for piece, position, last in block:
                draws.append(Draw(piece, episode_of(piece), anchor(piece, position), last))
                if last:
                    mapped.pop(piece, None)
            yield Block([Admission(piece, episode_of(piece)) for piece in admitted], draws)

    return (one(consumer, start, stop) for consumer, start, stop in segments)
