"""Samples at given anchors, in any order: the engine behind ``ds[i]`` and ``ds.__getitems__``.

The streaming path (``Consumer``) admits episodes in plan order; here a sampler chooses. A
batch's anchors are grouped by episode (``reader.plan.frame_positions.group_by_episode``): each
episode touched is fetched once, with one read of its row group's span and one ranged read over
its members (adjacent in the tar: one request per episode on a bucket), unless the cache still
holds it; its frames are then built in ascending order, so each member's decoder moves forwards.
Runs of a batch that would hold more than the cache's bounds are read one after another
(``chunk_groups``). Samples are the streaming path's, built by the same ``SampleBuilder``.

An engine belongs to one process: ``RandomAccess.owned`` makes a fresh one after a fork, and
the one a forked child inherited is kept, never freed there (freeing a decoder whose threads
stayed in the parent hangs: dav1d's ``avcodec_free_context`` waits on them).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lerobot_shards.reader.fetch.disk_cache import DiskCache
from lerobot_shards.reader.fetch.episode_cache import BATCH_FETCH_THREADS, EpisodeCache
from lerobot_shards.reader.fetch.episode_pool import DatasetStorages, EpisodeFetcher
from lerobot_shards.reader.plan.frame_positions import chunk_groups, group_by_episode
from lerobot_shards.reader.runtime.consumer import StreamView, counter_totals, make_sample_builder
from lerobot_shards.reader.runtime.environment import detect_world
from lerobot_shards.reader.runtime.sample_builder import SampleBuilder
from lerobot_shards.reader.runtime.stats import SharedStats

_INHERITED: list[RandomAccess] = []  # engines a forked child inherited: kept, never freed (see the module)


@dataclass(frozen=True)
class CacheBounds:
    """What one process's engine keeps open between batches: episodes and their bytes."""

    episodes: int
    bytes: int


class RandomAccess:
    """Builds samples at ``(catalog episode, frame)`` anchors (see the module docstring).

    Args:
        view: the catalog, windows and read options.
        bounds: the episode cache's bounds.
        finish: the stream's last step per sample (a mixture harmonizes it).
        stats: the shared counters table to publish into.
    """

    def __init__(
        self, view: StreamView, *, bounds: CacheBounds, finish: Callable[[int, dict], dict], stats: SharedStats | None = None
    ):
        self.view = view
        self.pid = os.getpid()
        options = view.options
        self.storages = DatasetStorages(view.catalog, options.storage_options, options.retry, given=view.storages)
        disk_cache = DiskCache(options.cache_dir, options.cache_limit_bytes) if options.cache_dir else None
        self.fetcher = EpisodeFetcher(view.catalog, self.storages, disk_cache=disk_cache)
        self.cache = EpisodeCache(
            self.fetcher,
            max_episodes=bounds.episodes,
            max_bytes=bounds.bytes,
            threads=max(options.fetch_threads, BATCH_FETCH_THREADS),
        )
        self.bounds = bounds
        self._finish = finish
        self._builders: dict[int, SampleBuilder] = {}
        self._world = detect_world(options.rank, options.world_size)
        info = _worker_id()
        self._publisher = stats.publisher(info) if stats is not None else None
        self.samples_built = 0

    @classmethod
    def owned(cls, engine: RandomAccess | None, make: Callable[[], RandomAccess]) -> RandomAccess:
        """``engine`` if this process made it, else a new one from ``make`` (the inherited one
        is kept alive in this process, never freed: see the module docstring)."""
        if engine is not None and engine.pid == os.getpid():
            return engine
        if engine is not None:
            _INHERITED.append(engine)
        return make()

    def builder(self, dataset: int) -> SampleBuilder:
        built = self._builders.get(dataset)
        if built is None:
            built = self._builders[dataset] = make_sample_builder(self.view, dataset, self._world)
        return built

    def samples(self, episodes: np.ndarray, frames: np.ndarray) -> list[dict]:
        """The samples at ``(episodes[k], frames[k])``, in that order (duplicates each built).

        Raises:
            IntegrityError, EpisodeDataError, StorageError, DecodeError, ResourceLimitError: as
                the streaming path raises them, naming the shard and episode.
        """
        catalog = self.view.catalog
        out: list[dict | None] = [None] * len(episodes)
        groups = group_by_episode(episodes, frames)
        sizes = [catalog.member_bytes(g.episode) for g in groups]
        for run in chunk_groups(groups, sizes, max_bytes=self.bounds.bytes, max_episodes=self.bounds.episodes):
            loaded = self.cache.get_many([g.episode for g in run])
            for group in run:
                episode = loaded[group.episode]
                builder = self.builder(episode.dataset)
                for slot, frame in zip(group.slots.tolist(), group.frames.tolist()):
                    out[slot] = self._finish(episode.dataset, builder.build(episode, int(frame)))
        self.samples_built += len(out)
        self.publish()
        return [sample for sample in out if sample is not None]

    def publish(self) -> None:
        """Write this engine's counters to the shared table (the dataset's ``stats()``)."""
        if self._publisher is None:
            return
        cache = self.cache.counters
        self._publisher.publish(counter_totals(self, open_peaks=(cache["max_held"], cache["max_held_bytes"])))

    def open_decoders(self) -> int:
        """Decoders open now, over every dataset's builder (each belongs to a held episode)."""
        return sum(b.open_decoders for b in self._builders.values())

    def close(self) -> None:
        """Drop the held episodes and their decoders; stop the threads."""
        self.cache.close()
        for builder in self._builders.values():
            builder.close()


def _worker_id() -> int | None:
    import torch.utils.data

    info = torch.utils.data.get_worker_info()
    return None if info is None else int(info.id)


__all__ = ["CacheBounds", "RandomAccess"]
