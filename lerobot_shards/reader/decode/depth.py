"""Depth maps as LeRobot 0.6.1 returns them: 12-bit codes of a depth video dequantized to a unit,
and depth pictures converted to it.

A depth video holds LeRobot's quantized codes (``gray12le``, 0..4095, lossless HEVC by default);
``LeRobotDataset`` decodes them with PyAV and maps them back with ``dequantize_depth`` (its torch
path: one float32 buffer, ``code * scale + offset``, ``exp`` and ``- shift`` in log mode, clamped
to the depth range, then ``* 1000``, rounded and clamped to uint16's range for millimetres).
``dequantize`` repeats those operations in the same order on the same dtype, so the values are
LeRobot's bit for bit. A depth *picture* (an image feature, 16-bit, in its recorded unit) is
converted only when its recorded unit differs from the one asked for, as LeRobot does.
"""

from __future__ import annotations

import math

import torch

from lerobot_shards.core.format.features import DEPTH_QMAX, MM_PER_METRE, DepthQuantization

_UINT16_MAX = 65535.0


def dequantize(codes: torch.Tensor, quantization: DepthQuantization, unit: str) -> torch.Tensor:
    """Depth in ``unit`` (``"mm"`` or ``"m"``) of 12-bit ``codes`` shaped ``(T, 1, H, W)``.

    Returns:
        float32 ``(T, 1, H, W)``: metres in ``[depth_min, depth_max]``, or millimetres rounded
        and clamped to ``[0, 65535]`` (LeRobot's float32 millimetre tensor).
    """
    depth_min, depth_max, shift = float(quantization.depth_min), float(quantization.depth_max), float(quantization.shift)
    if quantization.use_log:
        log_min, log_max = math.log(depth_min + shift), math.log(depth_max + shift)
        scale, offset = (log_max - log_min) / DEPTH_QMAX, log_min
    else:
        scale, offset = (depth_max - depth_min) / DEPTH_QMAX, depth_min
    planes = codes.squeeze(-3) if codes.shape[-3] == 1 else codes.squeeze(-1)
    values = planes.to(dtype=torch.float32, copy=True)
    values.mul_(scale).add_(offset)
    if quantization.use_log:
        values.exp_().sub_(shift)
    values.clamp_(depth_min, depth_max)
    values.unsqueeze_(-3)
    if unit == "m":
        return values
    return values.mul_(MM_PER_METRE).round_().clamp_(0.0, _UINT16_MAX)


def convert_unit(depth: torch.Tensor, stored: str | None, unit: str) -> torch.Tensor:
    """A depth picture's values in ``unit``: unchanged when its recorded unit is unknown or the
    same; ``* 1000`` from metres, ``/ 1000`` from millimetres (LeRobot's conversion)."""
    if stored is None or stored == unit:
        return depth
    return depth * MM_PER_METRE if stored == "m" else depth / MM_PER_METRE


__all__ = ["convert_unit", "dequantize"]
