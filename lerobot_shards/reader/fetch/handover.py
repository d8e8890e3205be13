"""Episodes the training process read for an epoch's first batch, handed to the DataLoader
workers it forks right after (``BatchLoader(first_batch_here=...)``, DESIGN_NOTES section 29).

A forked worker starts with a copy of the training process's memory, so the episodes that batch
fetched (rows and compressed members: plain memory, unlike an open decoder) are already in each
worker: a worker takes one from here on its first admission of that episode instead of reading
it again. The training process withdraws the table once the workers have forked; a worker
started any other way (spawn, a fork server) finds it empty and reads as always. A worker holds
what it was handed and has not taken until its stream ends: at most one first batch's episodes,
which the training process held a moment before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# (id of the catalog read, its episode) -> LoadedEpisode: a worker's catalog is the training
# process's own object (a fork copies it in place), so its id names it in the worker too.
_HANDED: dict[tuple[int, int], Any] = {}


def hand_over(catalog: object, episodes: Mapping[int, Any]) -> None:
    """Offer ``episodes`` (catalog position -> LoadedEpisode) of ``catalog`` to the workers forked next."""
    _HANDED.update({(id(catalog), episode): loaded for episode, loaded in episodes.items()})


def take(catalog: object, episode: int) -> Any | None:
    """The episode handed over for ``catalog``, once (None if none was)."""
    if not _HANDED:
        return None
    return _HANDED.pop((id(catalog), episode), None)


def withdraw() -> int:
    """Forget everything offered (the training process, once its workers have forked); returns how many."""
    count = len(_HANDED)
    _HANDED.clear()
    return count


__all__ = ["hand_over", "take", "withdraw"]
