"""One consumer's pipeline, shared by ``PackedDataset`` and ``MixtureDataset``.

A consumer (one rank x DataLoader worker) turns a stream of draws into samples. The draws
come from the pure planning layer as *segments* (the pieces of plan streams this consumer
serves, one after another, after any resume), each a sequence of *blocks*: the episodes first
needed in the block, in order (so prefetch fetches exactly what comes next), and the draws
``(dataset, episode position, anchor position, is the episode's last draw)``.

A consumer reads datasets described by plain values (``DatasetView``: storage, index, tasks,
windows and reading options), never by the dataset objects that build them, so the runtime
does not depend on ``PackedDataset`` or ``MixtureDataset``. ``Consumer`` owns, per dataset it
draws from, the I/O (fetcher with its disk cache, episode pool with prefetch) and the sample
builder, so every reader feature and speed-up (disk cache, ``decode_device``, prefetch,
batches into shared buffers) serves mixtures exactly as it serves one dataset. It publishes
counters to the shared stats table it is given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from reader.decode.frames import CpuDecodeStage
from reader.fetch.disk_cache import DiskCache
from reader.fetch.episode_pool import EpisodeFetcher, EpisodePool
from reader.fetch.packed_index import PackedIndex
from reader.runtime.sample_builder import SampleBuilder
from reader.runtime.stats import SharedStats
from reader.storage import Storage


@dataclass(frozen=True, eq=False)
class DatasetView:
    """What a consumer needs to read one packed dataset: a plain value.

    Attributes:
        storage: the dataset's root.
        index: its checked manifest and episodes index (with the anchor selection).
        tasks: ``{task_index: task}``.
        offsets: the windows as frame offsets per key (``reader.plan.windows``).
        decode_stage: the CPU decoder used in the consumer.
        return_uint8: frames as uint8 rather than float32 in [0, 1].
        image_transforms: applied to each camera tensor.
        encoded_video: ship compressed members for a ``DecodeStage`` outside the consumer.
        prefetch_episodes, prefetch_bytes: how far ahead episodes are fetched.
        cache_dir, cache_limit_bytes: the local disk cache of fetched episodes (None: none).
    """

    storage: Storage
    index: PackedIndex
    tasks: dict[int, str]
    offsets: dict[str, np.ndarray]
    decode_stage: CpuDecodeStage
    return_uint8: bool = False
    image_transforms: Callable | None = None
    encoded_video: bool = False
    prefetch_episodes: int = 4
    prefetch_bytes: int | None = 256 * 1024 * 1024
    cache_dir: str | None = None
    cache_limit_bytes: int = 50_000_000_000

    @property
    def video_keys(self) -> list[str]:
        return list(self.index.manifest.video_keys)

    @property
    def frame_sizes(self) -> dict[str, tuple[int, int]]:
        """(height, width) per camera, from the manifest: every member is checked against it."""
        features = self.index.manifest.features
        return {k: (int(features[k]["shape"][0]), int(features[k]["shape"][1])) for k in self.video_keys}

Block = tuple[list[tuple[int, int]], list[tuple[int, int, int, bool]]]
"""``(admitted (dataset, episode) in first-needed order, draws (dataset, episode, anchor, last))``."""

_PUBLISH_INTERVAL_S = 0.05  # how stale ds.stats() may be while a loader runs


class _DatasetRuntime:
    """One dataset's fetcher, pool and sample builder inside one consumer (made lazily)."""

    def __init__(self, view: DatasetView):
        self.view = view
        disk_cache = DiskCache(view.cache_dir, view.cache_limit_bytes) if view.cache_dir else None
        self.fetcher = EpisodeFetcher(view.storage, view.index, disk_cache=disk_cache)
        self.pool = EpisodePool(self.fetcher, prefetch=view.prefetch_episodes, prefetch_bytes=view.prefetch_bytes)
        self.builder = SampleBuilder(
            video_keys=view.video_keys,
            offsets=view.offsets,
            tasks=view.tasks,
            stage=view.decode_stage,
            return_uint8=view.return_uint8,
            image_transforms=view.image_transforms,
            encoded_video=view.encoded_video,
            member_prefix=view.storage.url,
            frame_sizes=view.frame_sizes,
        )
        self.retries_before = view.storage.counters.retries  # a Storage outlives iterators

    def sample(self, episode_position: int, anchor_position: int) -> dict:
        episode = self.pool.get(episode_position)
        frame = int(self.view.index.anchor_frame(episode_position, np.array([anchor_position]))[0])
        return self.builder.build(episode, frame)


