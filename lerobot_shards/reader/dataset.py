"""``PackedDataset``: stream a packed dataset into PyTorch.

Thin orchestration over pure planning (``epoch_plan``, ``pool_schedule``, ``resume``) and
I/O stages (``packed_index``, ``episode_pool``, ``decode``, ``sample_builder``). Every
consumer (rank x DataLoader worker) derives its own sample stream from the index alone: no
collective, no shared state, and resuming is arithmetic.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, NamedTuple

import numpy as np

from lerobot_shards.core.format import sha256_hex
from lerobot_shards.core.option_fields import keyword_signature, merge_options
from lerobot_shards.core.pack.catalog import CatalogPack, EpisodeCatalog
from lerobot_shards.core.pack.packed_index import PackedIndex
from lerobot_shards.core.storage import Storage
from lerobot_shards.core.windows import resolve_windows
from lerobot_shards.reader.epoch_stream import EpochStream
from lerobot_shards.reader.lerobot_meta import PackedMeta, load_packed_meta, rescale_depth_stats
from lerobot_shards.reader.plan.consumer_draws import SegmentDraws
from lerobot_shards.reader.plan.epoch_plan import EpochPlan, plan_epoch
from lerobot_shards.reader.plan.pool_schedule import DEFAULT_BLOCK_SIZE as POOL_BLOCK_SIZE
from lerobot_shards.reader.read_options import ReadOptions


class AnchorSequence(NamedTuple):
    """Anchors in the order a consumer yields them; each field is an (n,) int64 array."""

    episode_index: np.ndarray
    frame_index: np.ndarray
    # Named as the sample's column; tuple.index() is never called on it.
    index: np.ndarray  # pyright: ignore[reportIncompatibleMethodOverride]
    """Global ``index`` (the sample's ``index`` value)."""


class PackedDataset(EpochStream):
    """Samples of a packed dataset, identical to ``LeRobotDataset[i]`` (lerobot 0.6.1).

    Args:
        root: packed dataset directory or fsspec URL (``s3://bucket/prefix``).
        delta_timestamps: LeRobot windows ``{key: [seconds, ...]}`` (any key, any window).
        episodes: subset of episode indices (default: all).
        where: DuckDB SQL predicate over ``index/samples.parquet`` selecting anchors, e.g.
            ``"chunk_action_pad_after = 0"``.
        options: how to read, as one value (``ReadOptions``: order, pool, frames, fetch,
            storage, pin; ``manifest_sha256`` pins this pack's ``manifest.json``).
        **reading: any field of ``ReadOptions`` by name, replacing ``options``'s
            (``PackedDataset(root, seed=3, return_uint8=True)``). ``help(PackedDataset)``
            lists them.

    Raises:
        FormatError: not a (complete) packed dataset, unknown format version, or an index
            that disagrees with the manifest.
        IntegrityError: a file differs from what was packed (``PinMismatchError``: not the
            pinned manifest). Damage found later, while iterating, raises the same errors
            naming the file.
        ArgumentError (a ``ValueError``): an unknown option (names the closest), a value out
            of range, unknown episodes, a bad ``where`` predicate or a bad window.
    """

    @keyword_signature(ReadOptions)
    def __init__(
        self,
        root: str,
        *,
        delta_timestamps: dict[str, list[float]] | None = None,
        episodes: list[int] | None = None,
        where: str | None = None,
        options: ReadOptions | None = None,
        **reading: Any,
    ):
        options = merge_options(ReadOptions, options, reading, caller="PackedDataset")
        self._set_options(options)
        self.root = str(root)
        self.storage = Storage(self.root, options.storage_options, retry=options.retry)
        self.index = PackedIndex(self.storage, episodes=episodes, where=where, manifest_sha256=options.manifest_sha256)
        self._columns: tuple[np.ndarray, np.ndarray] | None = None
        manifest = self.index.manifest
        # The selection's identity: the sorted distinct episodes (the index selected them).
        selection = (
            None if episodes is None else "sha256:" + sha256_hex(json.dumps(self.index.episodes.episode_index.tolist()).encode())
        )
        super().__init__(
            kind="PackedDataset",
            identity={
                "dataset": self.index.manifest_sha256,
                "episodes": selection,
                "where": where,
                "seed": int(options.seed),
                "shuffle": bool(options.shuffle),
                "episode_pool_size": int(options.episode_pool_size),
                "pool_block_size": POOL_BLOCK_SIZE,
            },
        )
        self.fps = manifest.fps
        self.features = manifest.features
        self.video_keys = list(manifest.video_keys)
        # Every camera: videos, then pictures stored in the rows (image features).
        self.camera_keys = self.video_keys + manifest.features.image_keys
        self.frame_sizes = {k: camera.size for k in self.video_keys if (camera := manifest.features[k].camera) is not None}
        self.tolerance_s = manifest.tolerance_s if options.tolerance_s is None else options.tolerance_s
        self.delta_timestamps = dict(delta_timestamps) if delta_timestamps else None
        self.offsets = resolve_windows(self.delta_timestamps, self.fps, self.tolerance_s, list(self.features))
        self._dataset_offsets, self._storages = [self.offsets], (self.storage,)
        self.tasks = self.index.tasks
        self._meta: PackedMeta | None = None
        info = CatalogPack.opened(
            self.root.rstrip("/").rsplit("/", 1)[-1], self.storage.url, self.index, where=where, tolerance_s=self.tolerance_s
        )
        self.catalog = EpisodeCatalog.from_packs([(info, self.index, self.tasks)])
        self._warn_windows_beyond_episodes([self.offsets], [self.fps], [self.delta_timestamps])
        self._check_decode_device()

    # -- public API -------------------------------------------------------------------------
    @property
    def meta(self) -> PackedMeta:
        """What LeRobot policies and processors read from ``LeRobotDatasetMetadata``
        (``fps``, ``features``, ``stats``, ``camera_keys``, ``video_keys``, ``robot_type``,
        totals, ``tasks``), for this pack: pass it as ``make_policy(cfg, ds_meta=ds.meta)``
        and ``dataset_stats=ds.meta.stats``. Read once (digest-checked), then cached.

        Raises:
            FormatError: ``meta/info.json`` or ``meta/stats.json`` is malformed.
            IntegrityError: one of them differs from what was packed.
        """
        if self._meta is None:
            meta = load_packed_meta(self.storage, self.index.manifest, self.index.info, self.tasks)
            self._meta = rescale_depth_stats(meta, self.options.depth_unit)
        return self._meta

    @property
    def num_anchors(self) -> int:
        """Anchors in the selection (all frames of the selected episodes, or the where= subset)."""
        return int(self.index.anchor_counts.sum())

    def upcoming_anchors(self, *, worker: int = 0, num_workers: int = 0, limit: int | None = 10_000) -> AnchorSequence:
        """The next ``limit`` anchors DataLoader worker ``worker`` of this rank will yield, in order.

        Computed from the index alone for the current epoch and resume state (no shard is
        read), so it is cheap at any offset and shows exactly what an iterator would do:
        ``num_workers=0`` is the main-process iterator. ``limit=None`` lists the whole
        remaining stream. Cost: O(limit) (one planning step per anchor listed, one lookup per
        distinct episode among them), plus O(episodes) once per dataset for its columns.

        Raises:
            PlanError: ``worker`` not in ``[0, max(1, num_workers))``.
        """
        plan_shape, segments = self._segments(self._world(worker=worker, num_workers=num_workers))
        plan = self.plan(world_size=plan_shape[0], workers_per_rank=plan_shape[1])
        positions, anchors = [], []
        for consumer, start, stop in segments:
            remaining = None if limit is None else limit - len(positions)
            if remaining is not None and remaining <= 0:
                break
            for position, anchor_position, _ in itertools.islice(
                SegmentDraws(plan, consumer, start, stop, self.options.episode_pool_size), remaining
            ):
                positions.append(position)
                anchors.append(anchor_position)
        episode_position = np.asarray(positions, dtype=np.int64)
        frame = np.asarray(anchors, dtype=np.int64)
        if self.index.anchor_frames is not None and len(frame):  # anchors filtered by `where`: map them to frames
            order = np.argsort(episode_position, kind="stable")
            grouped = episode_position[order]
            starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
            for first, stop in zip(starts.tolist(), np.r_[starts[1:], len(order)].tolist()):  # one step per distinct episode
                rows = order[first:stop]
                frame[rows] = self.index.anchor_frame(int(grouped[first]), frame[rows])
        episode_index, first_index = self._episode_columns()
        return AnchorSequence(episode_index[episode_position], frame, first_index[episode_position] + frame)

    def _episode_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """Each selected episode's ``episode_index`` and first global frame index (made once)."""
        if self._columns is None:
            episodes = self.index.episodes
            self._columns = (episodes.episode_index, episodes.dataset_from_index)
        return self._columns

    # -- planning -------------------------------------------------------------------------
    def plan(self, *, world_size: int, workers_per_rank: int, epoch: int | None = None) -> EpochPlan:
        """The epoch plan for a world shape (pure function of the index and seed)."""
        return plan_epoch(
            self.index.anchor_counts,
            seed=self.options.seed,
            epoch=self.epoch if epoch is None else epoch,
            world_size=world_size,
            workers_per_rank=workers_per_rank,
            shuffle=self.options.shuffle,
        )
