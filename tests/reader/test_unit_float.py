"""The one uint8-to-float conversion (issue 43) gives LeRobot's values for every pixel value."""

import torch

from lerobot_shards.reader.decode import scale_to_unit_, to_unit_float


def test_every_pixel_value_converts_as_lerobot_converts_it():
    pixels = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 16, 16)
    lerobot = (pixels / 255.0).type(torch.float32)  # LeRobot's decode_video_frames
    ours = to_unit_float(pixels)
    assert ours.dtype == torch.float32 and torch.equal(ours, lerobot)
    assert ours.min() == 0 and ours.max() == 1
    ring = torch.empty(pixels.shape, dtype=torch.float32)
    ring.copy_(pixels)
    assert scale_to_unit_(ring) is ring and torch.equal(ring, lerobot)
    assert pixels.dtype == torch.uint8  # the input is left as it is
