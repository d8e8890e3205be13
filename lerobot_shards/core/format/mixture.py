"""``mixture.json``: the schema of a mixture of packed datasets, and its validating parser.

Pure (no I/O, no torch): the packer writes it with ``lerobot-shards mixture create`` and the
reader reads it. ``docs/FORMAT.md`` ("Mixtures") is its prose twin. A mixture file is as
untrusted as a dataset: dataset paths must stay under the mixture's directory unless the
caller allows absolute paths and URLs (``resolve_dataset_path(..., allow_remote=True)``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from lerobot_shards.core.errors import FormatError, MixtureSpecError
from lerobot_shards.core.format.features import Features, FeatureSpec, parse_feature, parse_features
from lerobot_shards.core.format.fields import is_sha256_hex, load_json
from lerobot_shards.core.format.layout import check_feature_key, check_key, safe_relative_path
from lerobot_shards.core.format.limits import (
    MAX_FPS,
    MAX_JSON_DEPTH,
    MAX_MIXTURE_DATASETS,
    MAX_MIXTURE_EPISODES,
    MAX_MIXTURE_MEMBERS,
    MAX_RECORD_BYTES,
)
from lerobot_shards.core.format.mixture_index import IndexFile, parse_index_block

MIXTURE_FORMAT = "lerobot-shards-mixture"
MIXTURE_VERSION = 2
KEY_MAP_VERSION = 3
DEPTH_VERSION = 4
PREROLL_VERSION = 4
# 5: a dataset's ``fps`` may be a fractional rate (29.97), which version-4 readers refuse.
FPS_VERSION = 5
SUPPORTED_MIXTURE_VERSIONS = frozenset({1, 2, 3, 4, 5})
# Version 2: each entry's manifest_sha256 (the pack it describes) and tolerance_s, and the
# compiled index (``index``, lerobot_shards.core.format.mixture_index). Version 1 files are still read: a
# reader then opens every pack itself. Version 3 (written only when an entry has one): an
# entry's ``key_map``, which every reader must apply (a version-2 reader would ignore it and
# batch the dataset under its own keys, so such files say version 3 and older readers refuse).
# Version 4 (written only when a dataset has a depth camera or a member with pre-roll): the
# camera's depth quantizer in its recorded feature (``info``; older readers decoded a compiled
# mixture's depth as colour), and the compiled episodes table's ``member_preroll`` (packs of
# format 4: an older reader would give each row a frame too early).
MIXTURE_FILE = "mixture.json"
DEFAULT_WEIGHT_MODES = ("anchors", "explicit")
DEFAULT_PAD_KEYS = ("observation.state", "action")
MASK_SUFFIX = "_mask"
PAD_SUFFIX = "_is_pad"
# The key under which a sample ships compressed members to a DecodeStage (reader/decode/wire.py).
ENCODED_KEY = "__encoded_video__"
# Keys a mixture sample sets itself, beside its features (and their masks and pads).
SAMPLE_ADDED_KEYS = ("task", "dataset_index", "dataset_name", ENCODED_KEY)


# The fields of a depth camera's ``info`` a mixture records: what reading it needs.
_DEPTH_INFO_FIELDS = ("is_depth_map", "depth_unit", "video.depth_min", "video.depth_max", "video.shift", "video.use_log")


def mixture_feature(spec: FeatureSpec) -> FeatureSpec:
    """A feature as ``mixture.json`` records it: ``dtype``, ``shape``, ``names`` when the pack
    has them, and for a depth camera ``depth: true`` with the ``info`` fields its reader needs
    (the quantizer, the unit), parsed again like every recorded feature.

    Raises:
        FormatError: as ``parse_feature`` (it cannot fail on a parsed pack's feature).
    """
    record: dict[str, Any] = {"dtype": spec.dtype, "shape": list(spec.shape)}
    if spec.names is not None:
        record["names"] = list(spec.names)
    if spec.is_depth:
        info = spec.info
        record["depth"] = True
        record["info"] = {name: info[name] for name in _DEPTH_INFO_FIELDS if name in info}
        record["info"]["is_depth_map"] = True
    return parse_feature(spec.key, record, where=MIXTURE_FILE)


def _reader_dtype(kinds: set[str]) -> str | None:
    """The dtype a reader yields for a numeric feature of these LeRobot dtypes (``torch.tensor``
    of Python values: bool, int64 or float32), or None when one is not numeric."""
    try:
        found = {np.dtype(kind).kind for kind in kinds}
    except TypeError:
        return None
    if not found <= set("biuf"):
        return None
    return "bool" if found == {"b"} else "int64" if found <= {"i", "u"} else "float32"


def partial_features(
    datasets: Sequence[tuple[str, Mapping[str, FeatureSpec]]], *, exclude: Collection[str] = ()
) -> tuple[dict[str, tuple[tuple[int, ...], str]], dict[str, tuple[str, ...]]]:
    """The features only some datasets of a mixture have (besides ``exclude``: cameras and padded
    vectors, which have their own rules), split by what a batch can do with them.

    Returns:
        ``(filled, dropped)``: ``filled`` maps a numeric key of one fixed sample shape to that shape
        and the dtype a reader yields for it (datasets without it get zeros and a mask);
        ``dropped`` maps every other key (strings, language, shapes that differ) to the names
        of the datasets that have it (left out of every sample, and said so).
    """
    present = [frozenset(features) for _, features in datasets]
    if not present:
        return {}, {}
    common = frozenset.intersection(*present)
    filled: dict[str, tuple[tuple[int, ...], str]] = {}
    dropped: dict[str, tuple[str, ...]] = {}
    for key in sorted(frozenset.union(*present) - common - set(exclude)):
        having = [(name, features[key]) for name, features in datasets if key in features]
        shapes = {sample_shape(f.shape) for _, f in having}
        dtype = _reader_dtype({f.dtype for _, f in having})
        # Zeros need one fixed shape: a variable dimension (None) has no size to fill.
        fixed = [tuple(d for d in shape if d is not None) for shape in shapes if None not in shape]
        if dtype is not None and len(shapes) == 1 and fixed:
            filled[key] = (fixed[0], dtype)
        else:
            dropped[key] = tuple(name for name, _ in having)
    return filled, dropped


def sample_shape(shape: Sequence[int | None]) -> tuple[int | None, ...]:
    """A feature's shape as a sample holds it: LeRobot declares scalars as ``(1,)`` and readers
    yield them 0-d, so the two are one."""
    return () if tuple(shape) == (1,) else tuple(shape)


@dataclass(frozen=True)
class MixtureEntry:
    """One packed dataset of a mixture.

    Attributes:
        name: unique name (``org--repo`` for a Hub dataset).
        path: the packed root, relative to the mixture file's directory, or absolute/URL.
        anchors: anchors (samples per exactly-once epoch): the frames, or those matching
            ``where``.
        episodes: episodes of the packed dataset.
        fps: frames per second.
        features: the recorded features (``mixture_feature``), in manifest order.
        video_keys: camera keys, a subset of ``features`` with dtype ``video``.
        weight: sampling weight; equals ``anchors`` when the spec's default is "anchors".
        where: DuckDB predicate over ``index/samples.parquet`` that selected the anchors.
        manifest_sha256: ``sha256:<hex>`` of the pack's ``manifest.json`` when the mixture was
            created (version 2): the pack this entry describes.
        tolerance_s: the pack's timestamp tolerance (version 2).
        extra: unknown fields, kept for round trips.
    """

    name: str
    path: str
    anchors: int
    episodes: int
    fps: float
    features: Features
    video_keys: tuple[str, ...]
    weight: float
    where: str | None = None
    manifest_sha256: str | None = None
    tolerance_s: float | None = None
    key_map: Mapping[str, str | None] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def mapped_features(self) -> dict[str, FeatureSpec]:
        """``features`` under the keys a reader of the mixture gives them (``key_map``
        applied: renamed, or left out where it maps a key to None), in manifest order."""
        out = {}
        for key, feature in self.features.items():
            target = self.key_map.get(key, key)
            if target is not None:
                out[target] = feature
        return out

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "path": self.path,
            "anchors": self.anchors,
            "episodes": self.episodes,
            "fps": self.fps,
            "video_keys": list(self.video_keys),
            "features": self.features.to_json(),
            "weight": int(self.weight) if float(self.weight).is_integer() else self.weight,
        }
        if self.where is not None:
            out["where"] = self.where
        if self.manifest_sha256 is not None:
            out["manifest_sha256"] = self.manifest_sha256
        if self.tolerance_s is not None:
            out["tolerance_s"] = self.tolerance_s
        if self.key_map:
            out["key_map"] = dict(self.key_map)
        return {**out, **dict(self.extra)}


_ENTRY_FIELDS = (
    "name",
    "path",
    "anchors",
    "episodes",
    "fps",
    "features",
    "video_keys",
    "weight",
    "where",
    "manifest_sha256",
    "tolerance_s",
    "key_map",
)


def check_key_map(key_map: Any, features: Collection[str], *, where: str) -> dict[str, str | None]:
    """A dataset's key map, validated: ``{source key: mixture key, or None to leave it out}``.

    Every source key is one of the dataset's ``features`` and every name a LeRobot key; a
    mixture key is none of the keys a mixture sample adds itself (``reserved_key``), no two
    source keys get one name, and a feature is renamed onto another feature's key only when that
    one is left out (a swap or a chain would hand one feature's values to another's name).

    Raises:
        MixtureSpecError: names the entry and what is wrong.
    """
    if not isinstance(key_map, Mapping):
        raise MixtureSpecError(
            f"{where}: field 'key_map' must be an object {{source key: mixture key or null}}, got {type(key_map).__name__}"
        )
    if len(key_map) > len(features):
        raise MixtureSpecError(f"{where}: key_map has {len(key_map)} entries for {len(features)} features")
    out: dict[str, str | None] = {}
    for source, target in key_map.items():
        try:
            check_feature_key(source, what="key_map source key")
            if target is not None:
                check_feature_key(target, what="key_map mixture key")
        except FormatError as err:
            raise MixtureSpecError(f"{where}: {err}") from None
        if source not in features:
            raise MixtureSpecError(f"{where}: key_map renames {source!r}, which the dataset lacks; it has {sorted(features)}")
        reason = reserved_key(target) if target is not None else None
        if reason:
            raise MixtureSpecError(f"{where}: key_map renames {source!r} to {target!r}, {reason}; choose another name")
        out[source] = target
    for source, target in out.items():
        if target is not None and target != source and target in features and out.get(target, target) is not None:
            raise MixtureSpecError(
                f"{where}: key_map renames {source!r} to {target!r}, the key of another feature of the dataset that it "
                f"does not leave out; to use that name, map {target!r} to null (a swap or a chain of renames is refused)"
            )
    names = Counter(out.get(key, key) for key in features)
    clashes = sorted(n for n, count in names.items() if n is not None and count > 1)
    if clashes:
        raise MixtureSpecError(f"{where}: key_map gives two features the name(s) {clashes}; map the other one too")
    return out


def reserved_key(key: str) -> str | None:
    """Why ``key`` cannot name a feature of a mixture sample, or None: a key the sample adds
    itself (``task``, ``dataset_index``, ``dataset_name``, the shipped members' key) or one of
    its generated names (``<key>_mask``, ``<key>_is_pad``)."""
    if key in SAMPLE_ADDED_KEYS:
        return "a key every mixture sample sets itself"
    for suffix in (MASK_SUFFIX, PAD_SUFFIX):
        if key.endswith(suffix):
            return f"a name ending in {suffix!r}, which the mixture generates for its masks and padding"
    return None


@dataclass(frozen=True)
class MixtureSpec:
    """A validated ``mixture.json``.

    Attributes:
        datasets: the entries, in mixture order (this order defines ``dataset_index``).
        default_weights: ``"anchors"`` (proportional: an epoch is exactly once over the
            union) or ``"explicit"`` (each entry's ``weight``; the reader then needs
            ``samples_per_epoch``).
        version: the mixture format version.
        index: the compiled index files (version 2), or None: a reader then opens every pack.
    """

    datasets: tuple[MixtureEntry, ...]
    default_weights: Literal["anchors", "explicit"] = "anchors"
    version: int = MIXTURE_VERSION
    index: Mapping[str, IndexFile] | None = None

    def __post_init__(self) -> None:
        seen: set[str] = set()
        duplicates = sorted({d.name for d in self.datasets if d.name in seen or seen.add(d.name)})
        if duplicates:
            raise MixtureSpecError(f"{MIXTURE_FILE}: dataset names must be unique, found {duplicates} more than once")
        if self.default_weights not in DEFAULT_WEIGHT_MODES:
            raise MixtureSpecError(
                f"{MIXTURE_FILE}: default_weights must be one of {list(DEFAULT_WEIGHT_MODES)}, got {self.default_weights!r}"
            )
        if not self.datasets:
            raise MixtureSpecError(f"{MIXTURE_FILE}: a mixture needs at least one dataset")
        if self.version < KEY_MAP_VERSION and any(d.key_map for d in self.datasets):
            raise MixtureSpecError(
                f"{MIXTURE_FILE}: key maps need version {KEY_MAP_VERSION} (a version-{self.version} reader would ignore them)"
            )
        if self.version < DEPTH_VERSION and any(d.features.depth_keys for d in self.datasets):
            raise MixtureSpecError(
                f"{MIXTURE_FILE}: depth cameras need version {DEPTH_VERSION} (a version-{self.version} reader would decode them as colour)"
            )
        if len(self.datasets) > MAX_MIXTURE_DATASETS:
            raise MixtureSpecError(f"{MIXTURE_FILE}: {len(self.datasets)} datasets, more than the {MAX_MIXTURE_DATASETS} allowed")
        episodes, members = sum(d.episodes for d in self.datasets), self.members
        if episodes > MAX_MIXTURE_EPISODES or members > MAX_MIXTURE_MEMBERS:
            raise MixtureSpecError(
                f"{MIXTURE_FILE}: {episodes} episodes with {members} camera members; a mixture holds at most "
                f"{MAX_MIXTURE_EPISODES} episodes and {MAX_MIXTURE_MEMBERS} members (split it into several)"
            )
        if sum(self.weights()) <= 0:
            raise MixtureSpecError(f"{MIXTURE_FILE}: the weights sum to 0; at least one dataset needs a positive weight")

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.datasets]

    @property
    def members(self) -> int:
        """Camera members of every episode (episodes x cameras, summed over datasets)."""
        return sum(d.episodes * len(d.video_keys) for d in self.datasets)

    @property
    def total_anchors(self) -> int:
        return sum(d.anchors for d in self.datasets)

    def weights(self) -> list[float]:
        """Per-dataset weights: anchor counts (``"anchors"``) or the entries' ``weight``."""
        if self.default_weights == "anchors":
            return [float(d.anchors) for d in self.datasets]
        return [float(d.weight) for d in self.datasets]

    def entry(self, name: str) -> MixtureEntry:
        """Return the entry named ``name``. Raises ``KeyError`` naming the known names."""
        for dataset in self.datasets:
            if dataset.name == name:
                return dataset
        raise KeyError(f"no dataset {name!r} in the mixture; known: {self.names}")

    def to_dict(self) -> dict[str, Any]:
        out = {
            "format": MIXTURE_FORMAT,
            "version": self.version,
            "default_weights": self.default_weights,
            "datasets": [d.to_dict() for d in self.datasets],
        }
        if self.index is not None:
            out["index"] = {name: entry.to_dict() for name, entry in self.index.items()}
        return out

    def to_json(self) -> str:
        """Serialize deterministically (one space indent, entries in mixture order)."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = MIXTURE_FILE) -> MixtureSpec:
        """Parse ``mixture.json`` text. Raises ``MixtureSpecError`` (see ``from_dict``)."""
        try:
            data = load_json(text, where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH)
        except MixtureSpecError:
            raise
        except Exception as err:  # FormatError from load_json: report it as a spec error
            raise MixtureSpecError(str(err)) from None
        return cls.from_dict(data, where=where)

    @classmethod
    def from_dict(cls, data: Any, *, where: str = MIXTURE_FILE) -> MixtureSpec:
        """Validate and build a spec.

        Raises:
            MixtureSpecError: wrong format name or version, or a dataset entry with a missing
                or malformed field (the message names the entry and the field).
        """
        if not isinstance(data, Mapping) or data.get("format") != MIXTURE_FORMAT:
            found = data.get("format") if isinstance(data, Mapping) else type(data).__name__
            raise MixtureSpecError(f"{where}: expected format {MIXTURE_FORMAT!r}, found {found!r}")
        version = data.get("version")
        if not _is_int(version) or version not in SUPPORTED_MIXTURE_VERSIONS:  # a list is not hashable: checked first
            raise MixtureSpecError(
                f"{where}: version {version!r} is not supported (supported: {sorted(SUPPORTED_MIXTURE_VERSIONS)}); "
                f"upgrade lerobot-shards or re-run `lerobot-shards mixture create`"
            )
        mode = data.get("default_weights", "anchors")
        if mode not in DEFAULT_WEIGHT_MODES:
            raise MixtureSpecError(f"{where}: default_weights must be one of {list(DEFAULT_WEIGHT_MODES)}, got {mode!r}")
        datasets = data.get("datasets")
        if not isinstance(datasets, list):
            raise MixtureSpecError(f"{where}: field 'datasets' must be a list, got {type(datasets).__name__}")
        if len(datasets) > MAX_MIXTURE_DATASETS:
            raise MixtureSpecError(f"{where}: {len(datasets)} datasets, more than the {MAX_MIXTURE_DATASETS} allowed")
        entries = tuple(_entry_from_dict(item, i, mode, where, int(version)) for i, item in enumerate(datasets))
        index = parse_index_block(data["index"], where=where) if data.get("index") is not None else None
        if index is not None and version < 2:
            raise MixtureSpecError(f"{where}: a compiled 'index' needs version 2")
        try:
            return cls(datasets=entries, default_weights=mode, version=int(version), index=index)
        except MixtureSpecError as err:
            raise MixtureSpecError(str(err).replace(MIXTURE_FILE, where, 1)) from None


def _entry_from_dict(item: Any, i: int, mode: str, where: str, version: int) -> MixtureEntry:
    """One ``datasets[i]`` entry, every field checked (``_EntryFields``), in this order: its
    name, the fields it must have, counts and fps, features and cameras, weighting and pin,
    key map."""
    name = _entry_name(item, f"{where}: datasets[{i}]")
    fields = _EntryFields(item, f"{where}: datasets[{i}] ({name!r})")
    missing = [f for f in ("path", "anchors", "episodes", "fps", "features", "video_keys") if f not in item]
    if missing:
        raise MixtureSpecError(f"{fields.label}: missing field(s) {missing}; write the file with `lerobot-shards mixture create`")
    path = fields.check("path", isinstance(item["path"], str) and item["path"] != "", "a non-empty string")
    anchors = fields.check("anchors", _is_int(item["anchors"]) and item["anchors"] >= 0, "an int >= 0")
    episodes = fields.check("episodes", _is_int(item["episodes"]) and item["episodes"] >= 0, "an int >= 0")
    fps = fields.fps(version)
    features, video_keys = fields.cameras()
    weight = fields.weight(anchors, mode)
    where_filter = item.get("where")
    fields.check("where", where_filter is None or isinstance(where_filter, str), "a SQL predicate string or absent")
    pin = fields.pin(version)
    tolerance = item.get("tolerance_s")
    fields.check(
        "tolerance_s", tolerance is None or (_is_number(tolerance) and 0 <= tolerance < 1), "a number in [0, 1) or absent"
    )
    key_map = {}
    if "key_map" in item:
        if version < KEY_MAP_VERSION:
            raise MixtureSpecError(f"{fields.label}: field 'key_map' needs version {KEY_MAP_VERSION}")
        key_map = check_key_map(item["key_map"], features, where=fields.label)
    return MixtureEntry(
        name=name,
        path=path,
        anchors=int(anchors),
        episodes=int(episodes),
        fps=int(fps) if float(fps).is_integer() else float(fps),
        features=features,
        video_keys=tuple(video_keys),
        weight=float(weight),
        where=where_filter,
        manifest_sha256=pin,
        tolerance_s=None if tolerance is None else float(tolerance),
        key_map=key_map,
        extra={k: v for k, v in item.items() if k not in _ENTRY_FIELDS},
    )


def _entry_name(item: Any, label: str) -> str:
    """An entry must be an object whose ``name`` is a dataset name (a key's rules)."""
    if not isinstance(item, Mapping):
        raise MixtureSpecError(f"{label}: expected an object, got {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise MixtureSpecError(f"{label}: field 'name' must be a non-empty string, got {name!r}")
    try:
        check_key(name, what="dataset name")
    except ValueError as err:
        raise MixtureSpecError(f"{label}: {err}") from None
    return name


@dataclass(frozen=True)
class _EntryFields:
    """The fields of one entry, each checked where it is read (``label`` names the entry)."""

    item: Mapping
    label: str

    def check(self, field_name: str, ok: bool, expected: str) -> Any:
        if not ok:
            raise MixtureSpecError(f"{self.label}: field {field_name!r} must be {expected}, got {self.item.get(field_name)!r}")
        return self.item.get(field_name)

    def fps(self, version: int) -> int | float:
        value = self.item["fps"]
        fps = self.check(
            "fps",
            isinstance(value, int | float) and not isinstance(value, bool) and 1 <= value <= MAX_FPS,
            f"a number from 1 to {MAX_FPS}",
        )
        if not float(fps).is_integer() and version < FPS_VERSION:
            raise MixtureSpecError(f"{self.label}: fps {fps!r} is not a whole number, which needs version {FPS_VERSION}")
        return fps

    def cameras(self) -> tuple[Features, list[str]]:
        """``features`` (parsed; a depth camera carries its quantizer) and ``video_keys``
        (video features of it)."""
        raw = self.check("features", isinstance(self.item["features"], Mapping), "an object {key: {dtype, shape}}")
        try:
            features = parse_features(raw, where=self.label)
        except FormatError as err:
            raise MixtureSpecError(str(err)) from None
        legacy = [k for k, f in raw.items() if isinstance(f, Mapping) and f.get("depth") is True and not features[k].is_depth]
        if legacy:
            raise MixtureSpecError(
                f"{self.label}: depth cameras {legacy} are recorded without their depth quantizer (a mixture written before "
                f"version {DEPTH_VERSION}, whose compiled reading returned them as colour); re-run `lerobot-shards mixture create`"
            )
        keys = self.item["video_keys"]
        video_keys = self.check(
            "video_keys", isinstance(keys, list) and all(isinstance(k, str) for k in keys), "a list of strings"
        )
        not_video = [k for k in video_keys if k not in features or not features[k].is_video]
        if not_video:
            raise MixtureSpecError(f"{self.label}: field 'video_keys' lists {not_video}, which are not video features")
        return features, video_keys

    def weight(self, anchors: int, mode: str) -> float:
        weight = self.item.get("weight", anchors)
        self.check("weight", _is_number(weight) and weight >= 0, "a finite number >= 0")
        if mode == "anchors" and weight != anchors:
            raise MixtureSpecError(
                f"{self.label}: field 'weight' is {weight} but default_weights is 'anchors' (weight = anchors = {anchors}); "
                f"set default_weights to 'explicit' to sample with these weights"
            )
        return weight

    def pin(self, version: int) -> str | None:
        pin = self.item.get("manifest_sha256")
        if version >= 2 or pin is not None:
            self.check(
                "manifest_sha256",
                isinstance(pin, str) and pin.startswith("sha256:") and is_sha256_hex(pin[7:]),
                "'sha256:' and 64 hex digits",
            )
        return pin


def resolve_dataset_path(mixture_path: str, path: str, *, allow_remote: bool = False) -> str:
    """Return a dataset's root from its ``path`` in the mixture file at ``mixture_path``.

    A relative path (``org--a``, ``group/ds``) resolves under the mixture file's directory:
    ``resolve_dataset_path("s3://b/mix/mixture.json", "org--a") == "s3://b/mix/org--a"``.
    Absolute paths and URLs are taken as they are only with ``allow_remote=True``: a mixture
    file comes from wherever the mixture was shared, and opening it must not read (or send
    requests to) places its author chose.

    Raises:
        MixtureSpecError: a path that leaves the mixture's directory (``..``), or an absolute
            path or URL without ``allow_remote``.
    """
    if "://" in path or path.startswith(("/", "~")):
        if not allow_remote:
            raise MixtureSpecError(
                f"{mixture_path}: dataset path {path[:200]!r} is absolute or a URL; mixture paths must be relative to "
                "the mixture file (pass allow_remote_paths=True to MixtureDataset, or --allow-remote-paths, to trust it)"
            )
        return path
    try:
        safe_relative_path(path)
    except ValueError as err:
        raise MixtureSpecError(f"{mixture_path}: dataset {err}") from None
    base = str(mixture_path).rstrip("/").rsplit("/", 1)[0] if "/" in str(mixture_path) else ""
    return f"{base}/{path}" if base else path


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool) and math.isfinite(value)
