"""Reading a dataset to pack, local, from a bucket or from the Hub: the ``Source`` interface
and its table of formats (``base``), each format owning its layout: LeRobot v3 (``lerobot``,
its metadata ``lerobot_v3_metadata``) and LeRobot v2.1 (``lerobot_v21``), over what every
format shares: a hardened root (``files``), rows read as LeRobot reads them (``rows``), camera
probes (``cameras``), video windows (``video``). Knows nothing of shards."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.source.base": [
        "Source",
        "SOURCE_FORMATS",
        "format_of",
        "format_of_listing",
        "open_dataset_source",
    ],
    "lerobot_shards.packer.source.records": ["EpisodeRecord", "MetadataFile", "SourceFormat"],
    "lerobot_shards.packer.source.lerobot": ["LeRobotSource", "open_source"],
    "lerobot_shards.packer.source.lerobot_v21": ["LeRobotV21Source"],
    "lerobot_shards.packer.source.rows": ["RowReader", "SchemaDrift"],
    "lerobot_shards.packer.source.info": ["parse_info"],
    "lerobot_shards.packer.source.video": ["VideoLocation", "SourceVideoReader", "SourceFrameDecoder", "video_duration_s"],
    "lerobot_shards.packer.source.staging": ["stage_source", "describe_source", "default_cache_dir"],
    "lerobot_shards.packer.source.samples": ["SourceSampleReader", "UnsupportedTiming", "read_moov"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
