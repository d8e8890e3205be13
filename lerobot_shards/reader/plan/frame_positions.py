"""Random access as LeRobot numbers it: positions of a map-style dataset, pure arithmetic.

``LeRobotDataset[i]`` takes a *relative* position ``i`` in ``[0, num_frames)``: the rows of the
selected episodes in storage order (ascending episode, then frame). The sample's ``index`` is the
row's *absolute* (global) index, and ``absolute_to_relative_idx`` maps one to the other when a
selection leaves gaps (LeRobot 0.6.1 builds it as a dict of every frame; here it is a mapping
computed by binary search, a few bytes per episode, since a dict of 10^8 frames would not fit a
worker).

Everything here works on the episode catalog's columns (numpy arrays in catalog order): which
catalog episode and frame a position names, how a batch of positions groups by episode (so each
episode is fetched once and its frames decoded in presentation order), and the per-episode
bounds LeRobot's ``EpisodeAwareSampler`` reads from ``meta.episodes``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class FramePositions:
    """Positions ``[0, len)`` over episodes laid end to end: ``counts[e]`` positions each.

    Attributes:
        starts: ``(episodes + 1,)`` the first position of each episode, then the total.
    """

    starts: np.ndarray

    @classmethod
    def from_counts(cls, counts: Sequence[int] | np.ndarray) -> FramePositions:
        """Positions over episodes of ``counts`` frames each (catalog order)."""
        starts = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))]).astype(np.int64)
        starts.setflags(write=False)
        return cls(starts)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def normalized(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """``indices`` as positions in ``[0, len)``: negative ones count from the end, as a
        sequence's do.

        Raises:
            IndexError: an index outside ``[-len, len)``, or not an integer (named).
        """
        values = np.asarray(indices)
        if values.dtype.kind not in "iu" and not (values.dtype == object and all(_is_index(v) for v in values.ravel())):
            bad = next((v for v in values.ravel() if not _is_index(v)), values)
            raise IndexError(f"dataset indices must be integers, got {bad!r}")
        values = values.astype(np.int64).reshape(-1)
        total = len(self)
        wrapped = np.where(values < 0, values + total, values)
        outside = (wrapped < 0) | (wrapped >= total)
        if outside.any():
            raise IndexError(f"index {int(values[np.argmax(outside)])} is out of range for a dataset of {total} frames")
        return wrapped

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(episode, offset)`` of each position (``normalized`` ones): the catalog episode and
        the position's place among that episode's frames."""
        episode = np.searchsorted(self.starts, positions, side="right") - 1
        return episode, positions - self.starts[episode]


def _is_index(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class EpisodeGroup:
    """The part of a batch one episode serves.

    Attributes:
        episode: the catalog episode.
        slots: places in the batch, in ascending frame order (duplicates adjacent).
        frames: the frame of each slot, ascending.
    """

    episode: int
    slots: np.ndarray
    frames: np.ndarray


def group_by_episode(episodes: np.ndarray, frames: np.ndarray) -> list[EpisodeGroup]:
    """A batch's samples grouped by episode, episodes in the order the batch first names them,
    each group's frames ascending: an episode is fetched once and each of its members decodes
    its frames forwards (a decoder seeking backwards re-decodes from an earlier keyframe)."""
    episodes = np.asarray(episodes, dtype=np.int64)
    frames = np.asarray(frames, dtype=np.int64)
    if not len(episodes):
        return []
    order = np.lexsort((np.arange(len(frames)), frames, episodes))  # by episode, then frame, then batch place
    grouped = episodes[order]
    cuts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1], True])
    groups = [
        EpisodeGroup(int(grouped[a]), order[a:b], frames[order[a:b]]) for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist())
    ]
    first_seen = {int(e): i for i, e in reversed(list(enumerate(episodes.tolist())))}
    return sorted(groups, key=lambda g: first_seen[g.episode])


def chunk_groups(
    groups: list[EpisodeGroup], sizes: Sequence[int], *, max_bytes: int, max_episodes: int
) -> list[list[EpisodeGroup]]:
    """Consecutive runs of ``groups`` whose episodes' bytes (``sizes``, one per group) add up to
    at most ``max_bytes`` and number at most ``max_episodes``; a group larger than the bound
    alone makes a run of its own. A batch is read run by run, so what it holds open at once
    stays within the cache's bounds however many episodes it touches."""
    runs: list[list[EpisodeGroup]] = []
    held = 0
    for group, size in zip(groups, sizes, strict=True):
        if runs and runs[-1] and (held + size > max_bytes or len(runs[-1]) >= max_episodes):
            runs.append([])
            held = 0
        if not runs:
            runs.append([])
        runs[-1].append(group)
        held += int(size)
    return runs


