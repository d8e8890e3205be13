"""One consumer's pipeline, shared by ``PackedDataset`` and ``MixtureDataset``.

A consumer (one rank x DataLoader worker) turns a stream of draws into samples. The draws
come from the pure planning layer as *segments* (the pieces of plan streams this consumer
serves, one after another, after any resume), each a sequence of *blocks*: the pieces first
needed in the block, in order (so prefetch fetches exactly what comes next), and the draws
``(piece, episode, anchor, is the piece's last draw)`` (``lerobot_shards.reader.plan.consumer_draws``).

A consumer reads a ``StreamView``, a plain value: the episode catalog of every pack the
stream reads, each dataset's windows, and the read options. It owns ONE fetcher (with its
caches and optional disk cache), ONE pool with one prefetcher and one set of fetch threads,
whatever the number of packs: a dataset is only a label on its episodes, and the pool,
prefetch budget, threads, caches and sockets are bounded per consumer, not per dataset. Sample
builders (the per-dataset columns, tasks, windows) are made on a dataset's first draw.
It publishes counters to the shared stats table it is given.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from lerobot_shards.core.pack.catalog import EpisodeCatalog
from lerobot_shards.core.storage import Storage
from lerobot_shards.reader.decode.frames import CpuDecoders
from lerobot_shards.reader.fetch import handover
from lerobot_shards.reader.fetch.disk_cache import DiskCache
from lerobot_shards.reader.fetch.episode_pool import DatasetStorages, EpisodeFetcher, EpisodePool, LoadedEpisode
from lerobot_shards.reader.plan.consumer_draws import Block
from lerobot_shards.reader.plan.world import World
from lerobot_shards.reader.read_options import ReadOptions
from lerobot_shards.reader.runtime.environment import decode_threads_for, detect_world, split_threads
from lerobot_shards.reader.runtime.sample_builder import SampleBuilder
from lerobot_shards.reader.runtime.side_by_side import SideBySide
from lerobot_shards.reader.runtime.stats import SharedStats

_PUBLISH_INTERVAL_S = 0.05  # how stale ds.stats() may be while a loader runs


@dataclass(frozen=True, eq=False)
class StreamView:
    """What a consumer reads: a plain value (no dataset object).

    Attributes:
        catalog: every episode of every pack, with its digests.
        offsets: per dataset (catalog order), its windows as frame offsets per key.
        options: how to read (the dataset's ``ReadOptions``, whole).
        decoders: the CPU decoders ``options.decoder`` names (made once by the dataset).
        storages: ``Storage`` objects to use for the first datasets (a ``PackedDataset``'s own,
            so its counters see the reads); the others are made on first use.
        rows_as_views: samples hold their tabular rows as views of the episode's columns
            (``BatchLoader``: each sample is copied into its batch at once, never sent alone).
    """

    catalog: EpisodeCatalog
    offsets: list[dict[str, np.ndarray]]
    options: ReadOptions
    decoders: CpuDecoders
    storages: tuple[Storage, ...] = ()
    rows_as_views: bool = False


def consumer_threads(view: StreamView, world: World) -> int:
    """The threads a consumer decodes on: ``decode_threads``, else its share of the cores
    (``decode_threads_for``, over every dataset's frame sizes)."""
    sizes = [size for info in view.catalog.datasets for size in (info.frame_sizes or {}).values()]
    return view.options.decode_threads or decode_threads_for(world, sizes)


def _camera_threads(asked: int | None, world: World, frame_sizes: dict[str, tuple[int, int]] | None, split: int | None) -> int:
    """A dataset's camera threads: its own rule (``decode_threads``, else its share of the cores,
    1 for small frames: a mixture's small-frame pack keeps one thread beside a large-frame one),
    at most what the consumer's split left for cameras."""
    own = asked or decode_threads_for(world, (frame_sizes or {}).values())
    return own if split is None else min(own, split)


def make_sample_builder(view: StreamView, dataset: int, world: World, *, camera_threads: int | None = None) -> SampleBuilder:
    """The sample builder of one dataset of a view: its cameras, windows, tasks and features,
    the view's read options, and decode threads for this consumer's share of the cores
    (``camera_threads``: cameras decoded side by side within one sample, when the consumer
    decides it)."""
    info, options = view.catalog.datasets[dataset], view.options
    return SampleBuilder(
        video_keys=list(info.video_keys),
        offsets=view.offsets[dataset],
        tasks=view.catalog.tasks(dataset),
        decoders=view.decoders,
        return_uint8=options.return_uint8,
        image_transforms=options.image_transforms,
        encoded_video=options.encoded_video,
        member_prefix=info.root,
        frame_sizes=info.frame_sizes,
        decode_threads=_camera_threads(options.decode_threads, world, info.frame_sizes, camera_threads),
        features=info.features,
        depth_unit=options.depth_unit,
        copy_rows=not view.rows_as_views,
    )


class Consumer:
    """Serves draws as samples for one consumer (see the module docstring).

    Args:
        view: what the draws read.
        stats: the shared counters table to publish into.
        worker: this DataLoader worker's id, ``None`` in the training process.
        hand_over: keep every episode fetched and, on close, offer them to the workers forked
            next (``reader.fetch.handover``: a first batch built in the training process).
    """

    def __init__(self, view: StreamView, *, stats: SharedStats, worker: int | None, hand_over: bool = False):
        self.view = view
        options = view.options
        self.storages = DatasetStorages(view.catalog, options.storage_options, options.retry, given=view.storages)
        disk_cache = DiskCache(options.cache_dir, options.cache_limit_bytes) if options.cache_dir else None
        self.fetcher = EpisodeFetcher(view.catalog, self.storages, disk_cache=disk_cache)
        # A first batch built in the training process hands what it read to the workers forked next.
        if hand_over:
            self.fetcher.kept = {}
        self.pool = EpisodePool(
            self.fetcher, prefetch=options.prefetch_episodes, prefetch_bytes=options.prefetch_bytes, threads=options.fetch_threads
        )
        self._builders: dict[int, SampleBuilder] = {}
        self._world = detect_world()
        cameras = max((len(info.video_keys) + len(info.features.image_keys) for info in view.catalog.datasets), default=1)
        self.sample_threads, self._camera_threads = split_threads(
            consumer_threads(view, self._world), cameras, encoded_video=options.encoded_video
        )
        self._publisher = stats.publisher(worker)
        # In the training process no reader thread outlives the stream: a later fork (the
        # DataLoader's workers, after a first batch built here) would copy it mid-read.
        self._join_on_close = worker is None
        self.samples_built = 0
        self._next_publish = 0.0

    def builder(self, dataset: int) -> SampleBuilder:
        built = self._builders.get(dataset)
        if built is None:
            built = self._builders[dataset] = make_sample_builder(
                self.view, dataset, self._world, camera_threads=self._camera_threads
            )
        return built

    def samples(self, segments: Iterable[Iterable[Block]]) -> Iterator[tuple[int, dict]]:
        """Yield ``(dataset index, sample)`` for every draw of every segment, in order.

        Before each block, the pieces it (and, ahead of it, the next blocks) first needs are
        appended to the prefetch order; a piece is evicted after its last draw, and whatever a
        segment leaves open is evicted when it ends (a piece whose last draw lies past the
        segment exists only after a re-split resume). Samples are built side by side on the
        consumer's sample threads (``runtime/side_by_side.py``) and leave in draw order; an
        error leaves in its draw's place, after every sample drawn before it.
        """
        side: SideBySide[tuple[SampleBuilder, int, dict]] = SideBySide(self.sample_threads)
        jobs = self._draws(segments)
        try:
            while True:
                try:
                    loaded, frame, last = next(jobs)
                except StopIteration:
                    break
                except Exception:
                    yield from self._handed_on(side.drain())  # the samples drawn before it come first
                    raise
                builder = self.builder(loaded.dataset)
                build = functools.partial(_build, builder, loaded, frame, last)
                yield from self._handed_on(side.submit(loaded, build))
            yield from self._handed_on(side.drain())
        finally:
            # Runs when the stream ends (before a DataLoader worker reports it is done) or the
            # generator is closed, so an epoch's totals are complete once the loader is. The
            # builds in flight finish before their decoders and episodes are closed.
            side.close()
            jobs.close()
            self.publish()
            self.close()

    def _draws(self, segments: Iterable[Iterable[Block]]) -> Generator[tuple[LoadedEpisode, int, bool], None, None]:
        """``(admitted episode, anchor frame, is the piece's last draw)`` per draw, the pool
        kept as ``samples`` says (a released piece lives on in the builds that hold it)."""
        catalog = self.view.catalog
        for segment in segments:
            self.pool.schedule([])
            for admitted, draws in segment:
                self.pool.extend(admitted)
                for piece, episode, anchor, last in draws:
                    loaded = self.pool.get(piece, episode)
                    frame = int(catalog.anchor_frames(episode, np.array([anchor]))[0])
                    if last:
                        self.pool.release(piece)
                    yield loaded, frame, last
            self.pool.release_all()

    def _handed_on(self, built: Iterable[tuple[SampleBuilder, int, dict]]) -> Iterator[tuple[int, dict]]:
        """Built samples, their image transforms applied here, in draw order (a random
        transform draws from torch's generator in that order, however the builds ran)."""
        for builder, dataset, sample in built:
            builder.transform(sample)
            self.samples_built += 1
            self._maybe_publish()
            yield dataset, sample

    def close(self) -> None:
        self.pool.close(wait=self._join_on_close)
        for builder in self._builders.values():
            builder.close()
        if self.fetcher.kept:  # kept only where asked (hand_over)
            handover.hand_over(self.fetcher.catalog, self.fetcher.kept)
            self.fetcher.kept = {}

    def _maybe_publish(self) -> None:
        if time.monotonic() >= self._next_publish:
            self.publish()
            self._next_publish = time.monotonic() + _PUBLISH_INTERVAL_S

    def publish(self) -> None:
        """Write this consumer's counters to the shared table."""
        self._publisher.publish(
            counter_totals(
                self,
                open_peaks=(self.pool.max_open, self.pool.max_open_bytes),
                prefetched_peak=self.pool.prefetcher.peak_bytes,
            )
        )


def _build(builder: SampleBuilder, loaded: LoadedEpisode, frame: int, last: bool) -> tuple[SampleBuilder, int, dict]:
    """One draw's sample, its image transforms left to the consumer (runs on a sample thread)."""
    return builder, loaded.dataset, builder.build(loaded, frame, last=last, transform=False)


class CountingEngine(Protocol):
    """What ``counter_totals`` reads of a consumer or a random-access engine."""

    samples_built: int
    fetcher: Any
    storages: DatasetStorages
    _builders: dict[int, SampleBuilder]


def counter_totals(engine: CountingEngine, *, open_peaks: tuple[int, int], prefetched_peak: int = 0) -> dict[str, float]:
    """What a consumer publishes (``reader.runtime.stats.STAT_FIELDS``): its samples, its
    fetcher's and sample builders' counters, its storages' retries and packs, and the peaks of
    what it held open (episodes, bytes) and fetched ahead."""
    samples, fetch, storages = engine.samples_built, engine.fetcher.counters, engine.storages
    builders = list(engine._builders.values())
    return {
        "samples": samples,
        "bytes_fetched": fetch.bytes_fetched,
        "fetch_seconds": fetch.fetch_seconds,
        "decode_seconds": sum(b.counters["decode_seconds"] for b in builders),
        "episodes_admitted": fetch.episodes_admitted,
        "disk_cache_hits": fetch.disk_cache_hits,
        "decoder_hits": sum(b.counters["decoder_hits"] for b in builders),
        "decoder_misses": sum(b.counters["decoder_misses"] for b in builders),
        "frames_decoded": sum(b.counters["frames_decoded"] for b in builders),
        "images_decoded": sum(b.counters["images_decoded"] for b in builders),
        "depth_frames_decoded": sum(b.counters["depth_frames_decoded"] for b in builders),
        "storage_retries": storages.retries,
        "max_open_episodes": open_peaks[0],
        "max_open_bytes": open_peaks[1],
        "max_prefetched_bytes": prefetched_peak,
        "max_datasets_opened": storages.opened,
    }


__all__ = ["Consumer", "StreamView", "counter_totals", "make_sample_builder"]
