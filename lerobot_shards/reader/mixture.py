"""``MixtureDataset``: stream many packed datasets as one, with weights, exact splits and resume.

Both modes are one epoch plan over *pieces* (``lerobot_shards.reader.plan.mixture_plan``), so every property
of ``PackedDataset`` (exact rank/worker split, equal per-rank counts, one pool, resume and
re-split by arithmetic) holds for a mixture, and the pool bounds open episodes over all
datasets together:

- **proportional** (``weights=None``): an epoch is exactly once over the union of all anchors.
- **weighted** (``weights=[...]`` + ``samples_per_epoch``): each dataset gives the epoch its
  quota of anchors, cycling through its anchors exactly once per cycle, reshuffled per cycle.

At scale, open the ``mixture.json`` that ``lerobot-shards mixture create`` writes: it carries a
compiled index of every pack (``lerobot_shards.core.format.mixture_index``), so opening a mixture of
thousands of packs reads a handful of files, and a pack's own files are read only when a
consumer admits one of its episodes (every byte checked against digests chained to the one
digest of ``mixture.json``). A list of pack roots (or a version-1 ``mixture.json``) is opened
pack by pack: fine for a few datasets.

Heterogeneous datasets batch together: ``key_map`` renames keys per dataset; vector keys
(``pad_keys``) are zero-padded to the widest dataset with a ``<key>_mask``; a camera missing
from a dataset is filled with zeros of the camera's shape and ``<camera>_mask = False``;
``delta_timestamps`` are in seconds and resolved per dataset fps (``delta_frames``: in frames at
each dataset's own fps, a policy's steps over datasets of different rates); every sample carries
``dataset_index`` and ``dataset_name``. Keys that some dataset lacks (and that are neither
padded vectors nor cameras) are dropped so batches collate.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings
from collections import Counter
from dataclasses import replace
from typing import Any

import numpy as np

from lerobot_shards.core.errors import (
    ArgumentError,
    FormatError,
    HarmonizeError,
    MixtureFeatureWarning,
    MixtureSpecError,
    ObjectNotFoundError,
    PinMismatchError,
)
from lerobot_shards.core.format import MANIFEST_PATH, sha256_hex
from lerobot_shards.core.format.features import parse_features
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.lerobot_reading import stats_problems
from lerobot_shards.core.format.limits import MAX_JSON_DEPTH, MAX_RECORD_BYTES
from lerobot_shards.core.format.mixture import (
    MIXTURE_FILE,
    PREROLL_VERSION,
    IndexFile,
    MixtureEntry,
    MixtureSpec,
    mixture_feature,
    resolve_dataset_path,
)
from lerobot_shards.core.format.mixture_index import INDEX_FILES, PREROLL_COLUMN, table_budget
from lerobot_shards.core.format.parquet import read_bounded
from lerobot_shards.core.option_fields import keyword_signature, merge_options
from lerobot_shards.core.pack.catalog import CatalogPack, EpisodeCatalog
from lerobot_shards.core.pack.packed_index import PackedIndex, read_recorded, read_recorded_all, read_stats
from lerobot_shards.core.storage import RetryPolicy, Storage
from lerobot_shards.core.windows import resolve_windows
from lerobot_shards.reader.epoch_stream import EpochStream
from lerobot_shards.reader.lerobot_meta import (
    PackedMeta,
    aggregate_stats,
    load_packed_meta,
    meta_from_record,
    rescale_depth_stats,
)
from lerobot_shards.reader.plan.epoch_plan import EpochPlan, plan_epoch
from lerobot_shards.reader.plan.mixture_plan import EpochPieces, MixtureLayout, PieceMap, proportional_pieces, weighted_pieces
from lerobot_shards.reader.plan.pool_schedule import DEFAULT_BLOCK_SIZE as POOL_BLOCK_SIZE
from lerobot_shards.reader.read_options import ReadOptions
from lerobot_shards.reader.runtime.harmonize import DatasetFeatures, FeatureHarmonizer

PLAN_KIND = "pieces-1"
"""Recorded in resume states: how epochs are planned (weighted mixtures before it drew each
sample's source at random, a sequence a state of this version could not continue)."""


def mixture_file_of(path: str, storage_options: dict | None = None, *, retry: RetryPolicy = RetryPolicy()) -> str:
    """The mixture file a path names: the path itself, or ``FOLDER/mixture.json`` for the folder
    ``mixture create`` wrote it in.

    Raises:
        ArgumentError: the folder is a packed dataset (its ``manifest.json``), not a mixture, or
            a folder without a ``mixture.json`` (names the command that writes one).
    """
    if path.rstrip("/").endswith(".json"):
        return path
    folder = Storage(path, storage_options, retry=retry)
    if folder.exists(MIXTURE_FILE):
        return f"{path.rstrip('/')}/{MIXTURE_FILE}"
    if folder.exists(MANIFEST_PATH):
        raise ArgumentError(
            f"{path} is a packed dataset, not a mixture: open it with lerobot_shards.PackedDataset, or give "
            f"MixtureDataset a list of pack folders ([{path!r}, ...]) or the {MIXTURE_FILE} `lerobot-shards mixture create` wrote"
        )
    if _is_folder(folder):
        raise ArgumentError(
            f"no {MIXTURE_FILE} in {path}: run `lerobot-shards mixture create {path}` to write one for the packs in it, "
            f"or give MixtureDataset a list of pack folders"
        )
    return path


def _is_folder(storage: Storage) -> bool:
    """Whether a storage root is a folder (a local directory, or a bucket prefix with objects)."""
    try:
        return bool(storage.fs.isdir(storage.root))
    except (OSError, ValueError):  # unknown here: reading it as the file then says what is wrong
        return False


def load_mixture_file(
    path: str,
    storage_options: dict | None = None,
    *,
    allow_remote_paths: bool = False,
    manifest_sha256: str | None = None,
    retry: RetryPolicy = RetryPolicy(),
) -> tuple[MixtureSpec, str]:
    """Read and validate ``mixture.json``; entries' paths are resolved against its directory.

    Returns:
        ``(spec, pin)``: the pin is ``sha256:<hex>`` of the file's bytes.

    Raises:
        MixtureSpecError: the file does not validate, or a dataset path is absolute or a URL
            without ``allow_remote_paths`` (a mixture file must not pick what a reader opens).
        PinMismatchError: not the pinned file.
        ArgumentError: ``path`` is a packed dataset, not a mixture.
    """
    path = mixture_file_of(path, storage_options, retry=retry)
    storage = Storage(path.rsplit("/", 1)[0] if "/" in path else ".", storage_options, retry=retry)
    name = path.rsplit("/", 1)[-1]
    try:
        data = storage.read_prefix(name, MAX_RECORD_BYTES + 1)  # one request; a byte beyond the bound tells it is too large
    except ObjectNotFoundError:
        missing = storage.missing_root()  # a Hub repo or revision that is not there says so
        if missing:
            raise MixtureSpecError(f"{path}: {missing}") from None
        raise
    if len(data) > MAX_RECORD_BYTES:
        raise MixtureSpecError(f"{path}: more than the {MAX_RECORD_BYTES} bytes a mixture file may have")
    pin = "sha256:" + sha256_hex(data)
    if manifest_sha256 is not None and pin != manifest_sha256:
        raise PinMismatchError(f"{path}: is {pin}, not the pinned {manifest_sha256} (the mixture was re-created or altered)")
    spec = MixtureSpec.from_json(data, where=path)
    resolved = [
        replace(entry, path=resolve_dataset_path(path, entry.path, allow_remote=allow_remote_paths)) for entry in spec.datasets
    ]
    return replace(spec, datasets=tuple(resolved)), pin


class MixtureDataset(EpochStream):
    """Samples drawn from several packed datasets (see the module docstring for the modes).

    Reads with the same ``ReadOptions`` as ``PackedDataset`` (one code path reads both);
    ``episodes`` and ``where`` are not options here: a mixture's anchors are chosen by
    ``mixture create --where`` and recorded, and applied, per dataset.

    Args:
        sources: the path/URL of a ``mixture.json``, or a list of pack roots.
        names: dataset names (default: from mixture.json, else the path's last component).
        weights: per-dataset weights (weighted mode; needs ``samples_per_epoch``).
        samples_per_epoch: samples per epoch over all ranks in weighted mode.
        delta_timestamps: windows in seconds, keyed by the *mapped* feature names.
        delta_frames: windows in frames taken at each dataset's own fps (instead of
            ``delta_timestamps``): ``{"action": range(50)}`` is 50 frames of every dataset, 1.7 s
            at 30 fps and 5 s at 10 fps. ``lerobot-shards train --shards.mixed_rates=frames``.
        key_map: ``{dataset name: {source key: mixture key}}`` renames, applied over those
            ``mixture.json`` records (``mixture create --key-map``) for the same source keys.
        pad_keys: vector features zero-padded to a common width with ``<key>_mask``.
        allow_remote_paths: accept absolute paths and URLs in ``mixture.json`` (by default
            its dataset paths must be relative to the file: opening a mixture must not read or
            send requests to places its author chose).
        allow_duplicates: accept the same pack (same manifest digest, or the same root) more
            than once; by default that is refused, naming both entries.
        options: how to read (``ReadOptions``). Here ``manifest_sha256`` pins the mixture:
            ``sha256:<hex>`` of ``mixture.json``'s bytes (with a compiled mixture every byte
            read is then checked against digests it records); ``tolerance_s`` overrides every
            dataset's own.
        **reading: any field of ``ReadOptions`` by name, replacing ``options``'s.

    Raises:
        MixtureSpecError: a malformed mixture file, the same pack twice, or an index that
            disagrees with it.
        PinMismatchError: not the pinned mixture file.
        HarmonizeError: datasets that cannot batch together (names them).
        FormatError, IntegrityError: a pack or compiled index file is damaged or altered.
        ValueError: inconsistent weights, or bad windows.
    """

    @keyword_signature(ReadOptions)
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
        allow_remote_paths: bool = False,
        allow_duplicates: bool = False,
        options: ReadOptions | None = None,
        delta_frames: dict[str, list[int]] | None = None,
        **reading: Any,
    ):
        options = merge_options(ReadOptions, options, reading, caller="MixtureDataset")
        self._set_options(options)
        self._meta_records: list[dict] | None = None
        self._compiled: tuple[Storage, MixtureSpec] | None = None
        self._meta: PackedMeta | None = None
        self._raw_stats: dict[str, dict] | None = None  # each pack's meta/stats.json, as read for meta
        self._pieces_cache: dict[int, EpochPieces] = {}
        self._recorded_key_maps: list[dict[str, str | None]] = []
        names = self._open(sources, names, allow_remote_paths=allow_remote_paths)
        _check_names_and_mode(names, weights, samples_per_epoch)
        if not allow_duplicates:
            _refuse_duplicates(self.catalog.datasets)
        self.names = list(names)
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self.samples_per_epoch = samples_per_epoch
        self._harmonize(key_map or {}, tuple(pad_keys), delta_timestamps, delta_frames)
        self.layout = MixtureLayout.from_anchor_counts(self.catalog.dataset_anchor_counts())
        super().__init__(kind="MixtureDataset", identity=self._identity())
        if self.weights is not None:  # refuse bad weights now, not in the first worker
            self._pieces(0)

    def _open(self, sources: str | list[str], names: list[str] | None, *, allow_remote_paths: bool) -> list[str]:
        """Open the mixture (a ``mixture.json``, compiled or not, or a list of pack roots) into
        ``self.catalog``; returns the datasets' names.

        Raises:
            ArgumentError: as many names as datasets are needed; a pin needs a mixture file.
        """
        options = self.options
        if isinstance(sources, str):
            sources = mixture_file_of(sources, options.storage_options, retry=options.retry)  # a folder names its mixture.json
            spec, self.mixture_sha256 = load_mixture_file(
                sources,
                options.storage_options,
                allow_remote_paths=allow_remote_paths,
                manifest_sha256=options.manifest_sha256,
                retry=options.retry,
            )
            names = list(names or spec.names)
            if len(names) != len(spec.datasets):
                raise ArgumentError(f"{len(names)} names for the {len(spec.datasets)} datasets of {sources}")
            self._recorded_key_maps = [dict(entry.key_map) for entry in spec.datasets]
            if spec.index is None:
                self.catalog = self._open_packs([e.path for e in spec.datasets], names, list(spec.datasets))
                return names
            base = Storage(sources.rsplit("/", 1)[0] if "/" in sources else ".", options.storage_options, retry=options.retry)
            self.catalog = _open_compiled(base, spec, names, sources)
            self._compiled = (base, spec)
            return names
        if options.manifest_sha256 is not None:
            raise ArgumentError("manifest_sha256 pins a mixture.json: give its path, not a list of packs")
        paths = list(sources)
        names = names or [p.rstrip("/").rsplit("/", 1)[-1] for p in paths]
        if len(names) != len(paths):
            raise ArgumentError(f"{len(names)} names for {len(paths)} datasets")
        self.mixture_sha256 = None
        self.catalog = self._open_packs(paths, names, [None] * len(paths))
        return names

    def with_uint8_frames(self):
        """``EpochStream.with_uint8_frames``, with missing cameras filled with uint8 zeros too."""
        view = super().with_uint8_frames()
        if view is not None:
            view.harmonizer = dataclasses.replace(self.harmonizer, return_uint8=True)
        return view

    def _harmonize(
        self,
        key_map: dict[str, dict[str, str]],
        pad_keys: tuple[str, ...],
        delta_timestamps: dict[str, list[float]] | None,
        delta_frames: dict[str, list[int]] | None = None,
    ) -> None:
        """The common layout of the datasets' samples and each dataset's windows at its fps.

        Raises:
            HarmonizeError: datasets that cannot batch together (names them).
            WindowError: a window that does not resolve at some dataset's fps.
        """
        # One place derives the common layout (lerobot_shards.reader.runtime.harmonize, pure and unit-tested):
        # renames, padded vectors with masks, missing cameras, windows at each dataset's fps.
        datasets, tolerance_s = self.catalog.datasets, self.options.tolerance_s
        unknown = sorted(set(key_map) - set(self.names))
        if unknown:  # a rename of no dataset would be dropped unseen
            raise HarmonizeError(f"key_map names datasets {unknown} that are not in the mixture {self.names}")
        recorded = self._recorded_key_maps or [{} for _ in self.names]
        self.key_map = {name: {**recorded[i], **key_map.get(name, {})} for i, name in enumerate(self.names)}
        self.harmonizer = FeatureHarmonizer.build(
            [DatasetFeatures(d.name, d.fps, d.features) for d in datasets],
            key_map=self.key_map,
            pad_keys=pad_keys,
            delta_timestamps=delta_timestamps,
            delta_frames=delta_frames,
            return_uint8=self.options.return_uint8,
        )
        if self.harmonizer.dropped:
            named = "; ".join(f"{key} (in {', '.join(having)})" for key, having in self.harmonizer.dropped.items())
            warnings.warn(
                f"features only some datasets have, which samples cannot carry (not numeric, or shapes differ), "
                f"are left out of every sample: {named}; map or drop them with key_map to silence this",
                MixtureFeatureWarning,
                stacklevel=3,
            )
        self.tolerance_s = tolerance_s
        self._dataset_offsets = [
            resolve_windows(
                self.harmonizer.source_delta_timestamps(i),
                d.fps,
                d.tolerance_s if tolerance_s is None else tolerance_s,
                list(d.features),
            )
            for i, d in enumerate(datasets)
        ]
        self.delta_timestamps = delta_timestamps or {}
        self.delta_frames = delta_frames or {}
        given = [None if delta_frames else self.harmonizer.source_delta_timestamps(i) for i in range(len(datasets))]
        self._warn_windows_beyond_episodes(self._dataset_offsets, [d.fps for d in datasets], given)
        self._check_decode_device()
        self.pad_keys = pad_keys
        self.cameras = {key: (h, w, c) for key, (c, h, w) in self.harmonizer.cameras.items()}
        self.pad_widths = dict(self.harmonizer.pad_widths)
        self.fps = {d.name: d.fps for d in datasets}

    def _identity(self) -> dict:
        """What this mixture's resume states are checked against: its packs (names, pins,
        selections, anchors), the mode, the order's seed and the pool."""
        datasets, options = self.catalog.datasets, self.options
        members = [
            [d.name, d.manifest_sha256, d.where, int(a.sum())] for d, a in zip(datasets, self.catalog.dataset_anchor_counts())
        ]
        return {
            "mixture": "sha256:" + sha256_hex(json.dumps(members).encode()),
            "weights": None if self.weights is None else [float(w) for w in self.weights],
            "samples_per_epoch": self.samples_per_epoch,
            "seed": int(options.seed),
            "shuffle": bool(options.shuffle),
            "episode_pool_size": int(options.episode_pool_size),
            "pool_block_size": POOL_BLOCK_SIZE,
            "plan": PLAN_KIND,
        }

    def _open_packs(self, paths: list[str], names: list[str], entries: list[MixtureEntry | None]) -> EpisodeCatalog:
        """A catalog of packs opened one by one (each one's manifest, indexes and tasks): the
        path for lists of roots and mixture files without a compiled index."""
        packs = []
        for path, name, entry in zip(paths, names, entries):
            storage = Storage(path, self.options.storage_options, retry=self.options.retry)
            where = entry.where if entry is not None else None
            pin = entry.manifest_sha256 if entry is not None else None
            index = PackedIndex(storage, where=where, manifest_sha256=pin)
            if entry is not None and int(index.anchor_counts.sum()) != entry.anchors:
                raise MixtureSpecError(
                    f"{name}: {int(index.anchor_counts.sum())} anchors{f' where {where}' if where else ''}, "
                    f"the mixture file records {entry.anchors}; re-run `lerobot-shards mixture create`"
                )
            packs.append((CatalogPack.opened(name, storage.url, index, where=where), index, index.tasks))
        return EpisodeCatalog.from_packs(packs)

    # -- metadata -------------------------------------------------------------------------------
    @property
    def datasets(self) -> list[CatalogPack]:
        """The packs, in mixture order (``dataset_index`` of a sample is a position here)."""
        return self.catalog.datasets

    def _dataset_metas(self) -> list[PackedMeta]:
        catalog = self.catalog
        if self._compiled is not None:
            base, spec = self._compiled
            records = _read_meta_records(base, spec)
            metas = [meta_from_record(records[i], d, catalog.tasks(i)) for i, d in enumerate(catalog.datasets)]
        else:
            metas = []
            raw = self._raw_stats = {}
            for i, d in enumerate(catalog.datasets):
                storage = Storage(d.root, self.options.storage_options, retry=self.options.retry)
                index = PackedIndex(storage, manifest_sha256=d.manifest_sha256)
                raw[d.name] = read_stats(storage, index.manifest)  # kept: normalization_stats reads no pack again
                metas.append(load_packed_meta(storage, index.manifest, index.info, catalog.tasks(i), raw_stats=raw[d.name]))
        return [rescale_depth_stats(m, self.options.depth_unit) for m in metas]

    @property
    def meta(self) -> PackedMeta:
        """``PackedDataset.meta`` for the harmonized samples: the mixture's keys and shapes
        (cameras, vectors at their padded width, promoted dtypes; no ``_mask`` keys), stats of
        all datasets aggregated as LeRobot's ``aggregate_stats`` does (per element for padded
        vectors), summed totals, the union of tasks. ``fps`` and ``robot_type`` are the
        datasets' common value, or None where they differ. A compiled mixture reads it from
        its index (one file); otherwise every pack's metadata is read.

        Raises:
            FormatError / IntegrityError: a dataset's meta files are malformed or altered.
        """
        if self._meta is None:
            metas = self._dataset_metas()
            h = self.harmonizer
            sources = [{v: k for k, v in h.key_maps[i].items() if v is not None} for i in range(len(metas))]
            features: dict[str, dict] = {}
            for key in h.keys:
                if key in h.cameras:
                    channels, height, width = h.cameras[key]
                    features[key] = {
                        "dtype": "video",
                        "shape": (height, width, channels),
                        "names": ["height", "width", "channels"],
                    }
                    continue
                first = next(i for i in range(len(metas)) if key in sources[i])
                feature = dict(metas[first].features[sources[first][key]])
                if key in h.pad_widths:
                    feature.update(shape=(h.pad_widths[key],), names=None)
                if key in h.dtypes:
                    feature["dtype"] = h.dtypes[key]
                features[key] = feature
            parts = [
                {mapped: v for k, v in m.stats.items() if (mapped := h.key_maps[i].get(k)) is not None and mapped in features}
                for i, m in enumerate(metas)
            ]
            stats = aggregate_stats(_sound_stats(parts, self.names))
            fps = {m.fps for m in metas}
            robots = {m.robot_type for m in metas}
            tasks = sorted({t for m in metas for t in m.task_names.values()})
            self._meta = PackedMeta(
                repo_id="mixture:" + ",".join(self.names),
                fps=fps.pop() if len(fps) == 1 else None,
                features=features,
                stats=stats,
                robot_type=robots.pop() if len(robots) == 1 else None,
                total_episodes=sum(m.total_episodes for m in metas),
                total_frames=sum(m.total_frames for m in metas),
                task_names=dict(enumerate(tasks)),
                info={"datasets": list(self.names)},
            )
        return self._meta

    @property
    def normalization_stats(self) -> dict[str, dict]:
        """Per-dataset normalization stats (``meta/stats.json``), keyed by dataset name."""
        if self._compiled is not None:
            base, spec = self._compiled
            return {d.name: r.get("stats") or {} for d, r in zip(self.catalog.datasets, _read_meta_records(base, spec))}
        if self._raw_stats is None:
            self.meta  # noqa: B018 - reads each pack's stats once, keeping them
        assert self._raw_stats is not None
        return copy.deepcopy(self._raw_stats)

    # -- planning -------------------------------------------------------------------------------
    def _pieces(self, epoch: int) -> EpochPieces:
        """This epoch's pieces (the last two epochs asked are kept: planning asks repeatedly)."""
        pieces = self._pieces_cache.get(epoch)
        if pieces is None:
            if self.weights is None or self.samples_per_epoch is None:  # both or neither (_check_names_and_mode)
                pieces = proportional_pieces(self.layout)
            else:
                pieces = weighted_pieces(
                    self.layout,
                    self.weights,
                    samples_per_epoch=self.samples_per_epoch,
                    seed=self.options.seed,
                    epoch=epoch,
                    shuffle=self.options.shuffle,
                    names=self.names,
                )
            self._pieces_cache = {**dict(list(self._pieces_cache.items())[-1:]), epoch: pieces}
        return pieces

    def plan(self, *, world_size: int, workers_per_rank: int, epoch: int | None = None) -> EpochPlan:
        """The epoch plan over this epoch's pieces for a world shape (pure arithmetic)."""
        epoch = self.epoch if epoch is None else epoch
        return plan_epoch(
            self._pieces(epoch).counts,
            seed=self.options.seed,
            epoch=epoch,
            world_size=world_size,
            workers_per_rank=workers_per_rank,
            shuffle=self.options.shuffle,
        )

    # -- iteration ------------------------------------------------------------------------------
    def _piece_map(self) -> PieceMap | None:
        """Weighted: this epoch's draws over pieces of the datasets; proportional: None."""
        if self.weights is None:
            return None
        return PieceMap(self._pieces(self.epoch), self.layout, self.options.seed, self.options.shuffle)

    def _finish(self, dataset: int, sample: dict) -> dict:
        return self.harmonizer.apply(dataset, sample)


