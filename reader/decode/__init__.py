"""Frames out of compressed episode members: the CPU decoders (``frames``) and the decode
stage that runs outside the DataLoader workers, on the CPU or the GPU (``stage``)."""

from reader.exports import lazy_exports

_EXPORTS = {
    "reader.decode.stage": ["DecodeStage", "collate", "DecodeStageError"],
    "reader.decode.annexb": ["START_CODE", "decode_runs", "elementary_stream", "packets", "stream_config", "to_annexb"],
    "reader.decode.colour": ["ColourSpec", "colr_signal", "nv12_to_rgb", "resolve", "yuv420p_to_nv12"],
    "reader.decode.sps": ["SignalType", "h264_signal", "hevc_signal", "rbsp", "signal_type"],
    "reader.decode.frames": ["CpuDecoders", "FrameSpec", "DecodeError"],
    "reader.decode.batch_plan": ["balance", "plan_camera"],
    "reader.decode.member_cache": ["MemberCache"],
    "reader.decode.wire": ["ENCODED_KEY", "EncodedFrames"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
