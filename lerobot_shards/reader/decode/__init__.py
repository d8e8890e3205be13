"""Frames out of compressed episode members: the CPU decoders (``frames``) and the decode
stage that runs outside the DataLoader workers, on the CPU or the GPU (``stage``)."""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.decode.stage": ["DecodeStage", "collate", "DecodeStageError"],
    "lerobot_shards.reader.decode.annexb": [
        "START_CODE",
        "decode_runs",
        "elementary_stream",
        "packets",
        "stream_config",
        "to_annexb",
    ],
    "lerobot_shards.reader.decode.colour": ["ColourSpec", "colr_signal", "nv12_to_rgb", "resolve", "yuv420p_to_nv12"],
    "lerobot_shards.reader.decode.sps": ["SignalType", "h264_signal", "hevc_signal", "rbsp", "signal_type"],
    "lerobot_shards.reader.decode.frames": ["CpuDecoders", "cpu_decoder_names"],
    "lerobot_shards.reader.decode.spec": ["FrameSpec", "EpisodeDecoder", "check_frame_spec"],
    "lerobot_shards.reader.decode.batch_plan": ["balance", "plan_camera"],
    "lerobot_shards.reader.decode.member_cache": ["MemberCache"],
    "lerobot_shards.reader.decode.unit_float": ["to_unit_float", "scale_to_unit_"],
    "lerobot_shards.reader.decode.images": ["decode_image", "image_tensor"],
    "lerobot_shards.reader.decode.nvdec_rules": ["nvdec_refusal"],
    "lerobot_shards.reader.decode.wire": ["ENCODED_KEY", "EncodedFrames"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
