"""Image features decoded as LeRobot decodes them: ``lerobot_shards.core.format.images`` opens and bounds the
stored picture; this turns it into the sample's tensor.

LeRobot 0.6.1's ``pil_to_chw_tensor``: 16-bit modes become float32 ``(1, H, W)`` in their stored
units (depth maps), everything else goes through torchvision's ``ToTensor`` (8-bit modes:
float32 in [0, 1]; ``"I"`` int32; ``"F"`` float32). ``image_tensor`` gives those values without
torchvision; with ``as_float=False`` 8-bit images stay uint8 (``frames / 255`` later gives
LeRobot's values bit for bit, as for video frames; LeRobot's trainer converts uint8 cameras so).
"""

from __future__ import annotations

import numpy as np
import torch

from lerobot_shards.core.format.images import UINT16_MODES, open_image
from lerobot_shards.reader.decode.unit_float import to_unit_float

# Modes whose values pass through as their own dtype (torchvision's ToTensor); the rest are uint8.
_NATIVE_MODES = {"I": np.int32, "F": np.float32}


def image_tensor(image, *, as_float: bool = True) -> torch.Tensor:
    """A decoded image as LeRobot returns it: channels first; 16-bit modes float32 ``(1, H, W)``
    in stored units; 8-bit modes float32 in [0, 1] (or uint8 with ``as_float=False``);
    ``"I"`` int32 and ``"F"`` float32 as stored (torchvision's ``ToTensor``)."""
    if image.mode in UINT16_MODES:
        return torch.from_numpy(np.array(image, dtype=np.float32))[None, ...]
    dtype = _NATIVE_MODES.get(image.mode, np.uint8)
    array = np.array(image, dtype=dtype, copy=True)
    if image.mode == "1":
        array = array * np.uint8(255)  # ToTensor: a bilevel image is 0 or 255 before / 255
    height, width = image.size[1], image.size[0]
    tensor = torch.from_numpy(array).view(height, width, len(image.getbands())).permute(2, 0, 1).contiguous()
    if tensor.dtype == torch.uint8 and as_float:
        return to_unit_float(tensor)  # ToTensor's img.to(float32).div(255): the video path's values
    return tensor


def decode_image(data: bytes, *, max_elements: int, where: str, as_float: bool = True) -> torch.Tensor:
    """``image_tensor(open_image(data))``: one stored picture as LeRobot's sample holds it.

    Raises:
        FormatError, DecodeError: as ``open_image``.
    """
    return image_tensor(open_image(data, max_elements=max_elements, where=where), as_float=as_float)


__all__ = ["decode_image", "image_tensor"]
