"""The frame sizes NVDEC (A100/H100/H200) decodes, per codec: what ``check`` and ``pack`` say
before a re-encode, what ``info`` and the GPU stage say after (``reader.decode.nvdec_rules``).
Pure; one table.

``cuvidGetDecoderCaps`` on Ampere and Hopper: H.264 48x16 to 4096x4096 (width x height), HEVC
144x144 to 8192x8192.
"""

from __future__ import annotations

import math

# (min width, min height, max width, max height) per codec.
SIZE_LIMITS = {"h264": (48, 16, 4096, 4096), "hevc": (144, 144, 8192, 8192)}


def _even_up(value: float) -> int:
    return 2 * math.ceil(value / 2 - 1e-9)


def nvdec_size_for(codec: str, height: int, width: int) -> tuple[int, int] | None:
    """The smallest even size at least ``height x width``'s aspect that NVDEC decodes in
    ``codec`` (an upscale of a camera below the minimum), or None when none is (too large, or
    an aspect the limits cannot hold)."""
    low_w, low_h, high_w, high_h = SIZE_LIMITS[codec]
    scale = max(1.0, low_w / width, low_h / height)
    out_h, out_w = _even_up(height * scale), _even_up(width * scale)
    if out_w > high_w or out_h > high_h:
        return None
    return out_h, out_w


def nvdec_size_refusal(
    codec: str, height: int, width: int, *, where: str, repack: str | None = None, camera: str | None = None
) -> str | None:
    """Why NVDEC cannot decode ``height x width`` frames in ``codec``, or None. ``repack``: the
    command (with its flags so far) that re-encodes; the fix names the size to add to it, for
    ``camera`` alone when it is given (``--resize KEY=HxW``). Without ``repack`` the fix names
    the size only: the caller advises one command for every camera (``check`` and ``info`` do)."""
    low_w, low_h, high_w, high_h = SIZE_LIMITS[codec]
    if low_w <= width <= high_w and low_h <= height <= high_h:
        return None
    fit = nvdec_size_for(codec, height, width)
    size = f"{camera}={fit[0]}x{fit[1]}" if camera and fit else f"{fit[0]}x{fit[1]}" if fit else ""
    if fit and repack:
        fix = f", or repack with `{repack} --resize {size}` (this camera's aspect, NVDEC's minimum)"
    elif fit:
        fix = f", or repack it at {fit[0]}x{fit[1]} (this camera's aspect, NVDEC's minimum)"
    else:
        fix = ""
    return (
        f"{where}: {height}x{width} {codec} frames are outside what NVDEC decodes (height x width {low_h}x{low_w} to "
        f"{high_h}x{high_w}); decode this camera on the CPU (decode_device unset){fix}"
    )
