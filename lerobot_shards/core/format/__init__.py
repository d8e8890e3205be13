"""The packed format, defined and validated in one place (the code twin of docs/FORMAT.md).

The packer writes what is defined here and every reader (``PackedDataset``, ``verify``,
``sql``, ``MixtureDataset``) parses through it; ``reader`` never imports ``packer``, so
every name both sides share lives in this package:

- ``layout``: paths, names and versions;
- ``limits``: every bound on what untrusted bytes may expand to;
- ``parquet``: reading parquet with those bounds (page headers walked before decoding);
- ``fields``: bounded JSON parsing, field checks, digests;
- ``features``: the typed parse of a ``features`` object (``Features``), LeRobot's rules for
  what each holds (video, image, depth, language) and the cross-checks between its fields;
- ``lerobot_info``: ``meta/info.json``, parsed (``LeRobotInfo``);
- ``images``: image features' pictures: allowed formats and their bounds;
- ``manifest``: ``manifest.json`` (the commit point and root of trust);
- ``indexes``: the schemas of ``index/episodes.parquet`` and ``index/samples.parquet`` and
  the validating parser of the episodes index;
- ``pack_records``: ``pack-plan.json`` and shard receipts;
- ``pack_output``: how a pack's parquet is written (compression, page index): one profile;
- ``mixture``: ``mixture.json``.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.core.errors": [
        "FormatError",
        "IntegrityError",
        "MixtureSpecError",
        "PinMismatchError",
        "UnsupportedFormatVersionError",
    ],
    "lerobot_shards.core.format.fields": ["check_bytes", "sha256_chunks", "sha256_file", "sha256_hex"],
    "lerobot_shards.core.format.features": [
        "DEPTH_QMAX",
        "DEPTH_UNITS",
        "LANGUAGE_COLUMNS",
        "LANGUAGE_FIELDS",
        "MM_PER_METRE",
        "CameraGeometry",
        "DepthQuantization",
        "FeatureSpec",
        "Features",
        "check_language_type",
        "parse_feature",
        "parse_features",
    ],
    "lerobot_shards.core.format.lerobot_info": ["LeRobotInfo", "parse_lerobot_info"],
    "lerobot_shards.core.format.images": ["IMAGE_FORMATS", "UINT16_MODES", "image_column_bytes", "open_image"],
    "lerobot_shards.core.format.indexes": [
        "CameraMember",
        "EpisodeEntry",
        "EpisodeTable",
        "RowGroupRef",
        "episodes_index_schema",
        "parse_episodes_index",
        "samples_index_schema",
        "hex_digests",
        "episodes_index_budget",
    ],
    "lerobot_shards.core.format.layout": [
        "DEFAULT_TABULAR_COLUMNS",
        "EPISODES_INDEX_PATH",
        "FORMAT_NAME",
        "FORMAT_VERSION",
        "FRAME_MISMATCH_POLICIES",
        "INDEX_DIR",
        "INFO_PATH",
        "MANIFEST_PATH",
        "PREROLL_FIELD",
        "FPS_FORMAT_VERSION",
        "PREROLL_FORMAT_VERSION",
        "META_DIR",
        "ROW_GROUP_TARGET_BYTES",
        "SAMPLES_INDEX_PATH",
        "SHARDS_DIR",
        "STATS_PATH",
        "STORAGE_FORMAT",
        "STORAGE_FORMAT_KEY",
        "SUPPORTED_FORMAT_VERSIONS",
        "TASKS_PATH",
        "VIDEO_CODECS",
        "VIDEO_MODES",
        "check_feature_key",
        "check_key",
        "name_segment",
        "episode_key",
        "pad_column",
        "pad_columns",
        "safe_relative_path",
        "source_relative_path",
        "shard_name",
        "shard_parquet_path",
        "shard_receipt_path",
        "shard_tar_path",
        "sql_aliases",
        "sql_identifier",
        "sql_safe_name",
        "sql_string_literal",
        "VIDEO_MEMBER_FIELDS",
        "video_column",
        "video_member_name",
    ],
    "lerobot_shards.core.format.limits": [
        "ROW_GROUP_MAX_BYTES",
        "MAX_PARAMETER_SETS",
        "MAX_EPISODE_FRAMES",
        "MAX_FEATURE_ELEMENTS",
        "MAX_TASKS",
        "MAX_DECODED_BYTES",
        "MAX_MIXTURE_EPISODES",
        "MAX_MIXTURE_MEMBERS",
        "MAX_DATASET_EPISODES",
        "MAX_DATASET_MEMBERS",
        "MAX_GOP_PIXELS",
        "MAX_PAGE_BYTES",
    ],
    "lerobot_shards.core.format.pack_output": [
        "DEFAULT_PARQUET_COMPRESSION",
        "MIXTURE_PARQUET",
        "PARQUET_COMPRESSIONS",
        "ParquetCompression",
        "ParquetProfile",
        "pack_parquet",
        "parquet_compression_choices",
    ],
    "lerobot_shards.core.format.manifest": [
        "FileEntry",
        "FooterEntry",
        "Manifest",
        "ShardEntry",
        "manifest_sha256",
        "content_sha256",
    ],
    "lerobot_shards.core.format.mp4": [
        "Mp4Layout",
        "Mp4Track",
        "check_gop",
        "check_mp4",
        "gop_within_bound",
        "longest_gop",
        "read_track",
        "trivial_edits",
    ],
    "lerobot_shards.core.format.pack_records": ["PLAN_PATH", "PLAN_VERSION", "PackPlan", "ShardReceipt"],
    "lerobot_shards.core.format.mixture_index": [
        "EPISODES_SCHEMA",
        "EPISODE_ROW_BYTES",
        "MAX_EPISODES_TABLE_BYTES",
        "MEMBER_BYTES",
        "table_budget",
    ],
    "lerobot_shards.core.format.mixture": ["MixtureSpec", "mixture_feature", "resolve_dataset_path"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
