"""The packed format, defined once: paths, names, versions and the manifest schema.

This module is the code twin of ``docs/FORMAT.md``. The packer writes what is defined here
and the reader checks it; ``reader`` never imports ``packer``, so every name both sides
share lives in this file.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

FORMAT_NAME = "lerobot-shards"
FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = frozenset({1})

MANIFEST_PATH = "manifest.json"
META_DIR = "meta"
INDEX_DIR = "index"
SHARDS_DIR = "shards"
EPISODES_INDEX_PATH = f"{INDEX_DIR}/episodes.parquet"
SAMPLES_INDEX_PATH = f"{INDEX_DIR}/samples.parquet"

# Row groups of a shard parquet never exceed this (unless one episode alone does) and
# never split an episode: a consumer that admits an episode reads whole row groups.
ROW_GROUP_MAX_BYTES = 32 * 1024 * 1024
# The packer aims lower: admitting one episode decodes its whole row group, so smaller
# groups make admission (and resume's first batch) cheap while DuckDB scans stay efficient.
ROW_GROUP_TARGET_BYTES = 4 * 1024 * 1024

VIDEO_MODES = ("copy", "hevc", "h264")
FRAME_MISMATCH_POLICIES = ("error", "pad", "drop-episode")

# Columns every LeRobot v3 data parquet carries besides the features it declares.
DEFAULT_TABULAR_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


class FormatError(ValueError):
    """A packed dataset does not follow the format (bad manifest, index or shard)."""


class UnsupportedFormatVersionError(FormatError):
    """The packed dataset was written by a format version this reader does not know."""


def shard_name(shard_index: int) -> str:
    """Return the stem shared by a shard's files, e.g. ``shard-000012``."""
    if shard_index < 0:
        raise ValueError(f"shard_index must be >= 0, got {shard_index}")
    return f"shard-{shard_index:06d}"


def shard_tar_path(shard_index: int) -> str:
    """Return the tar's path relative to the dataset root."""
    return f"{SHARDS_DIR}/{shard_name(shard_index)}.tar"


def shard_parquet_path(shard_index: int) -> str:
    """Return the tabular parquet's path relative to the dataset root."""
    return f"{SHARDS_DIR}/{shard_name(shard_index)}.parquet"


def shard_receipt_path(shard_index: int) -> str:
    """Return the per-shard receipt's path: written after the tar and parquet of a shard.

    A receipt (JSON) records the shard's episodes, member offsets and checksums. Its
    presence marks the shard complete, which is what resuming and ``finalize`` rely on.
    """
    return f"{SHARDS_DIR}/{shard_name(shard_index)}.json"


def episode_key(episode_index: int) -> str:
    """Return the tar key grouping one episode's members, e.g. ``ep-000123``."""
    if episode_index < 0:
        raise ValueError(f"episode_index must be >= 0, got {episode_index}")
    return f"ep-{episode_index:06d}"


def video_member_name(episode_index: int, video_key: str) -> str:
    """Return the tar member name of one episode's video for one camera.

    ``webdataset`` splits names at the first dot of the basename, so all members of an
    episode share the key ``ep-NNNNNN`` and it yields one sample per episode.
    """
    return f"{episode_key(episode_index)}.{video_key}.mp4"


def video_column(video_key: str, field_name: str) -> str:
    """Return the ``index/episodes.parquet`` column of one camera's member field.

    Fields: ``offset`` (byte offset of the member data in the tar), ``size`` (bytes),
    ``frames`` (decodable frames), ``codec``, ``crc32`` (of the member bytes).
    """
    if field_name not in VIDEO_MEMBER_FIELDS:
        raise ValueError(f"unknown video member field {field_name!r}; expected one of {VIDEO_MEMBER_FIELDS}")
    return f"video/{video_key}/{field_name}"


VIDEO_MEMBER_FIELDS = ("offset", "size", "frames", "codec", "crc32")