def _check_names_and_mode(names: list[str], weights: list[float] | None, samples_per_epoch: int | None) -> None:
    """Names unique; weights and ``samples_per_epoch`` together (weighted) or neither.

    Raises:
        ArgumentError: names that repeat, one of the two without the other, or weights that do
            not match the datasets.
    """
    if len(set(names)) != len(names):
        raise ArgumentError(
            f"need one unique name per dataset, got duplicates {sorted({n for n in names if names.count(n) > 1})}"
        )
    if (weights is None) != (samples_per_epoch is None):
        raise ArgumentError("weighted mode needs both weights and samples_per_epoch (proportional mode: neither)")
    if weights is not None and len(weights) != len(names):
        raise ArgumentError(f"{len(weights)} weights for {len(names)} datasets")


def _refuse_duplicates(datasets: list[CatalogPack]) -> None:
    """The same pack twice (one manifest digest, or one root) draws its episodes twice as
    often, which is never what a mixture means; ``allow_duplicates=True`` says it is."""
    seen: dict[str, str] = {}
    for d in datasets:
        for key in (d.manifest_sha256, d.root.rstrip("/")):
            if key in seen and seen[key] != d.name:
                raise MixtureSpecError(
                    f"datasets {seen[key]!r} and {d.name!r} are the same pack ({'manifest ' + key if key.startswith('sha256:') else key}); "
                    "remove one, or pass allow_duplicates=True to draw it twice as often"
                )
            seen[key] = d.name


