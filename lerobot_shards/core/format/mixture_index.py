"""The compiled index of a mixture (``_mixture/`` beside ``mixture.json``): its files and schemas.

``lerobot-shards mixture create`` reads every pack once and writes what training needs from
all of them into a few files, so a reader opens a pack's own files only when it admits one of
its episodes: one table of every episode of every dataset (where its rows and members are,
with their digests), the shards' footers and digests, the anchors a ``where`` kept, the tasks,
and each dataset's metadata for ``MixtureDataset.meta``. ``mixture.json`` (version 2) records
each file's path, size, rows and SHA-256, so one digest of ``mixture.json`` pins everything a
reader reads (docs/FORMAT.md, "Compiled mixtures"). Pure: schemas and limits, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lerobot_shards.core.errors import MixtureSpecError
from lerobot_shards.core.format.fields import is_int, is_sha256_hex
from lerobot_shards.core.format.layout import safe_relative_path
from lerobot_shards.core.format.limits import (
    INDEX_DICTIONARY_CHUNK_BYTES,
    INDEX_MIN_GROUP_ROWS,
    MAX_CAMERAS,
    MAX_CODEC_NAME_BYTES,
    MAX_DECODED_BYTES,
    MAX_INDEX_FILE_BYTES,
    MAX_MIXTURE_DATASETS,
    MAX_MIXTURE_EPISODES,
    MAX_MIXTURE_MEMBERS,
    MIN_DIGEST_BYTES,
)
from lerobot_shards.core.format.parquet.bounded import Budget, expansion_budget
from lerobot_shards.core.format.parquet.pages import row_bytes

MIXTURE_INDEX_DIR = "_mixture"
INDEX_FILES = ("episodes", "shards", "anchors", "tasks", "meta")
INDEX_PATHS = {
    "episodes": f"{MIXTURE_INDEX_DIR}/episodes.parquet",
    "shards": f"{MIXTURE_INDEX_DIR}/shards.parquet",
    "anchors": f"{MIXTURE_INDEX_DIR}/anchors.parquet",
    "tasks": f"{MIXTURE_INDEX_DIR}/tasks.parquet",
    "meta": f"{MIXTURE_INDEX_DIR}/meta.json",
}

_SHA = pa.binary(32)

EPISODES_SCHEMA = pa.schema(
    [
        ("dataset", pa.int32()),
        ("episode_index", pa.int64()),
        ("length", pa.int64()),
        ("dataset_from_index", pa.int64()),
        ("shard_row", pa.int64()),
        ("row_start", pa.int64()),
        ("row_group", pa.int32()),
        ("row_group_offset", pa.int64()),
        ("row_group_bytes", pa.int64()),
        ("row_group_sha256", _SHA),
        ("row_group_episodes", pa.int32()),
        ("row_group_rows", pa.int64()),
        ("anchors", pa.int64()),
        ("member_offset", pa.list_(pa.int64())),
        ("member_size", pa.list_(pa.int64())),
        ("member_frames", pa.list_(pa.int64())),
        ("member_codec", pa.list_(pa.string())),
        ("member_sha256", pa.list_(_SHA)),
    ]
)
"""One row per episode of every dataset, in dataset order then ascending ``episode_index``.
``shard_row`` is the episode's shard's row in the shards table; ``row_group_episodes`` and
``row_group_rows`` describe the whole row group in its pack (what a reader checks the footer
against); ``anchors`` counts the episode's anchors after the dataset's ``where``. Members
follow the dataset's ``video_keys`` order (one per camera, adjacent in the tar)."""

PREROLL_COLUMN = ("member_preroll", pa.list_(pa.int64()))
"""Written after the member columns only when a member holds pre-roll frames (a pack of format
4; mixture version 4): frames before the episode's first, per member."""

SHARDS_SCHEMA = pa.schema(
    [
        ("dataset", pa.int32()),
        ("shard", pa.int32()),
        ("parquet_bytes", pa.int64()),
        ("footer_offset", pa.int64()),
        ("footer_bytes", pa.int64()),
        ("footer_sha256", _SHA),
        ("tar_bytes", pa.int64()),
        ("tar_sha256", _SHA),
    ]
)
"""One row per shard of every dataset: what a reader needs before it parses a shard's footer."""


