"""The episodes random access keeps open: a bounded LRU of fetched episodes.

``ds[i]`` and ``ds.__getitems__(indices)`` need whole episodes (their row group's rows and
their members' bytes) like the streaming path does, but in whatever order a sampler asks. An
``EpisodeCache`` holds the most recently used ones, bounded by count (``max_episodes``) and by
the bytes they hold (``max_bytes``, compressed members plus decoded rows): the decoders a sample
builder opens on an episode live as long as the cache holds it, so both bounds bound the open
decoders too. (LeRobot's first ``VideoDecoderCache`` kept every decoder a DataLoader worker
ever opened; workers grew to tens of GB over a long run. Here nothing a worker opens outlives
the cache's bounds: ``tests/reader/test_random_access.py`` counts it.)

``get_many`` fetches the episodes a run of a batch needs at once (every read of a batch goes
out together, so a distant bucket costs one round trip per run, not one per episode), and
holds them while the run is built, even beyond the bounds: a caller splits a batch into runs
that fit (``reader.plan.frame_positions.chunk_groups``).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from lerobot_shards.reader.fetch.episode_pool import EpisodeFetcher, LoadedEpisode

BATCH_FETCH_THREADS = 8
"""Episodes of one run fetched at once, at most (as many reads as the fetcher's I/O pool keeps in
flight): a batch knows every episode it needs, so nothing is gained by asking one at a time."""


class EpisodeCache:
    """Fetched episodes by catalog position, least recently used evicted first (see the module).

    Args:
        fetcher: reads an episode (rows and members, checked against their digests).
        max_episodes: episodes held at most between calls.
        max_bytes: bytes held at most between calls (an episode larger than this is held alone).
        threads: episodes fetched at once (at least 1).
    """

    def __init__(self, fetcher: EpisodeFetcher, *, max_episodes: int, max_bytes: int, threads: int):
        self.fetcher = fetcher
        self.max_episodes = max(1, int(max_episodes))
        self.max_bytes = max(0, int(max_bytes))
        self.threads = max(1, int(threads))
        self._held: OrderedDict[int, LoadedEpisode] = OrderedDict()
        self._held_bytes = 0
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        self._lock = threading.Lock()
        # What it did since it was made (this process), as the decode stage's cache counts.
        self.counters = {"hits": 0, "misses": 0, "evictions": 0, "max_held": 0, "max_held_bytes": 0}

    @property
    def held(self) -> int:
        """Episodes held now."""
        return len(self._held)

    @property
    def held_bytes(self) -> int:
        """Bytes the held episodes hold (members and rows)."""
        return self._held_bytes

    def get_many(self, episodes: Sequence[int]) -> dict[int, LoadedEpisode]:
        """The fetched episodes (catalog positions), those not held fetched now, all at once.

        Raises:
            IntegrityError, EpisodeDataError, StorageError, ResourceLimitError: as
                ``EpisodeFetcher.fetch`` (the first failing episode in ``episodes``' order).
        """
        wanted = list(dict.fromkeys(int(e) for e in episodes))
        found = {e: self._held[e] for e in wanted if e in self._held}
        for episode in found:
            self._held.move_to_end(episode)
        missing = [e for e in wanted if e not in found]
        self.counters["hits"] += len(found)
        self.counters["misses"] += len(missing)
        # Room first: what is held beside the call's episodes stays within the bounds while they arrive.
        incoming = sum(self.fetcher.catalog.member_bytes(e) for e in missing)
        self._evict(keep=set(wanted), adding=(len(missing), incoming))
        for episode, loaded in zip(missing, self._fetch(missing)):
            found[episode] = loaded
            self._held[episode] = loaded
            self._held_bytes += loaded.nbytes
        self.counters["max_held"] = max(self.counters["max_held"], len(self._held))
        self.counters["max_held_bytes"] = max(self.counters["max_held_bytes"], self._held_bytes)
        self._evict(keep=set(wanted))
        return found

    def _fetch(self, episodes: list[int]) -> list[LoadedEpisode]:
        if len(episodes) <= 1 or self.threads == 1:
            return [self.fetcher.fetch(e) for e in episodes]
        futures = [self._executor().submit(self.fetcher.fetch, e) for e in episodes]
        try:
            return [future.result() for future in futures]
        finally:
            for future in futures:  # a failure leaves no fetch running on after it is raised
                future.cancel()

    def _executor(self) -> ThreadPoolExecutor:
        """The fetch threads of this process (made on first use: a worker forked from a process
        that had them starts its own)."""
        with self._lock:
            if self._pool is None or self._pool[0] != os.getpid():
                self._pool = (os.getpid(), ThreadPoolExecutor(self.threads, thread_name_prefix="lerobot-shards-episodes"))
            return self._pool[1]

    def _evict(self, *, keep: set[int], adding: tuple[int, int] = (0, 0)) -> None:
        """Drop the least recently used episodes beyond the bounds (counting ``adding``: episodes
        and bytes about to arrive), except those in ``keep`` (the call's own: they are evicted at
        a later call if still beyond the bounds)."""
        episodes, nbytes = adding
        for episode in list(self._held):
            if len(self._held) + episodes <= self.max_episodes and self._held_bytes + nbytes <= self.max_bytes:
                break
            if episode in keep:
                continue
            self._held_bytes -= self._held.pop(episode).nbytes
            self.counters["evictions"] += 1

    def clear(self) -> None:
        """Drop every held episode (and with them the decoders opened on them)."""
        self._held.clear()
        self._held_bytes = 0

    def close(self) -> None:
        """Drop everything and stop the fetch threads and the fetcher's I/O threads."""
        self.clear()
        with self._lock:
            made, self._pool = self._pool, None
        if made is not None and made[0] == os.getpid():
            made[1].shutdown(wait=True, cancel_futures=True)
        self.fetcher.close()


__all__ = ["BATCH_FETCH_THREADS", "EpisodeCache"]
