"""``MixtureDataset``: stream many packed datasets as one, with weights, exact splits and resume.

Two modes:
- **proportional** (``weights=None``): an epoch is exactly once over the union of all anchors.
  It is one epoch plan over the concatenated episodes of every dataset, so every property of
  ``PackedDataset`` (exact rank/worker split, equal per-rank counts, pool, resume by
  arithmetic) carries over unchanged.
- **weighted** (``weights=[...]`` + ``samples_per_epoch``): each consumer's draw picks a source
  with ``reader.plan.mixture_plan.SourceLabels`` (a pure function of the RNG); each source streams
  its own exactly-once cycles of anchors split over the consumers, reshuffled per cycle, and
  cycles when exhausted.

Heterogeneous datasets batch together: ``key_map`` renames keys per dataset; vector keys
(``pad_keys``) are zero-padded to the widest dataset with a ``<key>_mask``; a camera missing
from a dataset is filled with zeros of the camera's shape and ``<camera>_mask = False``;
``delta_timestamps`` are in seconds and resolved per dataset fps; every sample carries
``dataset_index`` and ``dataset_name``. Keys that some dataset lacks (and that are neither
padded vectors nor cameras) are dropped so batches collate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from reader.decode.frames import CpuDecodeStage
from reader.epoch_stream import EpochStream, Segment
from reader.errors import MixtureSpecError
from reader.fetch.packed_index import PackedIndex, load_tasks, verified_read
from reader.format import STATS_PATH, sha256_hex
from reader.format.layout import MAX_RECORD_BYTES
from reader.format.mixture import MixtureSpec, resolve_dataset_path
from reader.lerobot_meta import PackedMeta, aggregate_stats, load_packed_meta
from reader.plan.consumer_draws import segment_blocks
from reader.plan.epoch_plan import EpochPlan
from reader.plan.mixture_plan import DEFAULT_BLOCK as LABEL_BLOCK_SIZE
from reader.plan.mixture_plan import (
    MixtureLayout,
    WeightedMixturePlan,
    plan_proportional,
    weighted_segment_blocks,
)
from reader.plan.pool_schedule import DEFAULT_BLOCK_SIZE as POOL_BLOCK_SIZE
from reader.plan.windows import resolve_windows
from reader.runtime.consumer import DatasetView
from reader.runtime.harmonize import DatasetFeatures, FeatureHarmonizer
from reader.storage import Storage


@dataclass(frozen=True, eq=False)
class MixtureMember:
    """One packed dataset of a mixture, opened: its name, root, checked index and tasks."""

    name: str
    storage: Storage
    index: PackedIndex
    tasks: dict[int, str]

    @classmethod
    def open(cls, name: str, path: str, storage_options: dict | None = None) -> MixtureMember:
        storage = Storage(path, storage_options)
        index = PackedIndex(storage)
        return cls(name=name, storage=storage, index=index, tasks=load_tasks(storage, index.manifest))

    @property
    def fps(self) -> int:
        return self.index.manifest.fps

    @property
    def features(self) -> dict:
        return self.index.manifest.features


def load_mixture_file(path: str, storage_options: dict | None = None, *, allow_remote_paths: bool = False) -> MixtureSpec:
    """Read and validate ``mixture.json``; entries' paths are resolved against its directory.

    Raises:
        MixtureSpecError: the file does not validate, or a dataset path is absolute or a URL
            without ``allow_remote_paths`` (a mixture file must not pick what a reader opens).
    """
    storage = Storage(path.rsplit("/", 1)[0] if "/" in path else ".", storage_options)
    name = path.rsplit("/", 1)[-1]
    size = storage.size(name)
    if size > MAX_RECORD_BYTES:
        raise MixtureSpecError(f"{path}: {size} bytes, more than the {MAX_RECORD_BYTES} a mixture file may have")
    spec = MixtureSpec.from_json(storage.read_bytes(name), where=path)
    resolved = [
        replace(entry, path=resolve_dataset_path(path, entry.path, allow_remote=allow_remote_paths)) for entry in spec.datasets
    ]
    return replace(spec, datasets=tuple(resolved))


class MixtureDataset(EpochStream):
    """Samples drawn from several packed datasets (see the module docstring for the modes).

    Args:
        sources: dataset roots/URLs, or the path/URL of a ``mixture.json``.
        names: dataset names (default: from mixture.json, else the path's last component).
        weights: per-dataset weights (weighted mode; needs ``samples_per_epoch``).
        samples_per_epoch: samples per epoch over all ranks in weighted mode.
        delta_timestamps: windows in seconds, keyed by the *mapped* feature names.
        key_map: ``{dataset name: {source key: mixture key}}`` renames.
        pad_keys: vector features zero-padded to a common width with ``<key>_mask``.
        allow_remote_paths: accept absolute paths and URLs in ``mixture.json`` (by default
            its dataset paths must be relative to the file: opening a mixture must not read or
            send requests to places its author chose).

    Raises:
        ValueError: inconsistent weights, a camera with different shapes across datasets,
            or bad windows.
    """

    def __init__(
        self,
        sources: str | list[str],
        *,
        names: list[str] | None = None,
        weights: list[float] | None = None,
        samples_per_epoch: int | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        key_map: dict[str, dict[str, str]] | None = None,
        pad_keys: tuple[str, ...] = ("observation.state", "action"),
        seed: int = 0,
        shuffle: bool = True,
        episode_pool_size: int = 8,
        rank: int | None = None,
        world_size: int | None = None,
        return_uint8: bool = False,
        storage_options: dict | None = None,
        allow_remote_paths: bool = False,
    ):
        if isinstance(sources, str):
            spec = load_mixture_file(sources, storage_options, allow_remote_paths=allow_remote_paths)
            paths = [d.path for d in spec.datasets]
            names = names or [d.name for d in spec.datasets]
        else:
            paths = list(sources)
            names = names or [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]
        if len(names) != len(paths) or len(set(names)) != len(names):
            raise ValueError(f"need one unique name per dataset, got {names}")
        if (weights is None) != (samples_per_epoch is None):
            raise ValueError("weighted mode needs both weights and samples_per_epoch (proportional mode: neither)")
        if weights is not None and len(weights) != len(paths):
            raise ValueError(f"{len(weights)} weights for {len(paths)} datasets")
        self.names = names
        self.key_map = {name: dict((key_map or {}).get(name, {})) for name in names}
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.samples_per_epoch = samples_per_epoch
        self.seed, self.shuffle, self.pool_size = int(seed), shuffle, int(episode_pool_size)
        self.return_uint8 = return_uint8
        self.members = [MixtureMember.open(name, path, storage_options) for name, path in zip(names, paths)]
        # One place derives the common layout (reader.runtime.harmonize, pure and unit-tested):
        # renames, padded vectors with masks, missing cameras, windows at each dataset's fps.
        self.harmonizer = FeatureHarmonizer.build(
            [DatasetFeatures.from_manifest_features(m.name, m.fps, m.features) for m in self.members],
            key_map=self.key_map, pad_keys=tuple(pad_keys), delta_timestamps=delta_timestamps, return_uint8=return_uint8,
        )
        self._offsets = [
            resolve_windows(self.harmonizer.source_delta_timestamps(i), m.fps, m.index.manifest.tolerance_s, list(m.features))
            for i, m in enumerate(self.members)
        ]
        self._decode_stage = CpuDecodeStage("auto")
        self.delta_timestamps = delta_timestamps or {}
        self.pad_keys = tuple(pad_keys)
        self.cameras = {key: (h, w, c) for key, (c, h, w) in self.harmonizer.cameras.items()}
        self.pad_widths = dict(self.harmonizer.pad_widths)
        self.fps = {m.name: m.fps for m in self.members}
        self._meta: PackedMeta | None = None
        # The members' identities are those of the PackedDatasets a mixture once held (no
        # episode selection, no where=), so saved resume states stay valid.
        members = [[m.name, m.index.manifest_sha256, None, None] for m in self.members]
        super().__init__(
            kind="MixtureDataset",
            identity={
                "mixture": "sha256:" + sha256_hex(json.dumps(members).encode()),
                "weights": None if self.weights is None else [float(w) for w in self.weights],
                "samples_per_epoch": samples_per_epoch,
                "seed": self.seed,
                "shuffle": bool(shuffle),
                "episode_pool_size": self.pool_size,
                "pool_block_size": POOL_BLOCK_SIZE,
                "label_block_size": LABEL_BLOCK_SIZE,
            },
            rank=rank,
            world_size=world_size,
        )

    # -- epochs -----------------------------------------------------------------------------
    @property
    def meta(self) -> PackedMeta:
        """``PackedDataset.meta`` for the harmonized samples: the mixture's keys and shapes
        (cameras, vectors at their padded width, promoted dtypes; no ``_mask`` keys), stats of
        all datasets aggregated as LeRobot's ``aggregate_stats`` does (per element for padded
        vectors), summed totals, the union of tasks. ``fps`` and ``robot_type`` are the
        datasets' common value, or None where they differ.

        Raises:
            FormatError / IntegrityError: a dataset's meta files are malformed or altered.
        """
        if self._meta is None:
            metas = [load_packed_meta(m.storage, m.index.manifest, m.index.info, m.tasks) for m in self.members]
            h = self.harmonizer
            sources = [{v: k for k, v in h.key_maps[i].items() if v is not None} for i in range(len(metas))]
            features: dict[str, dict] = {}
            for key in h.keys:
                if key in h.cameras:
                    channels, height, width = h.cameras[key]
                    features[key] = {"dtype": "video", "shape": (height, width, channels), "names": ["height", "width", "channels"]}
                    continue
                first = next(i for i in range(len(metas)) if key in sources[i])
                feature = dict(metas[first].features[sources[first][key]])
                if key in h.pad_widths:
                    feature.update(shape=(h.pad_widths[key],), names=None)
                if key in h.dtypes:
                    feature["dtype"] = h.dtypes[key]
                features[key] = feature
            stats = aggregate_stats([
                {h.key_maps[i][k]: v for k, v in m.stats.items() if h.key_maps[i].get(k) in features} for i, m in enumerate(metas)
            ])
            fps = {m.fps for m in metas}
            robots = {m.robot_type for m in metas}
            tasks = sorted({t for m in metas for t in m.task_names.values()})
            self._meta = PackedMeta(
                repo_id="mixture:" + ",".join(self.names), fps=fps.pop() if len(fps) == 1 else None, features=features,
                stats=stats, robot_type=robots.pop() if len(robots) == 1 else None,
                total_episodes=sum(m.total_episodes for m in metas), total_frames=sum(m.total_frames for m in metas),
                task_names=dict(enumerate(tasks)), info={"datasets": list(self.names)},
            )
        return self._meta

    @property
    def normalization_stats(self) -> dict[str, dict]:
        """Per-dataset normalization stats (``meta/stats.json``), keyed by dataset name."""
        out = {}
        for member in self.members:
            manifest = member.index.manifest
            out[member.name] = json.loads(verified_read(member.storage, manifest, STATS_PATH)) if STATS_PATH in manifest.files else {}
        return out

    def _layout_of_episodes(self) -> MixtureLayout:
        return MixtureLayout.from_anchor_counts([m.index.anchor_counts for m in self.members])

    def _weighted_plan(self, world_size: int, workers: int) -> WeightedMixturePlan:
        return WeightedMixturePlan.create(
            self._layout_of_episodes(), self.weights, samples_per_epoch=self.samples_per_epoch, seed=self.seed,
            epoch=self.epoch, world_size=world_size, workers_per_rank=workers, shuffle=self.shuffle,
            pool_size=self.pool_size, names=self.names,
        )

    def _proportional_plan(self, world_size: int, workers: int) -> EpochPlan:
        return plan_proportional(
            self._layout_of_episodes(), seed=self.seed, epoch=self.epoch, world_size=world_size, workers_per_rank=workers,
            shuffle=self.shuffle,
        )

    def _consumer_counts(self, world_size: int, workers: int) -> np.ndarray:
        if self.weights is None:
            return self._proportional_plan(world_size, workers).consumer_counts
        return self._weighted_plan(world_size, workers).consumer_counts

    def _views(self) -> list[DatasetView]:
        return [
            DatasetView(storage=m.storage, index=m.index, tasks=m.tasks, offsets=offsets, decode_stage=self._decode_stage,
                        return_uint8=self.return_uint8)
            for m, offsets in zip(self.members, self._offsets)
        ]

    def _blocks(self, plan_shape: tuple[int, int], segments: list[Segment]):
        """This consumer's draws as ``(dataset, local episode, anchor, last)`` blocks."""
        plan_world, plan_workers = plan_shape
        if self.weights is not None:
            return weighted_segment_blocks(self._weighted_plan(plan_world, plan_workers), segments)
        layout = self._layout_of_episodes()

        def to_local(episode: int) -> tuple[int, int]:
            dataset, local = layout.to_local(episode)
            return int(dataset), int(local)

        ahead = max(DatasetView.prefetch_episodes, 1) + self.pool_size
        return segment_blocks(self._proportional_plan(plan_world, plan_workers), segments, pool_size=self.pool_size,
                              ahead=ahead, to_local=to_local)

    def _finish(self, dataset: int, sample: dict) -> dict:
        return self.harmonizer.apply(dataset, sample)