def _index_file(spec: MixtureSpec, name: str) -> IndexFile:
    """What ``mixture.json`` records for the compiled file ``name``.

    Raises:
        MixtureSpecError: the mixture records no compiled index (only a compiled one is read so).
    """
    if spec.index is None:
        raise MixtureSpecError(f"mixture.json records no compiled index, so no {name!r} table")
    return spec.index[name]


def _recorded(spec: MixtureSpec, name: str) -> tuple[str, int, str]:
    """``(path, bytes, sha256)`` that ``mixture.json`` records for a compiled file."""
    entry = _index_file(spec, name)
    return entry.path, entry.bytes, entry.sha256


def _verified_index_file(base: Storage, spec: MixtureSpec, name: str) -> bytes:
    path, size, sha256 = _recorded(spec, name)
    return read_recorded(base, path, size=size, sha256=sha256)


def _read_table(base: Storage, spec: MixtureSpec, name: str, data: bytes, where: str):
    """A compiled table (its ``data``, checked against its digest), checked against its row
    count, decoded within what an honest table of its rows can be (``table_budget``: the
    members the datasets declare, at most as many per episode as the mixture has cameras)."""
    entry = _index_file(spec, name)
    cameras = max((len(d.video_keys) for d in spec.datasets), default=0)
    listed = Counter(d.manifest_sha256 for d in spec.datasets if d.manifest_sha256)
    budget = table_budget(
        name,
        rows=entry.rows,
        members=spec.members,
        cameras=cameras,
        encoded=len(data),
        duplicates=max(listed.values(), default=1),
        preroll=spec.version >= PREROLL_VERSION,
    )
    return read_bounded(
        data,
        where=base.describe(entry.path),
        rows=entry.rows,
        rows_expected=f"{where} records {entry.rows}",
        max_rows=entry.rows,
        budget=budget,
    )


