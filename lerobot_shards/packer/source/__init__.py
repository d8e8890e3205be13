"""Reading a dataset to pack, local, from a bucket or from the Hub: the ``Source`` interface
and its table of formats (``base``), LeRobot v3 its one format today (``lerobot``): metadata,
rows, video windows. Knows nothing of shards."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.packer.source.base": ["Source", "SourceFormat", "SOURCE_FORMATS", "open_dataset_source"],
    "lerobot_shards.packer.source.lerobot": ["LeRobotSource", "SchemaDrift", "open_source"],
    "lerobot_shards.packer.source.info": ["parse_info"],
    "lerobot_shards.packer.source.video": ["VideoLocation", "SourceVideoReader", "SourceFrameDecoder", "video_duration_s"],
    "lerobot_shards.packer.source.staging": ["stage_source", "describe_source", "default_cache_dir"],
    "lerobot_shards.packer.source.samples": ["SourceSampleReader", "UnsupportedTiming", "read_moov"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
