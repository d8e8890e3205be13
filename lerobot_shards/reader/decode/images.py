"""Image features decoded as LeRobot decodes them: ``lerobot_shards.core.format.images`` opens and
checks the stored picture; this turns it into the sample's tensor.

LeRobot 0.6.1's ``pil_to_chw_tensor``: 16-bit modes become float32 ``(1, H, W)`` in their stored
units (depth maps), everything else goes through torchvision's ``ToTensor`` (8-bit modes:
float32 in [0, 1]; ``"I"`` int32; ``"F"`` float32). ``image_tensor`` gives those values without
torchvision; with ``as_float=False`` 8-bit images stay uint8 (``frames / 255`` later gives
LeRobot's values bit for bit, as for video frames; LeRobot's trainer converts uint8 cameras so).

Memory: the output tensor is allocated once and filled strip by strip (each strip converted and
made channels-first on its way in), so reading a picture holds Pillow's decoded buffer, the
output and one strip; never the several full-size copies ``np.array`` + ``permute`` +
``to(float32)`` would make (a 4096x4096x4 picture: 0.8 GiB peak instead of 1.8).
"""

from __future__ import annotations

import numpy as np
import torch

from lerobot_shards.core.format.features import CameraGeometry
from lerobot_shards.core.format.images import UINT16_MODES, open_image
from lerobot_shards.reader.decode.unit_float import scale_to_unit_

# Modes whose values pass through as their own dtype (torchvision's ToTensor); the rest are uint8.
_NATIVE_MODES = {"I": torch.int32, "F": torch.float32}
# Bytes of one strip converted at a time (its copies are what the conversion adds to the peak).
_STRIP_BYTES = 8 << 20


def image_tensor(image, *, as_float: bool = True) -> torch.Tensor:
    """A decoded image as LeRobot returns it: channels first; 16-bit modes float32 ``(1, H, W)``
    in stored units; 8-bit modes float32 in [0, 1] (or uint8 with ``as_float=False``);
    ``"I"`` int32 and ``"F"`` float32 as stored (torchvision's ``ToTensor``)."""
    width, height = image.size
    bands = len(image.getbands())
    if image.mode in UINT16_MODES:
        dtype, unit = torch.float32, False
    elif image.mode in _NATIVE_MODES:
        dtype, unit = _NATIVE_MODES[image.mode], False
    else:
        dtype, unit = (torch.float32, True) if as_float else (torch.uint8, False)
    out = torch.empty((bands, height, width), dtype=dtype)
    rows = max(1, _STRIP_BYTES // max(1, width * bands * 4))
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        strip = np.asarray(image.crop((0, top, width, bottom)))
        if image.mode == "1":
            strip = strip.astype(np.uint8) * np.uint8(255)  # ToTensor: a bilevel image is 0 or 255 before / 255
        elif image.mode in UINT16_MODES:
            strip = strip.astype(np.float32)  # I;16 arrives as uint16 (torch has no uint16 copy)
        if not strip.flags.writeable or not strip.flags.c_contiguous:
            strip = np.array(strip)  # Pillow's buffer is read-only; torch wants its own (one strip)
        out[:, top:bottom].copy_(torch.from_numpy(strip).view(bottom - top, width, bands).permute(2, 0, 1))
    if unit:
        scale_to_unit_(out)  # ToTensor's img.to(float32).div(255): the video path's values, in place
    return out


def decode_image(data: bytes | None, *, camera: CameraGeometry, where: str, as_float: bool = True) -> torch.Tensor:
    """``image_tensor(open_image(data))``: one stored picture as LeRobot's sample holds it.

    Raises:
        FormatError, DecodeError: as ``open_image`` (a picture that is not the feature's shape).
    """
    return image_tensor(open_image(data, camera=camera, where=where), as_float=as_float)


__all__ = ["decode_image", "image_tensor"]
