"""uint8 pixels to float32 in [0, 1]: the one conversion every path applies (the sample path,
the ring, the decode stage, ``to_device``, pictures), written once.

``x.to(float32).div_(255)`` is bit-identical to LeRobot's ``(frames / 255.0).type(float32)`` and
to torchvision's ``ToTensor`` (all divide in float32: one IEEE division per element; checked for
all 256 values by tests/reader/test_unit_float.py) but ~5x faster on the CPU (no mixed-dtype kernel).
"""

from __future__ import annotations

import torch


def to_unit_float(pixels: torch.Tensor) -> torch.Tensor:
    """A new float32 tensor of ``pixels`` / 255 (uint8 in, values in [0, 1] out)."""
    return pixels.to(torch.float32).div_(255.0)


def scale_to_unit_(values: torch.Tensor) -> torch.Tensor:
    """Divide a float32 tensor holding uint8 values (0..255) by 255 in place; returns it. For
    frames copied into a float32 buffer first (the loader's ring), so no second tensor exists."""
    return values.div_(255.0)
