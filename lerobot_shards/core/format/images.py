"""Image features in the packed format: what the pictures LeRobot keeps in its data parquet may be,
and how big, checked before anything decodes them.

A LeRobot feature of dtype ``"image"`` is a column of ``{"bytes": <file bytes>, "path": <name>}``
structs (PNG for colour and 8-bit images, TIFF for 16-bit depth maps; converted datasets may
hold JPEG). Packs keep that column verbatim in the shard parquet. LeRobot 0.6.1 reads a cell
through ``datasets.Image``: ``PIL.Image.open``, ``load``, and ``exif_transpose`` when an EXIF
orientation is present; ``open_image`` does the same. Turning the picture into LeRobot's tensor
is ``lerobot_shards.reader.decode.images``.

The bytes are untrusted: only ``IMAGE_FORMATS`` are opened, and a picture's size and bands are
checked against its feature's declared shape from the header, before anything is decoded
(the packer checks every picture's header when it packs; readers check again).
"""

from __future__ import annotations

import io
import math
import warnings
from collections.abc import Sequence

from lerobot_shards.core.errors import DecodeError, FormatError
from lerobot_shards.core.format.limits import MAX_FRAME_PIXELS

# What LeRobot and the ``datasets`` library write (PNG, TIFF for 16-bit depth) and what
# converted datasets hold (JPEG, WebP). Every other Pillow plugin stays closed to data.
IMAGE_FORMATS = ("PNG", "TIFF", "JPEG", "WEBP")
# LeRobot's ``UINT16_PIL_MODES``: depth maps, returned as float32 in their own units.
UINT16_MODES = frozenset({"I;16", "I;16B", "I;16L"})
_EXIF_ORIENTATION = 0x0112


def image_elements(shape: Sequence[int]) -> int:
    """The values one image of a feature may decode to: its declared shape's product (the shape
    is (H, W, C) or (C, H, W); either way height x width x bands fits it)."""
    return math.prod(int(d) for d in shape)


def open_image(data: bytes, *, max_elements: int, where: str, load: bool = True):
    """A decoded ``PIL.Image`` of ``data``, as ``datasets.Image`` decodes it (EXIF orientation
    applied); with ``load=False`` only its header is read and checked (the packer's check).

    Raises:
        FormatError: not one of ``IMAGE_FORMATS``, or a picture whose size and bands hold more
            values than ``max_elements`` (checked from its header, before decoding).
        DecodeError: the picture's data does not decode.
    """
    from PIL import Image, ImageOps

    if not isinstance(data, (bytes, bytearray, memoryview)) or not data:
        raise FormatError(f"{where}: no image bytes (found {type(data).__name__})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise FormatError(
            f"{where}: a picture whose header claims more pixels than Pillow decodes ({str(err)[:120]}); "
            f"its feature's shape allows {max_elements:,} values"
        ) from None
    except Exception as err:
        raise FormatError(
            f"{where}: not an image Pillow opens as {'/'.join(IMAGE_FORMATS)} ({type(err).__name__}: {str(err)[:120]})"
        ) from None
    width, height = image.size
    bands = len(image.getbands())
    if width * height > MAX_FRAME_PIXELS or width * height * bands > max_elements:
        raise FormatError(
            f"{where}: a {image.format} image of {height}x{width}x{bands} values; its feature's shape allows "
            f"{max_elements:,} values"
        )
    if not load:
        return image
    try:
        image.load()
        # Orientation as datasets.Image: only when the tag is there (exif_transpose copies).
        if image.getexif().get(_EXIF_ORIENTATION) is not None:
            image = ImageOps.exif_transpose(image)
    except Exception as err:
        raise DecodeError(f"{where}: cannot decode the {image.format} image ({type(err).__name__}: {str(err)[:120]})") from None
    return image


def image_column_bytes(values) -> bytes | None:
    """The picture bytes of one cell of an image column: LeRobot's ``{"bytes", "path"}``
    struct (or bytes as they are); None when the cell holds no bytes (a path only)."""
    if isinstance(values, dict):
        values = values.get("bytes")
    return bytes(values) if isinstance(values, (bytes, bytearray, memoryview)) else None


__all__ = ["IMAGE_FORMATS", "UINT16_MODES", "image_column_bytes", "image_elements", "open_image"]
