"""The packed format, defined and validated in one place (the code twin of docs/FORMAT.md).

The packer writes what is defined here and every reader (``PackedDataset``, ``verify``,
``sql``, ``MixtureDataset``) parses through it; ``reader`` never imports ``packer``, so
every name both sides share lives in this package:

- ``layout``: paths, names and versions;
- ``limits``: every bound on what untrusted bytes may expand to;
- ``parquet``: reading parquet with those bounds (page headers walked before decoding);
- ``fields``: bounded JSON parsing, field checks, digests;
- ``manifest``: ``manifest.json`` (the commit point and root of trust);
- ``indexes``: the schemas of ``index/episodes.parquet`` and ``index/samples.parquet`` and
  the validating parser of the episodes index;
- ``pack_records``: ``pack-plan.json`` and shard receipts;
- ``mixture``: ``mixture.json``.
"""

from __future__ import annotations

from reader.errors import (
    FormatError,
    IntegrityError,
    MixtureSpecError,
    PinMismatchError,
    UnsupportedFormatVersionError,
)
from reader.format.fields import check_bytes, sha256_chunks, sha256_file, sha256_hex
from reader.format.indexes import (
    CameraMember,
    EpisodeEntry,
    EpisodeTable,
    RowGroupRef,
    episodes_index_schema,
    parse_episodes_index,
    samples_index_schema,
)
from reader.format.layout import (
    DEFAULT_TABULAR_COLUMNS,
    EPISODES_INDEX_PATH,
    FORMAT_NAME,
    FORMAT_VERSION,
    FRAME_MISMATCH_POLICIES,
    INDEX_DIR,
    INFO_PATH,
    MANIFEST_PATH,
    META_DIR,
    ROW_GROUP_TARGET_BYTES,
    SAMPLES_INDEX_PATH,
    SHARDS_DIR,
    STATS_PATH,
    SUPPORTED_FORMAT_VERSIONS,
    TASKS_PATH,
    VIDEO_CODECS,
    VIDEO_MODES,
    check_key,
    episode_key,
    pad_column,
    safe_relative_path,
    shard_name,
    shard_parquet_path,
    shard_receipt_path,
    shard_tar_path,
    sql_safe_name,
    sql_string_literal,
    video_column,
    video_keys_of,
    video_member_name,
)
from reader.format.limits import ROW_GROUP_MAX_BYTES
from reader.format.manifest import (
    FileEntry,
    FooterEntry,
    Manifest,
    ShardEntry,
    manifest_sha256,
)
from reader.format.mp4 import (
    Mp4Layout,
    Mp4Track,
    check_gop,
    check_mp4,
    gop_within_bound,
    longest_gop,
    read_track,
    trivial_edits,
)
from reader.format.pack_records import PLAN_PATH, PLAN_VERSION, PackPlan, ShardReceipt

__all__ = [
    "Mp4Layout",
    "Mp4Track",
    "check_gop",
    "check_mp4",
    "read_track",
    "trivial_edits",
    "gop_within_bound",
    "longest_gop",
    "DEFAULT_TABULAR_COLUMNS",
    "EPISODES_INDEX_PATH",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "FRAME_MISMATCH_POLICIES",
    "INDEX_DIR",
    "INFO_PATH",
    "MANIFEST_PATH",
    "META_DIR",
    "PLAN_PATH",
    "PLAN_VERSION",
    "ROW_GROUP_MAX_BYTES",
    "ROW_GROUP_TARGET_BYTES",
    "SAMPLES_INDEX_PATH",
    "SHARDS_DIR",
    "STATS_PATH",
    "SUPPORTED_FORMAT_VERSIONS",
    "TASKS_PATH",
    "VIDEO_CODECS",
    "VIDEO_MODES",
    "CameraMember",
    "EpisodeEntry",
    "EpisodeTable",
    "FileEntry",
    "FooterEntry",
    "FormatError",
    "IntegrityError",
    "Manifest",
    "MixtureSpecError",
    "PackPlan",
    "PinMismatchError",
    "RowGroupRef",
    "ShardEntry",
    "ShardReceipt",
    "UnsupportedFormatVersionError",
    "check_bytes",
    "check_key",
    "episode_key",
    "episodes_index_schema",
    "manifest_sha256",
    "pad_column",
    "parse_episodes_index",
    "safe_relative_path",
    "samples_index_schema",
    "sha256_chunks",
    "sha256_file",
    "sha256_hex",
    "shard_name",
    "shard_parquet_path",
    "shard_receipt_path",
    "shard_tar_path",
    "sql_safe_name",
    "sql_string_literal",
    "video_column",
    "video_keys_of",
    "video_member_name",
]
