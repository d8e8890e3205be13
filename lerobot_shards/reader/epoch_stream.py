"""The epoch surface ``PackedDataset`` and ``MixtureDataset`` share, written once.

An ``EpochStream`` is an ``IterableDataset`` whose epoch is planned over consumers (ranks x
DataLoader workers) by pure arithmetic: ``len``, per-worker counts, ``set_epoch``, resume
states and the consumer loop are the same for one dataset and for a mixture, and so is what a
consumer reads (``_view``: the episode catalog, each dataset's windows, the read options) and
how its draws are made (``_blocks``). A subclass says its epoch plan for a world shape
(``plan``), keeps ``catalog`` and ``_dataset_offsets``, may order draws over pieces of its
datasets (``_piece_map``: a weighted mixture) and finish each sample (``_finish``).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from lerobot_shards.core.errors import ArgumentError, ResumeWarning, WindowWarning
from lerobot_shards.core.pack import EpisodeCatalog
from lerobot_shards.core.storage import Storage
from lerobot_shards.core.windows import looks_like_frames, windows_beyond
from lerobot_shards.reader.decode.frames import CpuDecoders
from lerobot_shards.reader.plan.consumer_draws import Block, Segment, first_draws, segment_blocks
from lerobot_shards.reader.plan.epoch_plan import EpochPlan
from lerobot_shards.reader.plan.mixture_plan import PieceMap
from lerobot_shards.reader.plan.resume_state import EpochResume
from lerobot_shards.reader.plan.world import World
from lerobot_shards.reader.read_options import ReadOptions
from lerobot_shards.reader.runtime.consumer import Consumer, StreamView
from lerobot_shards.reader.runtime.environment import detect_world
from lerobot_shards.reader.runtime.stats import SharedStats


class EpochStream(torch.utils.data.IterableDataset):
    """Epochs, lengths, resume states and iteration over a planned stream (see the module
    docstring).

    Args:
        kind: the class name recorded in resume states.
        identity: what the stream reads (digests, selection, seed, ...): a resume state of
            another identity is refused.

    A subclass calls ``_set_options`` with its ``ReadOptions`` (rank and world size included)
    before its first read.
    """

    def __init__(self, *, kind: str, identity: dict[str, Any]):
        super().__init__()
        self.epoch = 0
        self._resume = EpochResume(kind, identity)
        self._stats = SharedStats()
        self._pending_resume: tuple[int, int | None] | None = None  # a loaded state not yet iterated

    catalog: EpisodeCatalog
    _dataset_offsets: list[dict[str, np.ndarray]]  # per dataset (catalog order), its windows as frame offsets
    _storages: tuple[Storage, ...] = ()  # Storage objects of the first datasets (their counters see the reads)

    def _set_options(self, options: ReadOptions) -> None:
        """Keep the reading options (checked by ``ReadOptions``) and the CPU decoders they name."""
        self.options = options
        self.decoders = CpuDecoders(options.decoder)

    def with_uint8_frames(self):
        """A shallow copy that yields the same samples with colour frames as uint8 (the
        loader's ring converts them to float32 itself, straight into shared memory); None
        when frames pass through ``image_transforms``, which must see what the user asked."""
        if self.options.image_transforms is not None:
            return None
        view = copy.copy(self)
        view.options = dataclasses.replace(self.options, return_uint8=True)
        return view

    def _warn_windows_beyond_episodes(
        self,
        offsets: list[dict[str, np.ndarray]],
        fps: list[float],
        seconds: Sequence[Mapping[str, Sequence[float]] | None] | None = None,
    ) -> None:
        """Warn (``WindowWarning``) for each dataset's window longer than its longest episode:
        accepted (LeRobot pads it too) but every sample of it would be padded. ``seconds``: each
        dataset's windows as given in seconds; whole numbers there were likely meant as frames."""
        catalog = self.catalog
        for i, (dataset_offsets, dataset_fps) in enumerate(zip(offsets, fps)):
            lengths = catalog.length[catalog.dataset == i]
            if dataset_offsets and len(lengths):
                given = (seconds or [None] * len(offsets))[i] or {}
                for key, sentence in windows_beyond(dataset_offsets, int(lengths.max()), dataset_fps, keyed=True):
                    if key in given and looks_like_frames(given[key]):
                        meant = [round(d / dataset_fps, 6) for d in given[key]]
                        sentence += f"; did you mean frames? as seconds at {dataset_fps:g} fps: {{{key!r}: {meant}}}"
                    warnings.warn(f"{catalog.datasets[i].root}: {sentence}", WindowWarning, stacklevel=3)

    def _check_decode_device(self) -> None:
        """Refuse, when the dataset is made, a ``decode_device`` whose decoder cannot decode the
        members it would be shipped (AV1 from a copy-mode pack on NVDEC): the first batch would
        fail far from the cause. Depth cameras are decoded in the workers, never shipped.

        Raises:
            ArgumentError: names the dataset, camera and codec, and what to do.
        """
        device = self.options.decode_device
        if device is None:
            return
        from lerobot_shards.core.format import VIDEO_CODECS
        from lerobot_shards.reader.decode.backends.table import backend_class

        backend = backend_class("auto", "cuda" if device.startswith("cuda") else "cpu")
        if backend.codecs is None:
            return
        catalog = self.catalog
        for d, pack in enumerate(catalog.datasets):
            first, stop = catalog.episode_range(d)
            if first == stop:
                continue
            members = catalog.member_codec[catalog.member_start[first] : catalog.member_start[stop]]
            cameras = len(pack.video_keys)
            for k, key in enumerate(pack.video_keys):
                if key in pack.features and pack.features[key].is_depth:
                    continue
                codecs = {VIDEO_CODECS[c] for c in np.unique(members[k::cameras]).tolist()}
                found = codecs - set(backend.codecs)
                camera = pack.features[key].camera if key in pack.features else None
                for codec in sorted(codecs - found):
                    refusal = backend.refuses_frames(codec, *camera.size) if camera is not None else None
                    if refusal:
                        raise ArgumentError(
                            f"decode_device={device!r} ({backend.name}): camera {key} of {pack.name}: {refusal.split(': ', 1)[-1]}"
                        )
                if found:
                    raise ArgumentError(
                        f"decode_device={device!r} decodes {'/'.join(backend.codecs)} members ({backend.name}); camera {key} of "
                        f"{pack.name} holds {'/'.join(sorted(found))} (a copy-mode pack keeps LeRobot's AV1): repack it with "
                        "`lerobot-shards pack --video hevc`, or decode it with decode_device='cpu' or in the workers (decode_device unset)"
                    )

    @property
    def decoder_backend(self) -> str:
        """Which CPU decoder is used (a name of the decode backends table: ``torchcodec``, ``pyav``, ...)."""
        return self.decoders.backend

    # -- what a subclass says ---------------------------------------------------------------
    def plan(self, *, world_size: int, workers_per_rank: int, epoch: int | None = None) -> EpochPlan:
        """The epoch plan for a world shape (pure arithmetic; the current epoch by default)."""
        raise NotImplementedError

    def _piece_map(self) -> PieceMap | None:
        """How this epoch's draws map to pieces of the datasets (a weighted mixture), or None."""
        return None

    def _finish(self, dataset: int, sample: dict) -> dict:
        """The sample as yielded (a mixture harmonizes it)."""
        return sample

    # -- what the stream reads ----------------------------------------------------------------
    def _consumer_counts(self, world_size: int, workers_per_rank: int) -> np.ndarray:
        """Samples each consumer of the planned shape serves in the current epoch."""
        return self.plan(world_size=world_size, workers_per_rank=workers_per_rank).consumer_counts

    def _blocks(self, plan_shape: tuple[int, int], segments: list[Segment]) -> Iterator[Iterator[Block]]:
        """This consumer's draws, one iterator of blocks per segment (``lerobot_shards.reader.plan.consumer_draws.Block``)."""
        plan = self.plan(world_size=plan_shape[0], workers_per_rank=plan_shape[1])
        # Admissions are learned a block of draws at a time, far enough ahead for prefetch:
        # starting costs the same at any offset and segment length.
        pool_size = self.options.episode_pool_size
        ahead = max(self.options.prefetch_episodes, 1) + pool_size
        return segment_blocks(plan, segments, pool_size=pool_size, ahead=ahead, pieces=self._piece_map())

    def _view(self, rows_as_views: bool = False) -> StreamView:
        """What the draws read: the catalog, each dataset's windows, the read options (read at
        iteration: ``BatchLoader`` may have replaced ``options`` since construction)."""
        return StreamView(
            catalog=self.catalog,
            offsets=self._dataset_offsets,
            options=self.options,
            decoders=self.decoders,
            storages=self._storages,
            rows_as_views=rows_as_views,
        )

    # -- the surface --------------------------------------------------------------------------
    def _world(self, *, worker: int = 0, num_workers: int | None = None) -> World:
        detected = detect_world(self.options.rank, self.options.world_size)
        if num_workers is None:
            return detected
        return World(rank=detected.rank, world_size=detected.world_size, worker=worker, num_workers=num_workers)

    @property
    def resume_identity(self) -> dict[str, Any]:
        """What this stream's resume states are checked against (a copy)."""
        return dict(self._resume.identity)

    def __len__(self) -> int:
        """Samples this rank yields from the start of the current epoch, or from the resume
        point after ``load_state_dict`` (equal on every rank)."""
        return self._resume.per_rank(self.epoch, self._world().world_size, self._consumer_counts)

    def __getitem__(self, index: Any) -> Any:
        # torch's Dataset.__getitem__ raises a bare NotImplementedError: say what works instead.
        raise TypeError(
            f"{type(self).__name__} streams whole episodes and has no random access by index: iterate it "
            "(for sample in ds, or a BatchLoader/DataLoader), or query rows with `lerobot-shards sql` / lerobot_shards.connect()"
        )

    def __repr__(self) -> str:
        catalog = self.catalog
        names = ", ".join(d.name for d in catalog.datasets[:3]) + (
            f" and {len(catalog.datasets) - 3} more" if len(catalog.datasets) > 3 else ""
        )
        cameras = sorted({k for d in catalog.datasets for k in d.video_keys})
        world = self._world()
        return (
            f"{type(self).__name__}({names}: {int(catalog.anchor_counts.sum())} anchors, "
            f"{len(catalog.episode_index)} episodes, cameras {cameras}, epoch {self.epoch}, "
            f"{len(self)} samples for rank {world.rank} of {world.world_size})"
        )

    def worker_counts(self, num_workers: int) -> np.ndarray:
        """(max(1, num_workers),) samples each DataLoader worker of this rank yields until the
        epoch ends (from the resume point after ``load_state_dict``)."""
        return self._resume.worker_counts(self.epoch, self._world(num_workers=num_workers), self._consumer_counts)

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch: a new order and new draws (call before ``iter(loader)``).

        Workers copy the dataset when an iterator starts, so with ``persistent_workers=True``
        they would keep the old epoch: use the default ``persistent_workers=False``.

        Selecting an epoch before that of a state just loaded (``load_state_dict``) leaves
        that state unused: this warns, since a resume loop that starts at epoch 0 would serve
        the epochs before the saved one again. Start the loop at ``state["epoch"]``.
        """
        epoch = int(epoch)
        pending = self._pending_resume
        if pending is not None and epoch < pending[0]:
            warnings.warn(
                f"set_epoch({epoch}) leaves the loaded resume state unused (epoch {pending[0]}, {pending[1]} samples "
                f"consumed): epoch {epoch} starts from its beginning. To resume, start the epoch loop at "
                f"state['epoch'] ({pending[0]})",
                ResumeWarning,
                stacklevel=2,
            )
        self._pending_resume = None
        self.epoch = epoch

    def state_dict(self, *, samples_consumed: int, batch_size: int, num_workers: int, drop_last: bool = False) -> dict:
        """The resume state a trainer saves (identical on every rank: one file serves all).

        Args:
            samples_consumed: samples this rank has received this epoch, counted across
                resumes (the same number on every rank).
            batch_size, num_workers, drop_last: the DataLoader's.

        Returns:
            A JSON-able dict: the epoch, ``samples_consumed``, the epoch's phases (the shape
            it was planned on and every re-split since) and the identity of what is read.
            See ``lerobot_shards.reader.plan.resume_state``.

        Raises:
            ResumeStateError: ``samples_consumed`` is behind the point this run resumed from.
        """
        return self._resume.state_dict(
            epoch=self.epoch,
            world_size=self._world().world_size,
            samples_consumed=int(samples_consumed),
            batch_size=int(batch_size),
            num_workers=int(num_workers),
            drop_last=bool(drop_last),
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue an epoch from a ``state_dict``, by arithmetic only (no data is read to skip).

        Call before ``iter(loader)`` (workers copy the dataset when the iterator starts). With
        the loader shape of the saved run (world size, workers, batch size, drop_last) the
        exact sample sequence of the uninterrupted run continues. On any other shape the
        rest of the epoch is re-split exactly once over the new ranks and workers (another
        order; at most ``world_size - 1`` more anchors dropped, to keep per-rank counts
        equal), and this holds through any chain of resumes. ``len(self)`` then counts the
        samples each rank yields until the epoch ends.

        Raises:
            ResumeStateError: the state belongs to another dataset or configuration (each
                differing field found vs expected), or lacks what an exact resume needs.
        """
        self.epoch = self._resume.load(state)
        self._pending_resume = (self.epoch, state.get("samples_consumed"))

    def stats(self) -> dict[str, int | float | str]:
        """Reader counters since this stream was built, summed over this process and its
        DataLoader workers (peaks for ``max_*``).

        Keys: ``samples``, ``bytes_fetched`` (video bytes read + decoded row bytes),
        ``fetch_seconds`` (background fetch time, summed over threads), ``decode_seconds``,
        ``episodes_admitted`` (admissions: an episode whose anchors several consumers share is
        admitted by each, and again after the pool let it go), ``disk_cache_hits`` (episodes whose video came from
        ``cache_dir``), ``decoder_hits``/``decoder_misses`` (a miss opens a decoder on
        an episode's member), ``frames_decoded``, ``storage_retries``, ``max_open_episodes``,
        ``max_open_bytes`` (one consumer's open pool), ``max_prefetched_bytes`` (one consumer's
        video bytes fetched ahead of use; at most ``prefetch_bytes`` unless a single episode is
        larger). Iterators publish through shared memory (see ``lerobot_shards.reader.runtime.stats``) every
        50 ms and when their stream ends: current while a loader runs, complete once an epoch's
        loader is exhausted. Counts are ints, ``*_seconds`` floats. Also ``decoder_backend``.
        """
        return {**self._stats.snapshot(), "decoder_backend": self.decoder_backend}

    def reset_stats(self) -> None:
        """Zero the counters (call between iterators, not while a loader runs)."""
        self._stats.reset()

    # -- iteration ----------------------------------------------------------------------------
    def _segments(self, world: World) -> tuple[tuple[int, int], list[Segment]]:
        """((plan world size, plan workers per rank), [Segment, ...]): what ``world``'s
        consumer serves this epoch, after any resume."""
        plan_shape, streams = self._resume.streams(self.epoch, world, self._consumer_counts)
        if streams is None:
            counts = self._consumer_counts(*plan_shape)
            return plan_shape, [Segment(world.consumer, 0, int(counts[world.consumer]))]
        sources, starts, stops = streams.segments_of(world.consumer)
        return plan_shape, [Segment(int(c), int(a), int(b)) for c, a, b in zip(sources, starts, stops)]

    def __iter__(self) -> Iterator[dict]:
        return self._samples(rows_as_views=False)

    def _samples_for_batches(self, *, first: tuple[int, int] | None = None) -> Iterator[dict]:
        """The samples ``iter(self)`` yields, their tabular rows left as views of the episode's
        columns: for a consumer that copies each sample into its batch before taking the next
        (``BatchLoader``), which then needs no per-sample copy of each row.

        With ``first=(num_workers, count)``: the first ``count`` samples DataLoader worker 0 of
        ``num_workers`` yields, built in the training process (``BatchLoader`` builds the first
        batch so while no worker runs); only the episodes they need are read.
        """
        if first is None:
            return self._samples(rows_as_views=True)
        world = self._world(worker=0, num_workers=first[0])
        return self._samples(rows_as_views=True, world=world, here=True, limit=first[1])

    def _frame_pixels_per_sample(self) -> int:
        """Pixels a sample's colour videos decode to (each camera's frames per window x height x
        width), the most over the datasets read: the shape ``BatchLoader`` sizes a first batch by."""
        most = 0
        for info, offsets in zip(self.catalog.datasets, self._dataset_offsets):
            pixels = sum(h * w * max(len(offsets.get(key, ())), 1) for key, (h, w) in info.frame_sizes.items())
            most = max(most, pixels)
        return most

    def _past_first_batch(self, samples: int, *, batch_size: int, num_workers: int, drop_last: bool) -> EpochStream:
        """A shallow copy that continues where a loader of that shape stands after ``samples``
        more samples than this stream starts from (``load_state_dict`` of that state), with
        resume bookkeeping of its own: this stream's position, and its ``state_dict``, stay."""
        at = self._resume.resumed_at(self.epoch) + samples
        state = self.state_dict(samples_consumed=at, batch_size=batch_size, num_workers=num_workers, drop_last=drop_last)
        view = copy.copy(self)
        view._resume = copy.deepcopy(self._resume)
        view.load_state_dict(state)
        return view

    def _samples(
        self, *, rows_as_views: bool, world: World | None = None, here: bool = False, limit: int | None = None
    ) -> Iterator[dict]:
        if not here:
            self._pending_resume = None  # iterating uses the loaded state: a later set_epoch moves on
        world = world if world is not None else self._world()
        in_worker = world.num_workers > 0 and not here
        if in_worker:
            freeze_inherited_objects()
        consumer = Consumer(
            self._view(rows_as_views), stats=self._stats, worker=world.worker if in_worker else None, hand_over=here
        )
        plan_shape, segments = self._segments(world)
        if limit is not None:
            segments = first_draws(segments, limit)
        for dataset, sample in consumer.samples(self._blocks(plan_shape, segments)):
            yield self._finish(dataset, sample)


_frozen_in: int | None = None


def freeze_inherited_objects() -> None:
    """In a forked DataLoader worker, once: move every object inherited from the training
    process to the garbage collector's permanent generation (``gc.freeze``, a list splice).

    A full collection writes to the header of every object it tracks; in a forked worker that
    copies every page of the parent's Python heap into the worker (copy-on-write), so a
    worker's private memory jumped by the size of that heap whenever a collection happened to
    run (measured: +85 MB per worker under a 320-dataset mixture, at random). Frozen objects
    are never traversed; the worker still collects what it allocates itself.
    """
    global _frozen_in
    if _frozen_in != os.getpid():
        gc.freeze()
        _frozen_in = os.getpid()


__all__ = ["EpochStream", "freeze_inherited_objects"]