class Consumer:
    """Serves draws as samples for one consumer (see the module docstring).

    Args:
        views: the datasets draws refer to by position.
        stats: the shared counters table to publish into.
        worker: this DataLoader worker's id, ``None`` in the training process.
    """

    def __init__(self, views: Sequence[DatasetView], *, stats: SharedStats, worker: int | None):
        self.views = list(views)
        self._runtimes: dict[int, _DatasetRuntime] = {}
        self._publisher = stats.publisher(worker)
        self.samples_built = 0
        self._next_publish = 0.0

    def runtime(self, index: int) -> _DatasetRuntime:
        runtime = self._runtimes.get(index)
        if runtime is None:
            runtime = self._runtimes[index] = _DatasetRuntime(self.views[index])
        return runtime

    def samples(self, segments: Iterable[Iterable[Block]]) -> Iterator[tuple[int, dict]]:
        """Yield ``(dataset index, sample)`` for every draw of every segment, in order.

        Before each block, the episodes it (and, ahead of it, the next blocks) first needs
        are appended to each dataset's prefetch order; an episode is evicted after its last
        draw, and whatever a segment leaves open is evicted when it ends (a piece whose last
        draw lies past the segment exists only after a re-split resume).
        """
        try:
            for segment in segments:
                for runtime in self._runtimes.values():
                    runtime.pool.schedule([])
                for admitted, draws in segment:
                    for index, episode in admitted:
                        self.runtime(index).pool.extend([episode])
                    for index, episode, anchor, last in draws:
                        runtime = self.runtime(index)
                        sample = runtime.sample(episode, anchor)
                        if last:
                            runtime.pool.release(episode)
                        self.samples_built += 1
                        self._maybe_publish()
                        yield index, sample
                for runtime in self._runtimes.values():
                    runtime.pool.release_all()
        finally:
            # Runs when the stream ends (before a DataLoader worker reports it is done) or the
            # generator is closed, so an epoch's totals are complete once the loader is.
            self.publish()
            self.close()

    def close(self) -> None:
        for runtime in self._runtimes.values():
            runtime.pool.close()

    def _maybe_publish(self) -> None:
        if time.monotonic() >= self._next_publish:
            self.publish()
            self._next_publish = time.monotonic() + _PUBLISH_INTERVAL_S

    def publish(self) -> None:
        """Write this consumer's counters (summed over its datasets) to the shared table."""
        runtimes = list(self._runtimes.values())
        total = {
            "samples": self.samples_built,
            "bytes_fetched": sum(r.fetcher.counters.bytes_fetched for r in runtimes),
            "fetch_seconds": sum(r.fetcher.counters.fetch_seconds for r in runtimes),
            "decode_seconds": sum(r.builder.counters["decode_seconds"] for r in runtimes),
            "episodes_admitted": sum(r.fetcher.counters.episodes_admitted for r in runtimes),
            "disk_cache_hits": sum(r.fetcher.counters.disk_cache_hits for r in runtimes),
            "decoder_hits": sum(r.builder.counters["decoder_hits"] for r in runtimes),
            "decoder_misses": sum(r.builder.counters["decoder_misses"] for r in runtimes),
            "frames_decoded": sum(r.builder.counters["frames_decoded"] for r in runtimes),
            "storage_retries": sum(r.view.storage.counters.retries - r.retries_before for r in runtimes),
            "max_open_episodes": sum(r.pool.max_open for r in runtimes),
            "max_open_bytes": sum(r.pool.max_open_bytes for r in runtimes),
            "max_prefetched_bytes": sum(r.pool.prefetcher.peak_bytes for r in runtimes),
        }
        self._publisher.publish(total)


__all__ = ["Block", "Consumer", "DatasetView"]
