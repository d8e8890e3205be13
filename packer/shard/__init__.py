"""Building one shard into a local directory: per-episode mp4 members (cut or re-encoded),
the deterministic tar, the row-group parquet, the receipt. No storage, no processes."""

from reader.exports import lazy_exports

_EXPORTS = {
    "packer.shard.build": ["ShardSpec", "BuiltShard", "build_shard", "encode_settings"],
    "packer.shard.members": [
        "EncodeSettings", "EpisodeVideo", "cut_episode", "encode_frames", "reencode_episode", "count_frames",
        "reencode_pixel_format",
    ],
    "packer.shard.frame_policy": ["frame_verdict"],
    "packer.shard.parquet": ["write_shard_parquet", "shard_parquet_layout"],
    "packer.shard.tar_writer": ["DeterministicTarWriter"],
    "packer.shard.mp4_writer": ["write_member"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
