"""Building one shard into a local directory: per-episode mp4 members (cut or re-encoded),
the deterministic tar, the row-group parquet, the receipt. No storage, no processes."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.shard.build": ["ShardSpec", "BuiltShard", "build_shard", "encode_settings"],
    "lerobot_shards.packer.shard.members": [
        "EncodeSettings",
        "EpisodeVideo",
        "cut_episode",
        "encode_frames",
        "reencode_episode",
        "count_frames",
        "reencode_pixel_format",
    ],
    "lerobot_shards.packer.shard.encoder_room": ["encoder_room_bytes", "encoder_threads", "ensure_encoder_room"],
    "lerobot_shards.packer.shard.frame_policy": ["frame_verdict"],
    "lerobot_shards.packer.shard.parquet": ["write_shard_parquet", "shard_parquet_layout"],
    "lerobot_shards.packer.shard.tar_writer": ["DeterministicTarWriter"],
    "lerobot_shards.packer.shard.mp4_writer": ["write_member"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
