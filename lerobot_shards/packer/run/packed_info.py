"""What a pack says of its features, and its ``meta/info.json`` (the LeRobot view of the pack).

A re-encode changes what a camera holds (codec, pixel format, ``--resize``'s size); the
manifest's features and the pack's ``meta/info.json`` both say what the pack holds, so a
LeRobot reading the pack's ``meta/`` (``LeRobotDatasetMetadata``, through its reader registry)
builds a policy for the frames it will get.
"""

from __future__ import annotations

from typing import Any

from lerobot_shards.core.format.features import Features
from lerobot_shards.core.format.lerobot_info import is_lerobot_view, lerobot_view
from lerobot_shards.packer.options import PackOptions
from lerobot_shards.packer.shard import reencode_pixel_format


def packed_features(features: Features, raw: dict[str, Any], options: PackOptions) -> dict:
    """The source's ``features`` as the pack holds them: re-encoded cameras say their new
    codec, pixel format and size (JSON, parsed again with the manifest). An ``info.json``
    (``raw``) that is already a pack's own (``is_lerobot_view``) says so already: its features
    are returned as they are."""
    out = features.to_json()
    if options.video == "copy" or is_lerobot_view(raw):
        return out
    for key in features.video_keys:
        spec, feature = features[key], out[key]
        if spec.is_depth or spec.camera is None:
            continue  # depth is cut as in copy mode (re-encoded losslessly where it cannot be)
        feature_info = spec.info
        height, width = spec.camera.size
        resize = options.resize_for(key)
        if resize:
            height, width = resize
            shape = [spec.camera.channels, height, width] if spec.camera.channels_first else [height, width, spec.camera.channels]
            feature["shape"] = shape
            feature_info["video.height"], feature_info["video.width"] = height, width
        feature_info["video.codec"] = options.video
        feature_info["video.pix_fmt"] = reencode_pixel_format(spec.pix_fmt, height, width)
        feature_info["video.g"] = options.gop
        feature_info["video.crf"] = options.crf
        feature_info["video.preset"] = options.preset
        feature["info"] = feature_info
    return out


def packed_info(info: dict[str, Any], features: Features, options: PackOptions) -> bytes:
    """The pack's ``meta/info.json``: the LeRobot v3 ``info`` a source gives
    (``Source.lerobot_info``), with its ``features`` as packed and the ``storage_format``
    LeRobot's reader registry routes to this project's reader."""
    return lerobot_view(info, packed_features(features, info, options))


__all__ = ["packed_features", "packed_info"]
