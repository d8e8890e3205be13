"""Synthetic data for tests, the demo and benchmarks: a faithful LeRobot v3 writer (and its v2.1
layout, ``v21``) whose frames carry their identity (so a test can tell which frame a sample holds), tiny encoded members, and
tiny tabular packs. Not needed to pack or read real data; ``lerobot-shards make-sample`` uses it.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.testing.dataset": [
        "write_sample_dataset",
        "SampleSpec",
        "CameraSpec",
        "rollover_spec",
        "depth_map_mm",
        "quantize_depth_mm",
    ],
    "lerobot_shards.testing.frame_identity": ["identity_frame", "read_identity"],
    "lerobot_shards.testing.tabular_pack": ["write_tabular_pack"],
    "lerobot_shards.testing.video": ["tiny_member", "encode_episode_video", "concatenate_by_stream_copy"],
    "lerobot_shards.testing.v21": ["write_sample_dataset_v21", "to_v21"],
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