def _open_compiled(base: Storage, spec: MixtureSpec, names: list[str], where: str) -> EpisodeCatalog:
    """The catalog of a compiled mixture: four table files, each checked against the digest
    and row count ``mixture.json`` records, then every value checked (``EpisodeCatalog``)."""
    datasets = [CatalogPack.recorded(name, entry) for name, entry in zip(names, spec.datasets)]
    names_read = [name for name in INDEX_FILES if name != "meta"]
    # One round of requests for the four tables and the packs' records, each checked against
    # its recorded digest.
    data = read_recorded_all(base, {n: _recorded(spec, n) for n in INDEX_FILES})
    _check_recorded_features(spec, _meta_records(data.pop("meta"), spec, where=base.describe(_index_file(spec, "meta").path)))
    tables = {name: _read_table(base, spec, name, data.pop(name), where) for name in names_read}
    if PREROLL_COLUMN[0] in tables["episodes"].column_names and spec.version < PREROLL_VERSION:
        raise MixtureSpecError(
            f"{where}: the compiled episodes table lists members' pre-roll, which needs version {PREROLL_VERSION}"
        )
    return EpisodeCatalog.from_tables(
        datasets,
        tables,
        episodes_per_dataset=[e.episodes for e in spec.datasets],
        anchors_per_dataset=[e.anchors for e in spec.datasets],
        where=where,
    )