def episodes_schema(*, preroll: bool = False) -> pa.Schema:
    """The compiled episodes table's schema: ``EPISODES_SCHEMA``, and ``PREROLL_COLUMN`` after it
    when a member holds pre-roll frames."""
    return EPISODES_SCHEMA.append(pa.field(*PREROLL_COLUMN)) if preroll else EPISODES_SCHEMA


ANCHORS_SCHEMA = pa.schema([("episode_row", pa.int64()), ("lo", pa.int64()), ("hi", pa.int64())])
"""Runs ``[lo, hi)`` of anchor frames of the episodes a ``where`` did not keep whole, ascending
(``episode_row`` is the row in the episodes table). Episodes absent here anchor every frame
(``anchors == length``) or none (``anchors == 0``)."""

TASKS_SCHEMA = pa.schema([("dataset", pa.int32()), ("task_index", pa.int64()), ("task", pa.string())])
"""Each dataset's ``meta/tasks.parquet``: the task string of a sample's ``task_index``."""


@dataclass(frozen=True)
class IndexFile:
    """A compiled index file as ``mixture.json`` records it."""

    path: str
    bytes: int
    rows: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "rows": self.rows, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> IndexFile:
        if not isinstance(data, Mapping):
            raise MixtureSpecError(f"{where}: expected an object with path, bytes, rows and sha256")
        path, size, rows, digest = data.get("path"), data.get("bytes"), data.get("rows"), data.get("sha256")
        try:
            path = safe_relative_path(path)
        except ValueError as err:
            raise MixtureSpecError(f"{where}: {err}") from None
        if not (is_int(size) and 0 <= size <= MAX_INDEX_FILE_BYTES):
            raise MixtureSpecError(f"{where}: bytes must be an int in [0, {MAX_INDEX_FILE_BYTES}], got {size!r}")
        if not (is_int(rows) and 0 <= rows <= MAX_MIXTURE_EPISODES * MAX_CAMERAS):
            raise MixtureSpecError(f"{where}: rows must be a non-negative int, got {rows!r}")
        if not is_sha256_hex(digest):
            raise MixtureSpecError(f"{where}: sha256 must be 64 hex digits, got {str(digest)[:80]!r}")
        return cls(path=path, bytes=int(size), rows=int(rows), sha256=digest)


def parse_index_block(data: Any, *, where: str) -> dict[str, IndexFile]:
    """The ``index`` block of a version-2 ``mixture.json``: every compiled file, checked.

    Raises:
        MixtureSpecError: a file missing, or an entry that does not validate.
    """
    if not isinstance(data, Mapping):
        raise MixtureSpecError(f"{where}: field 'index' must be an object of {list(INDEX_FILES)}")
    missing = [name for name in INDEX_FILES if name not in data]
    if missing:
        raise MixtureSpecError(f"{where}: field 'index' lacks {missing}; re-run `lerobot-shards mixture create`")
    return {name: IndexFile.from_dict(data[name], where=f"{where}: index.{name}") for name in INDEX_FILES}


__all__ = [
    "ANCHORS_SCHEMA",
    "EPISODES_SCHEMA",
    "INDEX_FILES",
    "INDEX_PATHS",
    "MAX_CAMERAS",
    "MAX_INDEX_FILE_BYTES",
    "MAX_MIXTURE_DATASETS",
    "MAX_MIXTURE_EPISODES",
    "MAX_EPISODES_TABLE_BYTES",
    "MAX_MIXTURE_MEMBERS",
    "MIXTURE_INDEX_DIR",
    "SHARDS_SCHEMA",
    "TASKS_SCHEMA",
    "IndexFile",
    "parse_index_block",
    "table_budget",
]


_SCHEMAS = {"episodes": EPISODES_SCHEMA, "shards": SHARDS_SCHEMA, "anchors": ANCHORS_SCHEMA}


