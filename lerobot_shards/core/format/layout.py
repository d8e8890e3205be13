"""Names, paths and versions of the packed format (the code twin of docs/FORMAT.md).

Everything here is pure: it turns indices and keys into the paths and column names the
packer writes and the reader reads, and it refuses names that could escape a dataset root
or reach SQL, a tar member name or a file path unchecked.
"""

from __future__ import annotations

import re

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.limits import MAX_KEY_LENGTH

FORMAT_NAME = "lerobot-shards"
# 3: cameras may be depth maps (12-bit codes, kept lossless) and image features are decoded;
# members may hold B-frames (signed composition offsets) or full-resolution chroma. A reader of
# version 2 would return depth as colour and pictures as bytes, so it must refuse these packs.
FORMAT_VERSION = 3
SUPPORTED_FORMAT_VERSIONS = frozenset({2, 3})
# Versions we recognise but no longer read, with what to do about them.
RETIRED_FORMAT_VERSIONS = {
    1: "format 1 has no digests for its index and parquet data, so damage to them cannot be detected; "
    "re-pack the source with this version: lerobot-shards pack SRC NEW_DST",
}

MANIFEST_PATH = "manifest.json"
META_DIR = "meta"
INDEX_DIR = "index"
SHARDS_DIR = "shards"
EPISODES_INDEX_PATH = f"{INDEX_DIR}/episodes.parquet"
SAMPLES_INDEX_PATH = f"{INDEX_DIR}/samples.parquet"
TASKS_PATH = f"{META_DIR}/tasks.parquet"
INFO_PATH = f"{META_DIR}/info.json"
STATS_PATH = f"{META_DIR}/stats.json"

# Row groups of a shard parquet never exceed ``limits.ROW_GROUP_MAX_BYTES`` (unless one
# episode alone does) and never split an episode: a consumer that admits an episode reads
# whole row groups. The packer aims lower: admitting one episode decodes its whole row group, so smaller
# groups make admission (and resume's first batch) cheap while DuckDB scans stay efficient.
ROW_GROUP_TARGET_BYTES = 4 * 1024 * 1024

VIDEO_MODES = ("copy", "hevc", "h264")
VIDEO_CODECS = ("av1", "hevc", "h264")
FRAME_MISMATCH_POLICIES = ("error", "pad", "drop-episode")

# Columns every LeRobot v3 data parquet carries besides the features it declares.
DEFAULT_TABULAR_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")

_SAFE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9_.\-]+")


def check_key(key: object, *, what: str = "feature key", where: str = "") -> str:
    """Return ``key`` if it is a safe feature/camera/window name, else raise ``FormatError``.

    Safe: 1 to ``MAX_KEY_LENGTH`` characters from ``[A-Za-z0-9_.-]``, not starting with ``.``
    or ``-``, without ``..``. Keys become tar member names, column names and (for cameras)
    parts of source paths, so nothing else may pass: no ``/``, no quotes, no control characters.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(key, str) or not key:
        raise FormatError(f"{prefix}{what} must be a non-empty string, got {key!r}")
    if len(key) > MAX_KEY_LENGTH or not _SAFE_KEY.fullmatch(key) or ".." in key:
        raise FormatError(
            f"{prefix}{what} {key[:MAX_KEY_LENGTH]!r} is not allowed: use 1-{MAX_KEY_LENGTH} characters from "
            "[A-Za-z0-9_.-], not starting with '.' or '-' and without '..'"
        )
    return key


def safe_relative_path(rel: object, *, where: str = "") -> str:
    """Return ``rel`` if it is a plain relative POSIX path that stays under its root.

    Refused: absolute paths, drive letters, backslashes, empty, ``.`` or ``..`` segments,
    and segments with characters outside ``[A-Za-z0-9_.-]``.

    Raises:
        FormatError: the path could escape its root or is not a plain path.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(rel, str) or not rel or len(rel) > 4096:
        raise FormatError(f"{prefix}expected a relative path, got {rel!r}")
    segments = rel.split("/")
    if rel.startswith("/") or any(seg in ("", ".", "..") or not _SAFE_SEGMENT.fullmatch(seg) for seg in segments):
        raise FormatError(
            f"{prefix}path {rel[:300]!r} is not a plain relative path under the root "
            "(no leading '/', no '.' or '..' segments, segments from [A-Za-z0-9_.-])"
        )
    return rel


def video_keys_of(features: dict) -> list[str]:
    """The camera keys of a LeRobot ``features`` mapping (``dtype == "video"``), in its order."""
    return [key for key, feature in features.items() if isinstance(feature, dict) and feature.get("dtype") == "video"]


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
    return f"{episode_key(episode_index)}.{check_key(video_key, what='camera key')}.mp4"


VIDEO_MEMBER_FIELDS = ("offset", "size", "frames", "codec", "sha256", "reencoded")


def video_column(video_key: str, field_name: str) -> str:
    """Return the ``index/episodes.parquet`` column of one camera's member field.

    Fields: ``offset`` (byte offset of the member data in the tar), ``size`` (bytes),
    ``frames`` (decodable frames), ``codec``, ``sha256`` (of the member bytes), ``reencoded``.
    """
    if field_name not in VIDEO_MEMBER_FIELDS:
        raise ValueError(f"unknown video member field {field_name!r}; expected one of {VIDEO_MEMBER_FIELDS}")
    return f"video/{video_key}/{field_name}"


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


def sql_string_literal(text: str) -> str:
    """``text`` as a SQL string literal (quotes doubled): for paths a user gave, never for
    values read from a dataset (those are validated names, or not used in SQL at all)."""
    if "\0" in text:
        raise ValueError("a SQL string literal cannot hold a NUL character")
    return "'" + text.replace("'", "''") + "'"