def _read_meta_records(base: Storage, spec: MixtureSpec) -> list[dict]:
    return _meta_records(_verified_index_file(base, spec, "meta"), spec, where=base.describe(_index_file(spec, "meta").path))


def _check_recorded_features(spec: MixtureSpec, records: list[dict]) -> None:
    """Each entry's features in ``mixture.json`` are what its pack's manifest says (the record
    ``mixture create`` copied into ``_mixture/meta.json``): a compiled mixture reads samples by the
    former (a depth quantizer decides their values), so one altered without the other is refused.

    Raises:
        MixtureSpecError: names the dataset and the feature on which the two disagree.
    """
    for entry, record in zip(spec.datasets, records):
        try:
            packed = parse_features(record.get("features"), where=f"mixture meta of {entry.name!r}")
        except FormatError as err:
            raise MixtureSpecError(str(err)) from None
        recorded = {key: mixture_feature(feature) for key, feature in packed.items()}
        wrong = sorted(k for k in set(recorded) | set(entry.features) if recorded.get(k) != entry.features.get(k))
        if wrong:
            raise MixtureSpecError(
                f"{MIXTURE_FILE}: dataset {entry.name!r}: features {wrong[:5]} differ from what its pack records "
                "(_mixture/meta.json); one of the two was altered: re-run `lerobot-shards mixture create`"
            )