# An honest episodes table: this much per episode, and this much per member (its list entries).
EPISODE_ROW_BYTES = row_bytes((f for f in EPISODES_SCHEMA if not f.name.startswith("member_")), string_bytes=MAX_CODEC_NAME_BYTES)
MEMBER_BYTES = row_bytes((f for f in EPISODES_SCHEMA if f.name.startswith("member_")), string_bytes=MAX_CODEC_NAME_BYTES)
_PREROLL_MEMBER_BYTES = row_bytes([pa.field(*PREROLL_COLUMN)], string_bytes=MAX_CODEC_NAME_BYTES)
# The honest episodes table at the format's maxima: the most a compiled index's rows may decode to.
MAX_EPISODES_TABLE_BYTES = MAX_MIXTURE_EPISODES * EPISODE_ROW_BYTES + MAX_MIXTURE_MEMBERS * MEMBER_BYTES


def table_budget(
    name: str, *, rows: int, members: int, cameras: int, encoded: int, duplicates: int = 1, preroll: bool = False
) -> Budget:
    """What reading a compiled table of ``rows`` rows may decode to.

    The episodes table: what an honest table of that many rows can be, ``EPISODE_ROW_BYTES``
    per row and ``MEMBER_BYTES`` per member (``members``: what the mixture's datasets declare,
    episodes x cameras; an episode without members still decodes one list entry), plus one
    writer-sized dictionary page per column chunk (never more than the expansion budget of its
    ``encoded`` bytes) in row groups of the writer's size; lists of at most ``cameras`` values.
    Each member's digest must be backed by ``MIN_DIGEST_BYTES`` of the file (divided by
    ``duplicates``: the most times the mixture lists one pack), since digests do not compress:
    a small file cannot claim millions of members, whatever ``mixture.json`` says. At
    ``MAX_MIXTURE_EPISODES`` and ``MAX_MIXTURE_MEMBERS`` the honest part is
    ``MAX_EPISODES_TABLE_BYTES``, so the largest mixture the format allows opens. Other
    tables: their rows' honest size, never less than the expansion budget, at most
    ``MAX_DECODED_BYTES``. ``preroll`` (mixture version 4): the episodes table may carry each
    member's pre-roll (``PREROLL_COLUMN``), 8 more bytes a member. The writer checks its own
    output against this same budget
    (``lerobot_shards.packer.mixture.compile``), so nothing it writes is refused by a reader.

    A compiled index compresses far better than any fixed factor honest tables would all fit
    (sorted integer columns, repeated row-group digests: up to 28x measured), so rows are sized
    from the count ``mixture.json`` records, and their members from the digest bytes present.
    """
    cameras = max(0, min(cameras, MAX_CAMERAS))
    # An empty list still decodes one level entry: at least one value per row.
    schema = episodes_schema(preroll=preroll)
    per_list = {field.name: max(cameras, 1) for field in schema if field.name.startswith("member_")}
    if name == "episodes":
        member = MEMBER_BYTES + (_PREROLL_MEMBER_BYTES if preroll else 0)
        cap = MAX_EPISODES_TABLE_BYTES + (MAX_MIXTURE_MEMBERS * _PREROLL_MEMBER_BYTES if preroll else 0)
        honest = min(cap, rows * EPISODE_ROW_BYTES + max(members, rows) * member)
        return Budget(
            max_bytes=honest,
            values_per_row=per_list,
            backed={"member_sha256": MIN_DIGEST_BYTES / max(duplicates, 1)},
            dictionary_chunk_bytes=INDEX_DICTIONARY_CHUNK_BYTES,
            min_group_rows=INDEX_MIN_GROUP_ROWS,
        )
    schema = _SCHEMAS.get(name)
    if schema is None:
        return Budget(values_per_row=per_list)
    per_row = row_bytes(schema, string_bytes=MAX_CODEC_NAME_BYTES)
    return Budget(max_bytes=min(MAX_DECODED_BYTES, max(expansion_budget(encoded), rows * per_row)))