def sql_safe_name(name: str) -> str:
    """Return ``name`` with every character outside [A-Za-z0-9_] replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def pad_column(window: str, key: str, side: str) -> str:
    """Return the ``index/samples.parquet`` column counting padded slots of a window key.

    ``side`` is ``before`` (offsets reaching before the episode's first frame) or
    ``after`` (offsets reaching past its last frame). Dots in feature keys become
    underscores so DuckDB users need no quoting: ``chunk_action_pad_after``.
    """
    if side not in ("before", "after"):
        raise ValueError(f"side must be 'before' or 'after', got {side!r}")
    return f"{sql_safe_name(window)}_{sql_safe_name(key)}_pad_{side}"


@dataclass(frozen=True)
class ShardEntry:
    """One shard in the manifest. Byte counts and sha256 cover the whole files."""

    index: int
    name: str
    num_episodes: int
    frames: int
    tar_bytes: int
    tar_sha256: str
    parquet_bytes: int
    parquet_sha256: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShardEntry:
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except KeyError as err:
            raise FormatError(f"manifest shard entry {data.get('name', '?')} lacks field {err}") from None


@dataclass(frozen=True)
class Manifest:
    """``manifest.json``: the packed dataset's table of contents and commit point.

    Attributes:
        format: always ``FORMAT_NAME``.
        format_version: integer, bumped on any incompatible change.
        packer_version: version of the packer that wrote the dataset.
        options: packing options that shape the output (video mode, codec settings, ...).
        source: where the data came from (uri or repo_id/revision, codebase_version).
        fps: frames per second of every stream.
        features: LeRobot ``info.json`` features; video features describe the packed codec,
            tabular ones what the shard parquet holds (``extra["schema_drift"]`` when the
            source's info.json and data parquet disagree).
        video_keys: camera feature names, in member order within an episode.
        windows: named ``delta_timestamps`` windows precomputed into the sample index.
        tolerance_s: tolerance used to validate window offsets.
        shards: one entry per shard, in shard order.
        totals: ``episodes``, ``frames``, ``shards``, ``bytes`` (tar + parquet).
    """

    format: str
    format_version: int
    packer_version: str
    options: dict[str, Any]
    source: dict[str, Any]
    fps: int
    features: dict[str, Any]
    video_keys: list[str]
    windows: dict[str, dict[str, list[float]]]
    tolerance_s: float
    shards: list[ShardEntry]
    totals: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["shards"] = [asdict(s) for s in self.shards]
        return data

    def to_json(self) -> str:
        """Serialize deterministically (field order, feature order as in the source)."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = MANIFEST_PATH) -> Manifest:
        """Validate and build a manifest.

        Raises:
            FormatError: not a lerobot-shards manifest, or a required field is missing.
            UnsupportedFormatVersionError: written by an unknown format version.
        """
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise FormatError(f"{where}: expected format {FORMAT_NAME!r}, found {found!r}")
        version = data.get("format_version")
        if version not in SUPPORTED_FORMAT_VERSIONS:
            raise UnsupportedFormatVersionError(
                f"{where}: format_version {version!r} is not supported by this reader "
                f"(supported: {sorted(SUPPORTED_FORMAT_VERSIONS)}); upgrade lerobot-shards or repack"
            )
        required = [f for f in cls.__dataclass_fields__ if f != "extra"]
        missing = [f for f in required if f not in data]
        if missing:
            raise FormatError(f"{where}: missing fields {missing}")
        kwargs = {f: data[f] for f in required}
        kwargs["shards"] = [ShardEntry.from_dict(s) for s in data["shards"]]
        kwargs["extra"] = data.get("extra", {})
        manifest = cls(**kwargs)
        if [s.index for s in manifest.shards] != list(range(len(manifest.shards))):
            raise FormatError(f"{where}: shard indices must be 0..{len(manifest.shards) - 1} in order")
        return manifest

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = MANIFEST_PATH) -> Manifest:
        """Parse ``manifest.json`` text; see ``from_dict`` for what it raises."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise FormatError(f"{where}: not valid JSON ({err})") from None
        return cls.from_dict(data, where=where)
