"""Image features in the packed format: what the pictures LeRobot keeps in its data parquet may be,
and how big, checked before anything decodes them.

A LeRobot feature of dtype ``"image"`` is a column of ``{"bytes": <file bytes>, "path": <name>}``
structs (PNG for colour and 8-bit images, TIFF for 16-bit depth maps; converted datasets may
hold JPEG). Packs keep that column verbatim in the shard parquet. LeRobot 0.6.1 reads a cell
through ``datasets.Image``: ``PIL.Image.open``, ``load``, and ``exif_transpose`` when an EXIF
orientation is present; ``open_image`` does the same. Turning the picture into LeRobot's tensor
is ``lerobot_shards.reader.decode.images``.

The bytes are untrusted: only ``IMAGE_FORMATS`` are opened, and a picture's size and bands must
equal its feature's declared shape, checked from the header before anything is decoded (the
packer checks every picture's header when it packs; readers check again, and after decoding).
"""

from __future__ import annotations

import io
import warnings

from lerobot_shards.core.errors import DecodeError, FormatError
from lerobot_shards.core.format.features import CameraGeometry

# What LeRobot and the ``datasets`` library write (PNG, TIFF for 16-bit depth) and what
# converted datasets hold (JPEG, WebP). Every other Pillow plugin stays closed to data.
IMAGE_FORMATS = ("PNG", "TIFF", "JPEG", "WEBP")
# LeRobot's ``UINT16_PIL_MODES``: depth maps, returned as float32 in their own units.
UINT16_MODES = frozenset({"I;16", "I;16B", "I;16L"})
_EXIF_ORIENTATION = 0x0112


# EXIF orientations that turn the picture a quarter: ``exif_transpose`` swaps its sides.
_SIDE_SWAPPING_ORIENTATIONS = frozenset({5, 6, 7, 8})


def open_image(data: bytes | None, *, camera: CameraGeometry, where: str, load: bool = True):
    """A decoded ``PIL.Image`` of ``data``, as ``datasets.Image`` decodes it (EXIF orientation
    applied); with ``load=False`` only its header is read and checked (the packer's check).

    The picture must be exactly what its feature declares (``camera``): height, width and
    bands, so every sample of a feature has one shape and what decoding may allocate follows
    from the feature's shape (bounded by ``MAX_IMAGE_VALUES``), not from the picture's claim.

    Raises:
        FormatError: not one of ``IMAGE_FORMATS``, or a picture whose size or bands differ from
            the feature's shape (checked from its header, before decoding, and again after).
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
            f"its feature is {camera.describe()}"
        ) from None
    except Exception as err:
        raise FormatError(
            f"{where}: not an image Pillow opens as {'/'.join(IMAGE_FORMATS)} ({type(err).__name__}: {str(err)[:120]})"
        ) from None
    _check_size(image, camera, where, turned=_turns_sides(image))
    if not load:
        return image
    try:
        image.load()
        # Orientation as datasets.Image: only when the tag is there (exif_transpose copies).
        if image.getexif().get(_EXIF_ORIENTATION) is not None:
            image = ImageOps.exif_transpose(image)
    except Exception as err:
        raise DecodeError(f"{where}: cannot decode the {image.format} image ({type(err).__name__}: {str(err)[:120]})") from None
    _check_size(image, camera, where, turned=False)
    return image


def _turns_sides(image) -> bool:
    """Whether the picture's EXIF orientation (read from its header) swaps its sides when applied."""
    try:
        return image.getexif().get(_EXIF_ORIENTATION) in _SIDE_SWAPPING_ORIENTATIONS
    except Exception:  # a damaged EXIF block: the decode that follows reports it
        return False


def _check_size(image, camera: CameraGeometry, where: str, *, turned: bool) -> None:
    width, height = image.size
    if turned:
        width, height = height, width
    bands = len(image.getbands())
    if (height, width, bands) != (camera.height, camera.width, camera.channels):
        raise FormatError(
            f"{where}: a {image.format or 'decoded'} {image.mode} picture of {height}x{width}x{bands}; its feature's shape "
            f"is {camera.describe()} (height x width x channels), and every picture of a feature has that shape"
        )


def image_column_bytes(values) -> bytes | None:
    """The picture bytes of one cell of an image column: LeRobot's ``{"bytes", "path"}``
    struct (or bytes as they are); None when the cell holds no bytes (a path only)."""
    if isinstance(values, dict):
        values = values.get("bytes")
    return bytes(values) if isinstance(values, (bytes, bytearray, memoryview)) else None


__all__ = ["IMAGE_FORMATS", "UINT16_MODES", "image_column_bytes", "open_image"]
