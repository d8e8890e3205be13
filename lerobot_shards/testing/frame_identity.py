"""Frames that carry their own identity through lossy video compression.

The synthetic datasets draw ``(episode_index, frame_index)`` into every frame as a grid of
flat gray blocks (2 bits per block, four well-separated levels), so a test can decode any
frame, from any codec, and tell exactly which source frame it got. The rest of the image
is a smooth moving pattern so the video is not trivially compressible.
"""

from __future__ import annotations

import numpy as np

_LEVELS = np.array([16, 96, 176, 240], dtype=np.uint8)
_BITS_PER_BLOCK = 2
_EPISODE_BITS = 12
_FRAME_BITS = 12
_BLOCKS = (_EPISODE_BITS + _FRAME_BITS) // _BITS_PER_BLOCK  # 12 blocks
_GRID_COLS = 4
_GRID_ROWS = 3
MAX_EPISODE = (1 << _EPISODE_BITS) - 1
MAX_FRAME = (1 << _FRAME_BITS) - 1


def _block_size(height: int, width: int) -> int:
    # Large blocks survive chroma subsampling and crf-30 AV1; the grid must fit the frame.
    size = 16 if min(height, width) >= 128 else 8
    if height < _GRID_ROWS * size or width < _GRID_COLS * size:
        raise ValueError(
            f"frame {height}x{width} too small for the identity grid ({_GRID_ROWS * size}x{_GRID_COLS * size} needed)"
        )
    return size


def identity_frame(episode_index: int, frame_index: int, height: int, width: int, camera_seed: int = 0) -> np.ndarray:
    """Return an RGB uint8 frame (height, width, 3) encoding ``(episode_index, frame_index)``.

    Raises:
        ValueError: indices out of the encodable range or a frame too small for the grid.
    """
    if not 0 <= episode_index <= MAX_EPISODE or not 0 <= frame_index <= MAX_FRAME:
        raise ValueError(
            f"identity encodes episode in [0, {MAX_EPISODE}] and frame in [0, {MAX_FRAME}], "
            f"got episode={episode_index} frame={frame_index}"
        )
    size = _block_size(height, width)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    phase = 0.15 * frame_index + camera_seed
    image = np.empty((height, width, 3), dtype=np.uint8)
    for channel in range(3):
        wave = np.sin(xx / 9.0 + phase + channel) + np.cos(yy / 7.0 - phase * 0.5 + 2 * channel)
        image[..., channel] = (128 + 50 * wave).astype(np.uint8)
    value = (episode_index << _FRAME_BITS) | frame_index
    for block in range(_BLOCKS):
        symbol = (value >> (_BITS_PER_BLOCK * block)) & 0b11
        row, col = divmod(block, _GRID_COLS)
        image[row * size : (row + 1) * size, col * size : (col + 1) * size, :] = _LEVELS[symbol]
    return image


def read_identity(frame: np.ndarray) -> tuple[int, int]:
    """Return ``(episode_index, frame_index)`` drawn into a decoded frame.

    Accepts uint8 or float in [0, 1], HWC or CHW (numpy or anything ``np.asarray`` takes).
    """
    array = np.asarray(frame)
    if array.ndim != 3:
        raise ValueError(f"expected one frame with 3 dims (HWC or CHW), got shape {array.shape}")
    if array.shape[0] in (1, 3) and array.shape[-1] not in (1, 3):
        array = np.moveaxis(array, 0, -1)
    if array.dtype != np.uint8:
        array = np.round(array.astype(np.float64) * 255.0)
    gray = array.astype(np.float64).mean(axis=-1)
    height, width = gray.shape
    size = _block_size(height, width)
    margin = size // 4  # read block centres: edges blur under chroma subsampling
    value = 0
    for block in range(_BLOCKS):
        row, col = divmod(block, _GRID_COLS)
        patch = gray[row * size + margin : (row + 1) * size - margin, col * size + margin : (col + 1) * size - margin]
        symbol = int(np.argmin(np.abs(_LEVELS.astype(np.float64) - patch.mean())))
        value |= symbol << (_BITS_PER_BLOCK * block)
    return value >> _FRAME_BITS, value & MAX_FRAME
