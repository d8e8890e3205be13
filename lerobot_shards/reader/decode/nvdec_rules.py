"""What NVDEC (A100/H100/H200) decodes, as one function: the GPU stage refuses a member by it
(``backends/nvdec.py``) and ``lerobot-shards info`` says from it, on a real member of each
camera, whether ``decode_device="cuda"`` can read the pack. Pure (no torch, no GPU).

NVDEC on these GPUs decodes H.264 (4:2:0 only: ``--video h264`` codes odd-sized cameras 4:4:4)
and HEVC (4:2:0 and 4:4:4), not AV1 (copy mode keeps LeRobot's AV1) nor monochrome, within
the decoder's frame size limits (``core.format.nvdec_limits``, which ``check`` and ``pack`` say
before a re-encode); the stage feeds members in stored order, so frames
stored out of presentation order (B-frames) are refused too.
"""

from __future__ import annotations

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import check_mp4
from lerobot_shards.core.format.nvdec_limits import nvdec_size_refusal as size_refusal
from lerobot_shards.reader.decode.annexb import stream_config
from lerobot_shards.reader.decode.sps import signal_type

CODECS = ("hevc", "h264")
_CHROMA = {0: "monochrome", 1: "4:2:0", 2: "4:2:2", 3: "4:4:4"}
_REPACK = "repack with `lerobot-shards pack --video hevc`"


def nvdec_format_refusal(codec: str, parameter_sets, *, where: str) -> str | None:
    """Why NVDEC cannot decode a member's chroma format, or None. Parameter sets that do not
    parse are left to NVDEC's own parser."""
    try:
        signal = signal_type(codec, parameter_sets[0], where=where) if parameter_sets else None
    except FormatError:
        return None
    if signal is None:
        return None
    supported = (1,) if codec == "h264" else (1, 3)
    if signal.chroma_format not in supported:
        name = _CHROMA.get(signal.chroma_format, str(signal.chroma_format))
        return (
            f"{where}: {codec} {name} cannot be decoded by NVDEC; {_REPACK} "
            "(odd-sized cameras are coded 4:4:4, which NVDEC decodes in HEVC only)"
        )
    return None


def nvdec_size_refusal(codec: str, height: int, width: int, *, where: str, camera: str | None = None) -> str | None:
    """Why NVDEC cannot decode frames of this size in ``codec``, or None (``core.format.nvdec_limits``):
    the size that fits this camera; ``lerobot-shards info`` gives the one command for every camera."""
    return size_refusal(codec, height, width, where=where, camera=camera)


def nvdec_refusal(
    data: bytes, codec: str, *, where: str, frames: int | None = None, height=None, width=None, camera: str | None = None
):
    """Why NVDEC cannot decode this member (its mp4 bytes, ``codec`` as the index records it), or
    None: the codec, frames out of presentation order, the chroma format of its parameter sets,
    the frame size. Returns ``(refusal, layout)``; the layout is None when the codec is refused
    before the member is parsed.

    Raises:
        FormatError: the member's boxes do not parse or exceed the format's bounds (``check_mp4``).
    """
    if codec not in CODECS:
        return f"{where}: codec {codec!r} cannot be decoded by NVDEC on A100/H100; {_REPACK} (or h264)", None
    layout = check_mp4(data, where=where, frames=frames, height=height, width=width)
    if not layout.in_order:
        return f"{where}: frames are stored out of presentation order (B-frames); {_REPACK} for GPU decode", layout
    config = stream_config(layout.codec, layout.codec_config, where=where)
    refusal = nvdec_format_refusal(layout.codec, config.sequence_parameter_sets, where=where)
    if refusal is None:
        refusal = nvdec_size_refusal(layout.codec, layout.height, layout.width, where=where, camera=camera)
    return refusal, layout


__all__ = ["CODECS", "nvdec_format_refusal", "nvdec_refusal", "nvdec_size_refusal"]
