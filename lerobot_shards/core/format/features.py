"""What kind of data a LeRobot feature holds, by LeRobot 0.6.1's own rules, in one place.

Both halves ask the same questions of a feature mapping (``info.json``'s, or a manifest's):
which keys are cameras stored as video, which as pictures in the data parquet (``"image"``),
which of either are depth maps and how they are quantized, which are LeRobot's language
columns. The packer uses the answers to choose how to carry each feature; readers to decode
it as ``LeRobotDataset`` does. Pure: no I/O, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.layout import video_keys_of

# LeRobot 0.6.1's language columns (lerobot/datasets/language.py): list<struct> per row, written
# by its annotation pipeline and returned by LeRobotDataset as lists of dicts.
LANGUAGE_PERSISTENT = "language_persistent"
LANGUAGE_EVENTS = "language_events"
LANGUAGE_COLUMNS = (LANGUAGE_PERSISTENT, LANGUAGE_EVENTS)
# The fields of one language row, in LeRobot's feature order (events carry no timestamp).
LANGUAGE_FIELDS = {
    LANGUAGE_PERSISTENT: ("role", "content", "style", "timestamp", "camera", "tool_calls"),
    LANGUAGE_EVENTS: ("role", "content", "style", "camera", "tool_calls"),
}

# Units a depth map is returned in (LeRobot's ``depth_output_unit``) and recorded in.
DEPTH_UNITS = ("mm", "m")
MM_PER_METRE = 1000.0
# LeRobot 0.6.1's depth quantizer defaults (lerobot/configs/video.py): 12-bit codes.
DEPTH_QMAX = 4095
_DEPTH_DEFAULTS = {"depth_min": 0.01, "depth_max": 10.0, "shift": 3.5, "use_log": True}


def image_keys_of(features: Mapping[str, Any]) -> list[str]:
    """Cameras stored as pictures in the data parquet (``dtype == "image"``), in order."""
    return [k for k, f in features.items() if isinstance(f, Mapping) and f.get("dtype") == "image"]


def camera_keys_of(features: Mapping[str, Any]) -> list[str]:
    """Every camera, video or image, in order (LeRobot's ``camera_keys``)."""
    return [k for k, f in features.items() if isinstance(f, Mapping) and f.get("dtype") in ("video", "image")]


def is_depth_feature(feature: Mapping[str, Any]) -> bool:
    """LeRobot's rule: ``is_depth_map`` (or the legacy ``video.is_depth_map``) in the feature's
    ``info``, or ``video.is_depth_map`` in its ``video_info``."""
    info = feature.get("info") if isinstance(feature.get("info"), Mapping) else {}
    video_info = feature.get("video_info") if isinstance(feature.get("video_info"), Mapping) else {}
    return bool(info.get("is_depth_map") or info.get("video.is_depth_map") or video_info.get("video.is_depth_map"))


def depth_keys_of(features: Mapping[str, Any]) -> list[str]:
    """Cameras (video or image) that hold depth maps, in order."""
    return [k for k in camera_keys_of(features) if is_depth_feature(features[k])]


def language_keys_of(features: Mapping[str, Any]) -> list[str]:
    """LeRobot's language columns the features declare, in order."""
    return [k for k in features if k in LANGUAGE_COLUMNS]


@dataclass(frozen=True)
class DepthQuantization:
    """How a depth video's 12-bit codes map back to depth (LeRobot's ``DepthEncoderConfig``).

    Attributes:
        depth_min, depth_max: metres at code 0 and at ``DEPTH_QMAX``.
        shift: metres added before the logarithm (log mode).
        use_log: logarithmic (True) or linear quantization.
        unit: the unit the dataset recorded its depth in (``info.depth_unit``), or None.
    """

    depth_min: float = _DEPTH_DEFAULTS["depth_min"]
    depth_max: float = _DEPTH_DEFAULTS["depth_max"]
    shift: float = _DEPTH_DEFAULTS["shift"]
    use_log: bool = _DEPTH_DEFAULTS["use_log"]
    unit: str | None = None

    @classmethod
    def of_feature(cls, feature: Mapping[str, Any], *, where: str) -> DepthQuantization:
        """Read ``video.depth_min`` / ``video.depth_max`` / ``video.shift`` / ``video.use_log`` and
        ``depth_unit`` from the feature's ``info`` as LeRobot does (a missing or null value means
        LeRobot's default).

        Raises:
            FormatError: a value that is not a finite number (or a bool for ``use_log``), a range
                that is empty, a log shift that leaves ``depth_min + shift <= 0``, or an unknown
                unit (names the field).
        """
        info = feature.get("info") if isinstance(feature.get("info"), Mapping) else {}
        values: dict[str, Any] = {}
        for name, default in _DEPTH_DEFAULTS.items():
            value = info.get(f"video.{name}")
            if value is None:
                value = default
            if name == "use_log":
                if not isinstance(value, bool):
                    raise FormatError(f"{where}: info video.use_log must be true or false, found {str(value)[:40]!r}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise FormatError(f"{where}: info video.{name} must be a finite number, found {str(value)[:40]!r}")
            values[name] = value if name == "use_log" else float(value)
        if not values["depth_min"] < values["depth_max"]:
            raise FormatError(f"{where}: depth range [{values['depth_min']}, {values['depth_max']}] is empty")
        if values["use_log"] and values["depth_min"] + values["shift"] <= 0:
            raise FormatError(f"{where}: depth_min + shift must be positive for logarithmic quantization")
        unit = info.get("depth_unit")
        if unit is not None and unit not in DEPTH_UNITS:
            raise FormatError(f"{where}: info depth_unit must be one of {list(DEPTH_UNITS)}, found {str(unit)[:40]!r}")
        return cls(**values, unit=unit)


def check_depth_features(features: Mapping[str, Any], *, where: str) -> dict[str, DepthQuantization]:
    """Every depth camera's quantization (``DepthQuantization.of_feature``), checked.

    Raises:
        FormatError: as ``DepthQuantization.of_feature``; a depth camera that is not one channel.
    """
    found = {}
    for key in depth_keys_of(features):
        shape = features[key].get("shape")
        if isinstance(shape, (list, tuple)) and len(shape) == 3 and 1 not in (shape[0], shape[2]):
            raise FormatError(f"{where}: depth camera {key!r} has shape {list(shape)}; a depth map has one channel")
        found[key] = DepthQuantization.of_feature(features[key], where=f"{where}: feature {key!r}")
    return found


__all__ = [
    "DEPTH_QMAX",
    "DEPTH_UNITS",
    "LANGUAGE_COLUMNS",
    "LANGUAGE_EVENTS",
    "LANGUAGE_FIELDS",
    "LANGUAGE_PERSISTENT",
    "MM_PER_METRE",
    "DepthQuantization",
    "camera_keys_of",
    "check_depth_features",
    "depth_keys_of",
    "image_keys_of",
    "is_depth_feature",
    "language_keys_of",
    "video_keys_of",
]
