"""Reader counters that DataLoader workers publish and the training process reads.

Mechanism: one shared-memory table of float64 (``multiprocessing.RawArray``), allocated when
the dataset is built, with one row per *slot*: row 0 for iteration in the process that built
the dataset (``num_workers=0``), row ``1 + worker id`` for DataLoader worker ``worker id``.
DataLoader workers receive the dataset when they start (inherited under ``fork``, pickled
through the process-start path under ``spawn``/``forkserver``, which is the one path where a
``RawArray`` may be pickled), so a worker's writes land in the parent's table. Every slot has
exactly one writer at a time, so no lock is needed, nothing travels inside the samples and a
worker that dies leaves its last published numbers behind.

Counters are cumulative since the dataset was built, over every epoch and iterator (sums), or
peaks (fields starting with ``max_``). A reader's iterator keeps its own counters from zero
and publishes ``base + current``, where ``base`` is the slot's row when the iterator started.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping

import numpy as np

STAT_FIELDS: tuple[str, ...] = (
    "samples",
    "bytes_fetched",
    "fetch_seconds",
    "decode_seconds",
    "episodes_admitted",
    "disk_cache_hits",
    "decoder_hits",
    "decoder_misses",
    "frames_decoded",
    "images_decoded",
    "depth_frames_decoded",
    "storage_retries",
    "max_open_episodes",
    "max_open_bytes",
    "max_prefetched_bytes",
    "max_datasets_opened",
)
"""Published counters. ``frames_decoded``: every frame and picture decoded in the consumer;
``images_decoded`` and ``depth_frames_decoded`` the pictures (image features) and depth-video
frames among them, which are decoded there even with ``decode_device`` (a GPU stage decodes
colour video only). ``max_open_episodes``/``max_open_bytes``: the most episodes (and their
bytes: compressed video + decoded rows) one consumer held open at once. ``max_prefetched_bytes``:
the most video bytes one consumer had fetched, or was fetching, ahead of use.
``max_datasets_opened``: the most packs one consumer has read from (a mixture opens a pack
when it first admits one of its episodes)."""

MAX_WORKERS = 255
"""Workers beyond this id still load data; they just do not publish counters."""


class SharedStats:
    """The shared table (see the module docstring). Shared with the DataLoader workers a process
    starts; pickled anywhere else, it arrives as a new table of its own."""

    def __init__(self) -> None:
        self._table = multiprocessing.RawArray("d", (MAX_WORKERS + 1) * len(STAT_FIELDS))

    def __getstate__(self) -> dict:
        # The table crosses only to a process being started (a DataLoader worker under spawn or
        # forkserver, where multiprocessing allows it); any other pickle (a dataset saved, or sent
        # through a queue) arrives with a table of its own, counting in that process alone.
        import multiprocessing.context as started

        return {"table": self._table if started.get_spawning_popen() is not None else None}

    def __setstate__(self, state: dict) -> None:
        table = state.get("table")
        self._table = table if table is not None else multiprocessing.RawArray("d", (MAX_WORKERS + 1) * len(STAT_FIELDS))

    def _rows(self) -> np.ndarray:
        # rows: (slots, fields); a view on the shared buffer, no copy.
        return np.frombuffer(self._table, dtype=np.float64).reshape(MAX_WORKERS + 1, len(STAT_FIELDS))

    @staticmethod
    def slot_of(worker: int | None) -> int | None:
        """Row for a worker id (``None``: the building process); ``None`` if out of range."""
        slot = 0 if worker is None else worker + 1
        return slot if slot <= MAX_WORKERS else None

    def publisher(self, worker: int | None) -> StatsPublisher:
        """A writer for one slot, starting from that slot's current totals."""
        return StatsPublisher(self, self.slot_of(worker))

    def snapshot(self) -> dict[str, int | float]:
        """Sums over slots (maxima for ``max_`` fields): counts as ints, ``*_seconds`` as floats."""
        rows = self._rows()
        out: dict[str, int | float] = {}
        for i, name in enumerate(STAT_FIELDS):
            value = float(rows[:, i].max() if name.startswith("max_") else rows[:, i].sum())
            out[name] = value if name.endswith("_seconds") else int(round(value))
        return out

    def reset(self) -> None:
        """Zero every slot (call while no iterator is running)."""
        self._rows()[:] = 0.0


class StatsPublisher:
    """Writes one iterator's counters into its slot as ``base + current`` (or the peak)."""

    def __init__(self, stats: SharedStats, slot: int | None):
        self._stats = stats
        self._slot = slot
        self._base = stats._rows()[slot].copy() if slot is not None else None
        self._peak = np.array([name.startswith("max_") for name in STAT_FIELDS])

    def publish(self, values: Mapping[str, float]) -> None:
        """Write the iterator's current counters (every name in ``STAT_FIELDS``)."""
        if self._slot is None or self._base is None:  # both set together: a slot, and its base
            return
        current = np.array([float(values[name]) for name in STAT_FIELDS])
        self._stats._rows()[self._slot] = np.where(self._peak, np.maximum(self._base, current), self._base + current)


__all__ = ["MAX_WORKERS", "STAT_FIELDS", "SharedStats", "StatsPublisher"]
