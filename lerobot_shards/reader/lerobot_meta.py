"""``PackedDataset.meta``: what LeRobot policies and processors read from a dataset's metadata,
for a packed dataset (local or in a bucket), without importing lerobot.

LeRobot builds a policy with ``make_policy(cfg, ds_meta=...)`` and its normalization with
``make_pre_post_processors(cfg, dataset_stats=ds_meta.stats)``; both read ``features``,
``stats``, ``fps`` and the key lists of a ``LeRobotDatasetMetadata``. ``PackedMeta`` has those
attributes with the same names, types and values, computed from the pack: ``features`` as
packed (video shapes and codec info after ``--resize``/re-encoding, from the manifest),
totals of the packed episodes, ``stats`` from the source's ``meta/stats.json`` (over the
source's episodes: a pack of a subset keeps the source's normalization), ``tasks`` as LeRobot's
DataFrame (task strings as the index, a ``task_index`` column).

Every file is read through its manifest digest; values are type-checked (they come from data).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lerobot_shards.core.errors import FormatError, IntegrityError
from lerobot_shards.core.format import MM_PER_METRE, STATS_PATH
from lerobot_shards.core.format.features import Features, parse_features
from lerobot_shards.core.format.fields import is_int
from lerobot_shards.core.format.lerobot_info import LeRobotInfo
from lerobot_shards.core.format.lerobot_stats import aggregate_stats
from lerobot_shards.core.format.manifest import Manifest
from lerobot_shards.core.pack.packed_index import read_stats
from lerobot_shards.core.storage import Storage

# LeRobot 0.6.1's language columns (lerobot/datasets/language.py), named here to keep lerobot
# out of the reader's imports.
LANGUAGE_COLUMNS = ("language_persistent", "language_events")

# stats.json is a few KB for real datasets; refuse anything absurd before parsing it.


@dataclass
class PackedMeta:
    """The metadata of a packed dataset in ``LeRobotDatasetMetadata``'s shape (see the module)."""

    repo_id: str
    fps: float | None  # None: a mixture of datasets recorded at different rates; 29.97 stays a float
    features: dict[str, dict]
    # numpy arrays as read; LeRobot's trainer may replace some with tensors (--dataset.use_imagenet_stats).
    stats: dict[str, dict[str, Any]]
    robot_type: str | None
    total_episodes: int
    total_frames: int
    task_names: dict[int, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    # What LeRobot's EpisodeAwareSampler reads (``episodes["dataset_from_index"]``, ...): set by
    # ``PackedLeRobotDataset.meta`` (``reader.plan.frame_positions.EpisodeBounds``).
    episodes: Any = None

    @property
    def parsed_features(self) -> Features:
        """``features`` parsed (``parse_features``): what the key lists below are read from. The
        JSON is LeRobot's to read and a caller's to edit, so it is parsed as it is now."""
        return parse_features(self.features, where="meta.features")

    @property
    def video_keys(self) -> list[str]:
        return self.parsed_features.video_keys

    @property
    def image_keys(self) -> list[str]:
        return self.parsed_features.image_keys

    @property
    def camera_keys(self) -> list[str]:
        return self.parsed_features.camera_keys

    @property
    def depth_keys(self) -> list[str]:
        """Cameras that hold depth maps (LeRobot's rule: ``is_depth_map`` in the feature's info)."""
        return self.parsed_features.depth_keys

    @property
    def has_language_columns(self) -> bool:
        """Whether the dataset has LeRobot's language columns (its trainer then collates them
        with its own function)."""
        return any(key in self.features for key in LANGUAGE_COLUMNS)

    @property
    def names(self) -> dict[str, Any]:
        return {key: ft.get("names") for key, ft in self.features.items()}

    @property
    def shapes(self) -> dict[str, tuple]:
        return {key: tuple(ft["shape"]) for key, ft in self.features.items()}

    @property
    def total_tasks(self) -> int:
        return len(self.task_names)

    @property
    def tasks(self):
        """LeRobot's form: a ``pandas.DataFrame`` indexed by task string, column ``task_index``."""
        import pandas as pd

        ordered = sorted(self.task_names.items())
        return pd.DataFrame({"task_index": [i for i, _ in ordered]}, index=pd.Index([t for _, t in ordered], name="task"))


def rescale_depth_stats(meta: PackedMeta, unit: str) -> PackedMeta:
    """LeRobot's ``rescale_depth_stats(depth_output_unit)``: each depth camera whose feature
    records a ``depth_unit`` other than ``unit`` gets its statistics (all but ``count``)
    converted, as its samples are. Returns ``meta`` (changed in place)."""
    depth = meta.parsed_features.depth
    for key in meta.depth_keys:
        stored = depth[key].unit
        if stored is None or stored == unit or key not in meta.stats:
            continue
        factor = MM_PER_METRE if stored == "m" else 1.0 / MM_PER_METRE
        meta.stats[key] = {name: value if name == "count" else value * factor for name, value in meta.stats[key].items()}
    return meta


def load_packed_meta(
    storage: Storage, manifest: Manifest, info: LeRobotInfo | None, tasks: dict[int, str], *, raw_stats: dict | None = None
) -> PackedMeta:
    """Build ``PackedMeta`` from a pack's manifest, its ``meta/info.json`` (as ``PackedIndex``
    read and checked it) and ``meta/stats.json`` (``raw_stats``: its JSON when the caller read it
    already, ``read_stats``; read here otherwise).

    Raises:
        FormatError: stats.json is not JSON or holds values of the wrong type, or info.json's
            robot_type is not a string (names the file).
        IntegrityError: stats.json differs from what was packed.
    """
    robot_type = info.robot_type if info is not None else None
    stats: dict[str, dict[str, np.ndarray]] = {}
    if STATS_PATH in manifest.files:
        stats_where = storage.describe(STATS_PATH)
        stats = _stats(read_stats(storage, manifest) if raw_stats is None else raw_stats, stats_where)
    elif storage.exists(STATS_PATH):  # a pack without stats says so by having none, not by omitting them
        raise IntegrityError(
            f"{storage.describe(STATS_PATH)} is in the pack but its manifest does not list it: one of the two was "
            "altered after packing (meta.stats would be empty); pack it again"
        )
    source = manifest.source if isinstance(manifest.source, dict) else {}
    return PackedMeta(
        repo_id=str(source.get("uri") or storage.describe("")),
        fps=manifest.fps,
        # A copy the caller may edit, shapes as tuples (as LeRobot's DatasetInfo loads them).
        features={key: {**feature, "shape": tuple(feature["shape"])} for key, feature in manifest.features.to_json().items()},
        stats=stats,
        robot_type=robot_type,
        total_episodes=int(manifest.totals["episodes"]),
        total_frames=int(manifest.totals["frames"]),
        task_names=dict(tasks),
        info=info.raw if info is not None else {},
    )


def meta_from_record(record: dict, dataset: Any, tasks: dict[int, str]) -> PackedMeta:
    """A pack's ``PackedMeta`` from its record in a compiled mixture (``_mixture/meta.json``),
    its catalog entry (fps, features) and its tasks; every value type-checked.

    Raises:
        FormatError: a field of the wrong type.
    """
    where = f"mixture meta of {dataset.name!r}"
    robot_type = record.get("robot_type")
    if robot_type is not None and not isinstance(robot_type, str):
        raise FormatError(f"{where}: robot_type must be a string or null")
    total_episodes, total_frames = record.get("total_episodes"), record.get("total_frames")
    if not (is_int(total_episodes) and is_int(total_frames) and total_episodes >= 0 and total_frames >= 0):
        raise FormatError(f"{where}: total_episodes and total_frames must be non-negative ints")
    raw = record.get("stats") or {}
    if not isinstance(raw, dict):
        raise FormatError(f"{where}: stats must be an object")
    recorded = record.get("features")
    parsed = parse_features(recorded, where=where) if recorded is not None else dataset.features
    if set(parsed) != set(dataset.features) or not all(
        f.dtype == dataset.features[k].dtype and f.shape == dataset.features[k].shape and f.depth == dataset.features[k].depth
        for k, f in parsed.items()
    ):
        raise FormatError(f"{where}: features disagree with the mixture file's")
    features = parsed.to_json()
    return PackedMeta(
        repo_id=str(record.get("repo_id") or dataset.name),
        fps=dataset.fps,
        features={key: {**feature, "shape": tuple(feature["shape"])} for key, feature in features.items()},
        stats=_stats(raw, where),
        robot_type=robot_type,
        total_episodes=total_episodes,
        total_frames=total_frames,
        task_names=dict(tasks),
        info={"robot_type": robot_type},
    )


def _stats(raw: dict, where: str) -> dict[str, dict[str, np.ndarray]]:
    """LeRobot's ``load_stats``: leaves flattened to ``"a/b/c"`` keys, each made a numpy array
    (at least 1-d), then nested again by ``/``. Every leaf must be numbers."""
    flat: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        prefix, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{prefix}/{k}" if prefix else str(k), v) for k, v in value.items()]
            continue
        try:
            array = np.atleast_1d(np.array(value))
        except ValueError:  # ragged lists
            array = np.asarray([], dtype=object)
        if array.dtype.kind not in "biuf":
            raise FormatError(f"{where}: {prefix!r} is not numbers")
        flat[prefix] = array
    nested: dict[str, Any] = {}
    for key in sorted(flat):
        *parents, leaf = key.split("/")
        inner = nested
        for part in parents:
            inner = inner.setdefault(part, {})
            if not isinstance(inner, dict):
                raise FormatError(f"{where}: {key!r} nests under a value")
        inner[leaf] = flat[key]
    return nested


__all__ = ["PackedMeta", "aggregate_stats", "load_packed_meta"]