def _meta_records(data: bytes, spec: MixtureSpec, *, where: str) -> list[dict]:
    # Stats are copied from each pack's stats.json, which may hold non-finite numbers.
    value = load_json(data, where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH, allow_nan=True)
    records = value.get("datasets") if isinstance(value, dict) else None
    if not isinstance(records, list) or len(records) != len(spec.datasets) or not all(isinstance(r, dict) for r in records):
        raise FormatError(f"{where}: 'datasets' must list one object per dataset of the mixture ({len(spec.datasets)})")
    return records


def _sound_stats(parts: list[dict], names: list[str]) -> list[dict]:
    """Each dataset's statistics without the features whose statistics are unsound
    (``stats_problems``: NaN, inf, min above max, ...): one community dataset's NaN mean would
    otherwise make the mixture's aggregate NaN and every dataset's normalisation with it. What
    is left out is said once, by dataset and feature."""
    sound, left_out = [], []
    for name, part in zip(names, parts, strict=True):
        problems = stats_problems(part)
        sound.append({k: v for k, v in part.items() if k not in problems})
        left_out += [f"{k} of {name} ({what})" for k, what in problems.items()]
    if left_out:
        named = "; ".join(left_out[:10]) + (f" and {len(left_out) - 10} more" if len(left_out) > 10 else "")
        warnings.warn(
            f"statistics left out of the mixture's aggregate (ds.meta.stats), not finite or contradictory: {named}",
            MixtureFeatureWarning,
            stacklevel=3,
        )
    return sound