class AbsoluteToRelative(Mapping[int, int]):
    """LeRobot's ``absolute_to_relative_idx`` for episodes laid end to end: an absolute (global)
    frame index to its relative position, computed by binary search over the episodes' first
    absolute indices instead of held per frame.

    Args:
        first_absolute: each episode's first absolute index (``dataset_from_index``).
        lengths: each episode's frames.
        starts: each episode's first relative position (``FramePositions.starts[:-1]``).
    """

    def __init__(self, first_absolute: np.ndarray, lengths: np.ndarray, starts: np.ndarray):
        order = np.argsort(first_absolute, kind="stable")
        self._first = np.asarray(first_absolute, dtype=np.int64)[order]
        self._length = np.asarray(lengths, dtype=np.int64)[order]
        self._start = np.asarray(starts, dtype=np.int64)[order]

    def _position(self, absolute: object) -> int | None:
        if not _is_index(absolute):
            return None
        value = int(absolute)  # pyright: ignore[reportArgumentType]  # _is_index: an int or numpy integer
        e = int(np.searchsorted(self._first, value, side="right")) - 1
        if e < 0 or value - int(self._first[e]) >= int(self._length[e]):
            return None
        return int(self._start[e]) + value - int(self._first[e])

    def __getitem__(self, absolute: int) -> int:
        position = self._position(absolute)
        if position is None:
            raise KeyError(absolute)
        return position

    def __contains__(self, absolute: object) -> bool:
        return self._position(absolute) is not None

    def __len__(self) -> int:
        return int(self._length.sum())

    def __iter__(self) -> Iterator[int]:
        for first, length in zip(self._first.tolist(), self._length.tolist()):
            yield from range(first, first + length)

    def __repr__(self) -> str:
        return f"AbsoluteToRelative({len(self)} frames of {len(self._first)} episodes)"


@dataclass(frozen=True)
class EpisodeBounds:
    """What LeRobot reads of ``meta.episodes`` to sample: one row per episode index, its
    ``[dataset_from_index, dataset_to_index)``. ``EpisodeAwareSampler`` takes an episode index as
    the row's position, so rows are dense in ``episode_index`` (an index the selection lacks has
    an empty range, and is never named by ``episodes``).

    ``bounds["dataset_from_index"]`` is a column (an int64 array), ``bounds[e]`` a row (a dict),
    as LeRobot's ``datasets.Dataset`` of episodes gives them.
    """

    episode_index: np.ndarray
    dataset_from_index: np.ndarray
    dataset_to_index: np.ndarray
    length: np.ndarray

    @classmethod
    def dense(cls, episode_index: np.ndarray, first_absolute: np.ndarray, lengths: np.ndarray) -> EpisodeBounds:
        """Rows ``0..max(episode_index)``: the given episodes' ranges, an empty range ``[0, 0)``
        for every index between them that is not given."""
        episode_index = np.asarray(episode_index, dtype=np.int64)
        size = int(episode_index.max()) + 1 if len(episode_index) else 0
        from_index, length = np.zeros(size, np.int64), np.zeros(size, np.int64)
        from_index[episode_index] = first_absolute
        length[episode_index] = lengths
        return cls(np.arange(size, dtype=np.int64), from_index, from_index + length, length)

    def __len__(self) -> int:
        return len(self.episode_index)

    def __getitem__(self, key: str | int):
        if isinstance(key, str):
            if key not in self.column_names:
                raise KeyError(f"{key!r}: the columns are {list(self.column_names)}")
            return getattr(self, key)
        return {name: int(getattr(self, name)[key]) for name in self.column_names}

    @property
    def column_names(self) -> tuple[str, ...]:
        return ("episode_index", "dataset_from_index", "dataset_to_index", "length")


__all__ = ["AbsoluteToRelative", "EpisodeBounds", "EpisodeGroup", "FramePositions", "chunk_groups", "group_by_episode"]
