"""YUV 4:2:0 to RGB with FFmpeg's own arithmetic, so GPU frames are the CPU path's bytes.

torchcodec, PyAV (and so LeRobot) turn decoded 8-bit 4:2:0 frames into RGB24 with FFmpeg's
swscale, whose YUV->RGB path for this conversion works in 16-bit fixed point: each term is
``(x * 8 - offset) * coefficient >> 16``, floored, summed, clamped to 0..255; chroma is
taken from the nearest sample (no interpolation). The coefficients come from the matrix the
stream signals (``matrix_coefficients``) and its range. Measured here: this arithmetic
reproduces torchcodec (FFmpeg 5.1) and PyAV 18.1 (FFmpeg 8.0) bit for bit on x86-64, at
BT.601 and BT.709, limited and full range (``tests/reader/test_colour.py`` keeps checking it).

NVDEC decodes H.264/HEVC bit-exactly (the standards define the decoded samples), so NVDEC's
NV12 output converted here gives frames identical to the CPU path's, where a converter with
other rounding (PyNvVideoCodec's own RGB output) differs by up to 2 levels on ~30% of pixels.

Which matrix and range apply is resolved as FFmpeg's decoders do: the SPS's VUI first
(``lerobot_shards.reader.decode.sps``); a container ``colr`` box only where FFmpeg versions agree on it.
Anything this module has not been checked against (other matrices, 4:2:2/4:4:4, high bit
depth, odd sizes, a ``colr`` box that could change the result) gives no ``ColourSpec``, and
the caller converts another way.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import torch

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.reader.decode.sps import SignalType

# swscale's YUV->RGB coefficients per matrix_coefficients (ISO/IEC 23091-2) value, in 1/65536:
# (V->R, U->B, U->G, V->G). These are the numbers FFmpeg uses (its table ff_yuv2rgb_coeffs);
# they are not derivable by one rounding rule from the standards' Kr/Kb, so they are listed.
_BT601 = (104597, 132201, 25675, 53279)
_BT709 = (117489, 138438, 13975, 34925)
# The matrices both FFmpeg front ends were checked to convert with these coefficients (the
# unspecified matrix, 2, means BT.601 to swscale, which is what LeRobot's AV1 and our
# re-encodes carry). Others give no exact conversion.
_COEFFICIENTS = {1: _BT709, 2: _BT601, 5: _BT601, 6: _BT601}
UNSPECIFIED = 2


@dataclass(frozen=True)
class ColourSpec:
    """How a member's frames are converted: the YUV->RGB matrix (a ``matrix_coefficients``
    value with known coefficients) and whether samples use the full 0-255 range."""

    matrix: int
    full_range: bool

    def fixed_point(self) -> tuple[int, int, int, int, int, int]:
        """``(y, v->r, u->b, v->g, u->g, y offset)`` as swscale's 16-bit path uses them (its
        defaults: contrast and saturation 1, brightness 0)."""
        crv, cbu, cgu, cgv = _COEFFICIENTS[self.matrix]
        cgu, cgv = -cgu, -cgv
        cy, oy = 1 << 16, 0
        if self.full_range:
            # C integer division truncates toward zero; Python's // floors: keep C's.
            crv, cbu = crv * 224 // 255, cbu * 224 // 255
            cgu, cgv = -((-cgu) * 224 // 255), -((-cgv) * 224 // 255)
        else:
            cy, oy = cy * 255 // 219, 16 << 16

        def q13(value: int) -> int:  # value * 2^13, rounded to 16 bits
            return (value * (1 << 13) + (1 << 15)) >> 16

        return q13(cy), q13(crv), q13(cbu), q13(cgv), q13(cgu), (oy * 8 + (1 << 15)) >> 16


def colr_signal(colour_box: bytes) -> tuple[int | None, bool | None]:
    """``(matrix, full range)`` from an mp4 ``colr`` box payload (``nclx``, or QuickTime's
    ``nclc`` without a range flag); ``(None, None)`` for an ICC profile or a short box."""
    if len(colour_box) >= 10 and colour_box[:4] in (b"nclx", b"nclc"):
        matrix = struct.unpack(">H", colour_box[8:10])[0]
        full = bool(colour_box[10] & 0x80) if colour_box[:4] == b"nclx" and len(colour_box) >= 11 else None
        return matrix, full
    return None, None


def resolve(signal: SignalType, colour_boxes: tuple[bytes, ...], height: int, width: int) -> tuple[ColourSpec | None, str]:
    """The conversion FFmpeg applies to a member, or ``(None, why not)`` where this module
    cannot be sure to match it.

    The VUI decides where it speaks. Where it is silent, FFmpeg's H.264 decoder keeps the
    container's values and its HEVC decoder resets them to unspecified: a ``colr`` box that
    would change the result then makes the answer version-dependent, so none is given (nor
    for several ``colr`` boxes, which FFmpeg applies in turn).
    """
    if signal.chroma_format != 1 or signal.bit_depth != 8:
        return None, f"chroma format {signal.chroma_format}, {signal.bit_depth}-bit (exact conversion: 8-bit 4:2:0)"
    if height % 2 or width % 2:
        return None, f"odd frame size {height}x{width}"
    if len(colour_boxes) > 1 and (signal.matrix is None or signal.full_range is None):
        return None, f"{len(colour_boxes)} colr boxes and a stream that does not signal its colour fully"
    box_matrix, box_full = colr_signal(colour_boxes[0]) if colour_boxes else (None, None)
    matrix = signal.matrix
    if matrix is None:
        if box_matrix is not None and _COEFFICIENTS.get(box_matrix) != _COEFFICIENTS[UNSPECIFIED]:
            return None, f"the stream signals no matrix and its colr box says {box_matrix}"
        matrix = UNSPECIFIED
    full = signal.full_range
    if full is None:
        if box_full:
            return None, "the stream signals no range and its colr box says full range"
        full = False
    if matrix not in _COEFFICIENTS:
        return None, f"matrix_coefficients {matrix} (exact conversion: {sorted(_COEFFICIENTS)})"
    return ColourSpec(matrix=matrix, full_range=full), ""


def nv12_to_rgb(nv12: torch.Tensor, spec: ColourSpec, out: torch.Tensor | None = None) -> torch.Tensor:
    """Convert ``(N, H * 3 // 2, W)`` uint8 NV12 frames (luma rows, then rows of interleaved
    U, V) to ``(N, 3, H, W)`` uint8 RGB, written into ``out`` when given; on ``nv12``'s device.

    Raises:
        ValueError: a shape that is not NV12 of an even frame size, or ``out`` of another shape.
    """
    frames, rows, width = nv12.shape
    height = rows * 2 // 3
    if nv12.dtype != torch.uint8 or rows != height * 3 // 2 or height % 2 or width % 2:
        raise ArgumentError(f"not NV12 frames of an even size: {tuple(nv12.shape)} {nv12.dtype}")
    if out is None:
        out = torch.empty((frames, 3, height, width), dtype=torch.uint8, device=nv12.device)
    elif tuple(out.shape) != (frames, 3, height, width) or out.dtype != torch.uint8:
        raise ArgumentError(f"out is {tuple(out.shape)} {out.dtype}; expected {(frames, 3, height, width)} uint8")
    # In chunks of frames: the int32 temporaries are ~8 bytes per pixel of the chunk.
    step = max(1, _CHUNK_PIXELS // (height * width))
    for first in range(0, frames, step):
        _convert(nv12[first : first + step], spec, out[first : first + step], height, width)
    return out


_CHUNK_PIXELS = 1 << 25  # 32M pixels a chunk: ~256 MB of temporaries


def _convert(nv12: torch.Tensor, spec: ColourSpec, out: torch.Tensor, height: int, width: int) -> None:
    frames = nv12.shape[0]
    y_coef, vr, ub, vg, ug, y_offset = spec.fixed_point()
    chroma = nv12[:, height:].reshape(frames, height // 2, width // 2, 2).to(torch.int32).mul_(8).sub_(1024)
    u, v = chroma[..., 0], chroma[..., 1]
    luma = nv12[:, :height].to(torch.int32).mul_(8).sub_(y_offset).mul_(y_coef).bitwise_right_shift_(16)
    luma = luma.view(frames, height // 2, 2, width // 2, 2)
    red = (v * vr).bitwise_right_shift_(16)
    blue = (u * ub).bitwise_right_shift_(16)
    green = (u * ug).bitwise_right_shift_(16).add_((v * vg).bitwise_right_shift_(16))
    for channel, term in enumerate((red, green, blue)):
        value = luma + term.view(frames, height // 2, 1, width // 2, 1)
        out[:, channel].view(frames, height // 2, 2, width // 2, 2).copy_(value.clamp_(0, 255))


def yuv420p_to_nv12(planes: tuple, height: int, width: int) -> torch.Tensor:
    """One frame's three 4:2:0 planes (Y: H x W, U and V: H/2 x W/2; arrays or tensors) as
    an ``(H * 3 // 2, W)`` uint8 NV12 tensor: the layout NVDEC returns (for tests and tools)."""
    y, u, v = (torch.as_tensor(p, dtype=torch.uint8) for p in planes)
    uv = torch.stack((u, v), dim=-1).reshape(height // 2, width)
    return torch.cat((y.reshape(height, width), uv), dim=0)
