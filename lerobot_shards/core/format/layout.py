"""Names, paths and versions of the packed format (the code twin of docs/FORMAT.md).

Everything here is pure: it turns indices and keys into the paths and column names the
packer writes and the reader reads, and it refuses names that could escape a dataset root
or reach SQL, a tar member name or a file path unchecked.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.limits import MAX_KEY_LENGTH

FORMAT_NAME = "lerobot-shards"
# 3: cameras may be depth maps (12-bit codes, kept lossless) and image features are decoded;
# members may hold B-frames (signed composition offsets) or full-resolution chroma. A reader of
# version 2 would return depth as colour and pictures as bytes, so it must refuse these packs.
FORMAT_VERSION = 3
# 4 (written only when a member holds pre-roll frames): a member may start at the keyframe before
# its episode's first frame; ``video/<key>/preroll`` in the episodes index says how many frames
# come before row 0. A version-3 reader would give every row the frame ``preroll`` too early.
PREROLL_FORMAT_VERSION = 4
# 5 (written only for a dataset whose fps is not a whole number, an NTSC 29.97): ``fps`` in the
# manifest is a JSON number, not an integer; the episodes index has the pre-roll columns of
# version 4. A version-4 reader would refuse the fps as not an integer: it refuses the version.
FPS_FORMAT_VERSION = 5
SUPPORTED_FORMAT_VERSIONS = frozenset({2, 3, 4, 5})
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
# What a pack's ``meta/info.json`` says LeRobot should read it with: LeRobot's reader registry
# (``LeRobotDataset`` on LeRobot main picks a reader by ``info["storage_format"]``) loads
# ``lerobot_shards.reader.lerobot_reader`` for it. The names ``lerobot`` and ``lance`` are LeRobot's.
STORAGE_FORMAT_KEY = "storage_format"
STORAGE_FORMAT = "lerobot_shards"

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
# Bytes a name part keeps as they are; every other byte of a key's UTF-8 is written %XX.
_NAME_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: never in a
# key, a source path or anything a message prints on one line.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


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


def check_feature_key(key: object, *, what: str = "feature key", where: str = "") -> str:
    """Return ``key`` if LeRobot accepts it as a feature (or camera) key, else raise ``FormatError``.

    LeRobot 0.6.1 refuses only ``/`` in a feature name (it flattens stats on it); keys with
    spaces, unicode or parentheses are LeRobot datasets too. Refused beside ``/``: empty,
    longer than ``MAX_KEY_LENGTH`` characters, control characters, ``.`` and ``..`` (a camera
    key is a path segment of the source's video template). Where a key becomes a file name it is
    encoded (``name_segment``); parquet columns and SQL (quoted) take it as it is.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(key, str) or not key:
        raise FormatError(f"{prefix}{what} must be a non-empty string, got {str(key)[:80]!r}")
    if len(key) > MAX_KEY_LENGTH or "/" in key or key in (".", "..") or _CONTROL.search(key):
        raise FormatError(
            f"{prefix}{what} {key[:MAX_KEY_LENGTH]!r} is not allowed: LeRobot keys are 1-{MAX_KEY_LENGTH} characters "
            "without '/' or control characters, and not '.' or '..'"
        )
    return key


def is_plain_key(key: str) -> bool:
    """A key made only of ``[A-Za-z0-9_.-]`` (not starting with ``.``/``-``, no ``..``): every key
    packs of format 3 could hold, which every name derived from it keeps byte for byte."""
    return len(key) <= MAX_KEY_LENGTH and _SAFE_KEY.fullmatch(key) is not None and ".." not in key


def name_segment(key: str) -> str:
    """``key`` as a file-name part: bytes of its UTF-8 outside ``[A-Za-z0-9._-]`` become ``%XX``
    (uppercase hex). One to one, and the identity on every plain key (``is_plain_key``), so the
    member names of packs made before keys were widened are unchanged."""
    data = key.encode()
    if all(b in _NAME_SAFE for b in data):
        return key
    return "".join(chr(b) if b in _NAME_SAFE else f"%{b:02X}" for b in data)


def source_relative_path(rel: object, *, where: str = "") -> str:
    """Return ``rel`` if it is a relative POSIX path inside a LeRobot source root.

    A source's paths come from its own templates with its camera keys in them, so they may hold
    what LeRobot keys hold (spaces, unicode); refused: absolute paths, backslashes, control
    characters, and empty, ``.`` or ``..`` segments.

    Raises:
        FormatError: the path could leave its root or is not a plain path.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(rel, str) or not rel or len(rel) > 4096:
        raise FormatError(f"{prefix}expected a relative path, got {str(rel)[:300]!r}")
    segments = rel.split("/")
    if rel.startswith("/") or "\\" in rel or _CONTROL.search(rel) or any(seg in ("", ".", "..") for seg in segments):
        raise FormatError(
            f"{prefix}path {rel[:300]!r} is not a relative path under the root "
            "(no leading '/', no backslash or control characters, no empty, '.' or '..' segments)"
        )
    return rel


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
    return f"{episode_key(episode_index)}.{name_segment(check_feature_key(video_key, what='camera key'))}.mp4"


VIDEO_MEMBER_FIELDS = ("offset", "size", "frames", "codec", "sha256", "reencoded")
# A member field of format 4 only (``PREROLL_FORMAT_VERSION``): frames before row 0.
PREROLL_FIELD = "preroll"


def video_column(video_key: str, field_name: str) -> str:
    """Return the ``index/episodes.parquet`` column of one camera's member field.

    Fields: ``offset`` (byte offset of the member data in the tar), ``size`` (bytes),
    ``frames`` (frames rows read), ``codec``, ``sha256`` (of the member bytes), ``reencoded``;
    in format 4, ``preroll`` (frames the member holds before row 0's: it starts on a keyframe).
    """
    if field_name not in VIDEO_MEMBER_FIELDS and field_name != PREROLL_FIELD:
        raise ValueError(f"unknown video member field {field_name!r}; expected one of {VIDEO_MEMBER_FIELDS}")
    return f"video/{video_key}/{field_name}"


def sql_safe_name(name: str) -> str:
    """Return ``name`` with every character outside [A-Za-z0-9_] replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def pad_column(window: str, key: str, side: str) -> str:
    """Return the ``index/samples.parquet`` column counting padded slots of a window key.

    ``side`` is ``before`` (offsets reaching before the episode's first frame) or
    ``after`` (offsets reaching past its last frame). Dots in feature keys become
    underscores so DuckDB users need no quoting: ``chunk_action_pad_after``. A key that is
    not plain (``is_plain_key``: spaces, unicode) adds 8 hex digits of its SHA-256, so two
    such keys do not meet in one name; ``pad_columns`` refuses the names that still meet.
    """
    if side not in ("before", "after"):
        raise ValueError(f"side must be 'before' or 'after', got {side!r}")
    part = sql_safe_name(key)
    if not is_plain_key(key):
        part = f"{part}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"
    return f"{sql_safe_name(window)}_{part}_pad_{side}"


def pad_columns(
    windows: Mapping[str, Iterable[str]], *, where: str = "", fold_case: bool = False
) -> list[tuple[str, str, str, str]]:
    """Every pad column of ``{window: keys}``: ``(column, window, key, side)`` in window, key,
    side order.

    ``fold_case``: names that differ only by case meet too, as they do in DuckDB (whose
    identifiers ignore case: ``sql`` would show one column's values under the other's name).
    The packer checks so before it writes anything; readers check exact names, so a pack made
    before that check still reads.

    Raises:
        FormatError: two window keys whose pad columns share a name (``a.b`` and ``a_b`` both
            give ``w_a_b_pad_before``): one would overwrite the other in the samples index.
    """
    out, seen = [], {}
    for window, keys in windows.items():
        for key in keys:
            for side in ("before", "after"):
                column = pad_column(window, key, side)
                name = column.lower() if fold_case else column
                if name in seen and seen[name] != (window, key):
                    other = seen[name]
                    raise FormatError(
                        f"{where + ': ' if where else ''}windows {other[0]!r} key {other[1]!r} and {window!r} key {key!r} "
                        f"share the samples index column {column!r}; rename one window (--window NAME=...)"
                    )
                seen[name] = (window, key)
                out.append((column, window, key, side))
    return out


def sql_aliases(columns: Iterable[str]) -> dict[str, str]:
    """``{column: alias}`` for the columns whose names differ from another's only by case.

    DuckDB's identifiers ignore case: of ``observation.state`` and ``OBSERVATION.STATE`` it
    keeps the first under both spellings and calls the second ``observation.state_1``, so a
    query naming one got the other's values. Each column of such a group is named
    ``<column>@<n>`` instead (``n``: its place in the group, in column order; ``@@`` and more
    while the alias would meet another name), so the bare name is no column and no key shadows
    another. Columns that meet no other are not listed (they keep their names).
    """
    columns = list(columns)
    groups: dict[str, list[str]] = {}
    for column in columns:
        groups.setdefault(column.lower(), []).append(column)
    taken = {c.lower() for c in columns}
    aliases: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        for place, column in enumerate(group, 1):
            at = "@"
            while (alias := f"{column}{at}{place}").lower() in taken:
                at += "@"
            taken.add(alias.lower())
            aliases[column] = alias
    return aliases


def sql_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (quotes doubled): a column name read from a pack."""
    if "\0" in name:
        raise ValueError("a SQL identifier cannot hold a NUL character")
    return '"' + name.replace('"', '""') + '"'


def sql_string_literal(text: str) -> str:
    """``text`` as a SQL string literal (quotes doubled): for paths a user gave, never for
    values read from a dataset (those are validated names, or not used in SQL at all)."""
    if "\0" in text:
        raise ValueError("a SQL string literal cannot hold a NUL character")
    return "'" + text.replace("'", "''") + "'"
