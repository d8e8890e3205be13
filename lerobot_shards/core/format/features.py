"""What a dataset says about its features, parsed once into typed values: the one boundary.

A LeRobot ``features`` mapping (``meta/info.json``'s, a manifest's, a mixture entry's) is
written by whoever made the dataset, so it is untrusted. ``parse_features`` turns it into a
``Features`` (an ordered mapping of ``FeatureSpec``): every field typed, every number bounded
by what the decoder and torch can hold, and the fields cross-checked against each other (a
camera's shape against its picture size and channel count, a depth map against its pixel
format and its quantizer's float32 range, a language column against LeRobot's names). The
rest of the code reads ``FeatureSpec`` attributes, never the JSON; the JSON is kept only to
be written back verbatim (``to_json``), so digests over it are unchanged.

It also holds LeRobot 0.6.1's rules for what kind of data a feature holds: which keys are
cameras stored as video, which as pictures in the data parquet (``"image"``), which of either
are depth maps and how they are quantized, which are LeRobot's language columns, and what arrow
type those columns must have. Pure: no I/O, no torch.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.fields import is_int
from lerobot_shards.core.format.layout import check_feature_key
from lerobot_shards.core.format.limits import (
    MAX_FEATURE_DIMS,
    MAX_FEATURE_ELEMENTS,
    MAX_FRAME_PIXELS,
    MAX_FRAME_SIDE,
    MAX_IMAGE_VALUES,
    MAX_KEY_LENGTH,
)

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
_FLOAT32_MAX = float(np.finfo(np.float32).max)

# Channels a camera can have: grey (depth), grey + alpha, colour, colour + alpha.
CAMERA_CHANNELS = (1, 2, 3, 4)
# A video feature's frames come out of the decoder as colour (3) or, for depth, one plane; 4 is
# what some writers declare for an alpha camera (decoded as colour).
VIDEO_CHANNELS = (1, 3, 4)
# Pixel formats a depth video is stored in: LeRobot writes gray12le (12-bit codes); grey of
# another depth is still one plane of codes.
DEPTH_PIXEL_FORMATS = frozenset({"gray", "gray10le", "gray12le", "gray14le", "gray16le", "gray10be", "gray12be", "gray16be"})
_MAX_NAME_ITEMS = MAX_FEATURE_ELEMENTS
_MAX_TEXT = 1024  # a dtype, codec or pixel format name

FeatureKind = Literal["video", "image", "language", "value"]


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
    def of_info(cls, info: Mapping[str, Any], *, where: str) -> DepthQuantization:
        """Read ``video.depth_min`` / ``video.depth_max`` / ``video.shift`` / ``video.use_log`` and
        ``depth_unit`` from a feature's ``info`` as LeRobot does (a missing or null value means
        LeRobot's default), bounded by what dequantization in float32 can hold.

        Raises:
            FormatError: a value that is not a finite number (or a bool for ``use_log``), one past
                float32, a range that is empty in float32, a log shift that leaves
                ``depth_min + shift <= 0``, a quantizer whose dequantization overflows float32
                or maps every code to one depth, or an unknown unit (names the field).
        """
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
            elif abs(value) > _FLOAT32_MAX:
                raise FormatError(
                    f"{where}: info video.{name} {value!r} does not fit a float32 (at most {_FLOAT32_MAX:.4g}); "
                    "LeRobot dequantizes depth in float32"
                )
            values[name] = value if name == "use_log" else float(value)
        if not values["depth_min"] < values["depth_max"]:
            raise FormatError(f"{where}: depth range [{values['depth_min']}, {values['depth_max']}] is empty")
        if values["use_log"] and values["depth_min"] + values["shift"] <= 0:
            raise FormatError(f"{where}: depth_min + shift must be positive for logarithmic quantization")
        _check_dequantization_range(values, where)
        unit = info.get("depth_unit")
        if unit is not None and unit not in DEPTH_UNITS:
            raise FormatError(f"{where}: info depth_unit must be one of {list(DEPTH_UNITS)}, found {str(unit)[:40]!r}")
        return cls(**values, unit=unit)


def _check_dequantization_range(values: Mapping[str, Any], where: str) -> None:
    """Follow LeRobot's float32 dequantization at codes 0 and ``DEPTH_QMAX`` (every step rises
    with the code, so the two ends bound every value in between): each step finite, and code 0
    below the last code, so the quantizer tells depths apart.

    Raises:
        FormatError: a step overflows float32, or every code maps to one depth.
    """
    depth_min, depth_max, shift = values["depth_min"], values["depth_max"], values["shift"]
    if values["use_log"]:
        low, high = math.log(depth_min + shift), math.log(depth_max + shift)
    else:
        low, high = depth_min, depth_max
    scale, offset = (high - low) / DEPTH_QMAX, low
    problem = None
    if not (math.isfinite(scale) and abs(scale) <= _FLOAT32_MAX and abs(offset) <= _FLOAT32_MAX):
        problem = "its code-to-depth scale overflows float32"
    else:
        with np.errstate(all="ignore"):
            steps = [np.array([0, DEPTH_QMAX], dtype=np.float32) * np.float32(scale) + np.float32(offset)]
            if values["use_log"]:
                steps.append(np.exp(steps[-1]))
                steps.append(steps[-1] - np.float32(shift))
        ends = steps[-1]
        if not all(np.isfinite(step).all() for step in steps):
            problem = "dequantizing its codes overflows float32"
        elif not (np.float32(depth_min) < np.float32(depth_max) and ends[0] < ends[1]):
            problem = "every code dequantizes to the same float32 depth"
    if problem:
        raise FormatError(
            f"{where}: depth quantizer [{depth_min:.6g}, {depth_max:.6g}] m (shift {shift:.6g}, "
            f"{'log' if values['use_log'] else 'linear'}): {problem}; LeRobot's dequantization cannot read it"
        )


@dataclass(frozen=True)
class CameraGeometry:
    """A camera's declared picture: ``height`` x ``width`` x ``channels``; ``channels_first``
    when the shape is declared (C, H, W) (converted datasets), else (H, W, C) (LeRobot's)."""

    height: int
    width: int
    channels: int
    channels_first: bool = False

    @property
    def values(self) -> int:
        """Values of one decoded picture (height x width x channels)."""
        return self.height * self.width * self.channels

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)``."""
        return self.height, self.width

    def describe(self) -> str:
        return f"{self.height}x{self.width}x{self.channels}"


@dataclass(frozen=True)
class FeatureSpec:
    """One feature, parsed and checked (``parse_feature``).

    Attributes:
        key: the feature's key (a LeRobot key: ``check_feature_key``).
        dtype: LeRobot's dtype string (``float32``, ``video``, ``image``, ``language``, ...).
        shape: the declared shape; ``None`` for a variable-length dimension (a column the
            packer described from the parquet, ``schema_drift``).
        kind: ``video`` (a camera stored as mp4), ``image`` (pictures in the data parquet),
            ``language`` (LeRobot's language columns) or ``value`` (everything else).
        camera: a camera's geometry (video and image features), else None.
        depth: a depth camera's quantization (``is_depth_map``), else None.
        codec, pix_fmt, video_channels: what a video feature's ``info`` declares
            (``video.codec``, ``video.pix_fmt``, ``video.channels``), None when it does not.
        names: per-dimension names when the dataset gives a flat list (or LeRobot's one-entry
            ``{"motors": [...]}``), else None.
    """

    key: str
    dtype: str
    shape: tuple[int | None, ...]
    kind: FeatureKind
    camera: CameraGeometry | None = None
    depth: DepthQuantization | None = None
    codec: str | None = None
    pix_fmt: str | None = None
    video_channels: int | None = None
    names: tuple[str, ...] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_video(self) -> bool:
        return self.kind == "video"

    @property
    def is_image(self) -> bool:
        return self.kind == "image"

    @property
    def is_camera(self) -> bool:
        return self.camera is not None

    @property
    def is_depth(self) -> bool:
        return self.depth is not None

    @property
    def elements(self) -> int:
        """Values per frame of a value feature: its shape's product (a variable dimension counts 1)."""
        return math.prod(d if d is not None else 1 for d in self.shape)

    @property
    def info(self) -> dict[str, Any]:
        """A copy of the feature's ``info`` object as the dataset wrote it (to show or write, not to decide)."""
        info = self.raw.get("info")
        return dict(copy.deepcopy(info)) if isinstance(info, Mapping) else {}

    def to_json(self) -> dict[str, Any]:
        """The feature as the dataset wrote it (a deep copy): what packs and LeRobot metadata record."""
        return copy.deepcopy(self.raw)

    def get(self, name: str, default: Any = None) -> Any:
        raise TypeError(
            f"feature {self.key!r} is a parsed FeatureSpec: read its attributes (dtype, shape, camera, depth, ...), "
            f"not the JSON field {name!r}"
        )

    __getitem__ = get


class Features(Mapping[str, FeatureSpec]):
    """A dataset's features in declared order, parsed (``parse_features``), with LeRobot's key lists."""

    def __init__(self, specs: Mapping[str, FeatureSpec] | None = None):
        self._specs: dict[str, FeatureSpec] = dict(specs or {})

    def __getitem__(self, key: str) -> FeatureSpec:
        return self._specs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"Features({list(self._specs)})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Features):
            return self.to_json() == other.to_json()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):  # pickles as its JSON and parses again: the parse is the boundary
        return (_features_from_json, (self.to_json(),))

    @property
    def video_keys(self) -> list[str]:
        """Cameras stored as video, in order (LeRobot's ``video_keys``)."""
        return [k for k, f in self._specs.items() if f.kind == "video"]

    @property
    def image_keys(self) -> list[str]:
        """Cameras stored as pictures in the data parquet (``dtype == "image"``), in order."""
        return [k for k, f in self._specs.items() if f.kind == "image"]

    @property
    def camera_keys(self) -> list[str]:
        """Every camera, video or image, in order (LeRobot's ``camera_keys``)."""
        return [k for k, f in self._specs.items() if f.camera is not None]

    @property
    def depth_keys(self) -> list[str]:
        """Cameras (video or image) that hold depth maps, in order."""
        return [k for k, f in self._specs.items() if f.depth is not None]

    @property
    def depth(self) -> dict[str, DepthQuantization]:
        """Every depth camera's quantization."""
        return {k: f.depth for k, f in self._specs.items() if f.depth is not None}

    @property
    def language_keys(self) -> list[str]:
        """LeRobot's language columns the features declare, in order."""
        return [k for k, f in self._specs.items() if f.kind == "language"]

    @property
    def value_keys(self) -> list[str]:
        """Features that are neither cameras nor language, in order."""
        return [k for k, f in self._specs.items() if f.kind == "value"]

    def to_json(self) -> dict[str, dict[str, Any]]:
        """The mapping as the dataset wrote it (deep copies), in order."""
        return {k: f.to_json() for k, f in self._specs.items()}


def _features_from_json(raw: dict[str, Any]) -> Features:
    return parse_features(raw, where="features")


def parse_features(raw: Any, *, where: str) -> Features:
    """Parse a LeRobot ``features`` object (``parse_feature`` for each entry).

    Raises:
        FormatError: not an object, or a feature that ``parse_feature`` refuses.
    """
    if not isinstance(raw, Mapping):
        raise FormatError(f"{where}: features must be an object, found {type(raw).__name__}")
    return Features({key: parse_feature(key, value, where=where) for key, value in raw.items()})


def parse_feature(key: Any, raw: Any, *, where: str) -> FeatureSpec:
    """One feature of a ``features`` object, typed and cross-checked.

    Checked: the key (``check_feature_key``); ``dtype`` a string; ``shape`` a list of 1 to
    ``MAX_FEATURE_DIMS`` integers. Cameras (``video``, ``image``): a three-dimensional shape
    whose channel count is one a camera has and whose frame fits ``MAX_FRAME_SIDE`` /
    ``MAX_FRAME_PIXELS`` (pictures also ``MAX_IMAGE_VALUES``); a video's declared
    ``video.channels`` and ``video.pix_fmt`` agree with a depth declaration; a depth camera
    has one channel and a quantizer dequantization can hold (``DepthQuantization.of_info``).
    Values: at most ``MAX_FEATURE_ELEMENTS`` per frame. ``language``: only LeRobot's columns.

    Raises:
        FormatError: names ``where``, the key, the field, what was found and what is allowed.
    """
    key = check_feature_key(key, where=f"{where}: features")
    label = f"{where}: feature {key!r}"
    if not isinstance(raw, Mapping):
        raise FormatError(f"{label} must be an object, found {type(raw).__name__}")
    dtype = raw.get("dtype")
    if not isinstance(dtype, str) or not dtype or len(dtype) > _MAX_TEXT:
        raise FormatError(f"{label}: dtype must be a non-empty string, found {str(dtype)[:40]!r}")
    info = raw.get("info")
    if info is not None and not isinstance(info, Mapping):
        raise FormatError(f"{label}: info must be an object, found {type(info).__name__}")
    info = info or {}
    video_info = raw.get("video_info")
    video_info = video_info if isinstance(video_info, Mapping) else {}
    # LeRobot's rule: is_depth_map (or the legacy video.is_depth_map) in info, or in video_info.
    marks = {"is_depth_map": info.get("is_depth_map"), "video.is_depth_map": info.get("video.is_depth_map")}
    marks["video_info video.is_depth_map"] = video_info.get("video.is_depth_map")
    for name, mark in marks.items():
        if mark is not None and not isinstance(mark, bool):
            raise FormatError(f"{label}: {name} must be true or false, found {str(mark)[:40]!r}")
    depth_marked = any(marks.values())
    names = _names(raw.get("names"))
    if dtype in ("video", "image"):
        return _camera(key, raw, dtype, info, depth_marked, names, label)
    shape = _shape(raw.get("shape"), label, allow_unknown=True)
    if depth_marked:
        raise FormatError(f"{label}: is_depth_map on a {dtype!r} feature; only video and image cameras hold depth maps")
    if key in LANGUAGE_COLUMNS or dtype == "language":
        if key not in LANGUAGE_COLUMNS:
            raise FormatError(f"{label}: dtype 'language' is LeRobot's for its columns {list(LANGUAGE_COLUMNS)} only")
        if dtype != "language":  # LeRobot builds the column's type from the dtype: another one fails its load
            raise FormatError(f"{label}: LeRobot's language column {key} has dtype 'language', found {str(dtype)[:40]!r}")
        return FeatureSpec(key, dtype, shape, "language", names=names, raw=copy.deepcopy(dict(raw)))
    elements = math.prod(d if d is not None else 1 for d in shape)
    if elements > MAX_FEATURE_ELEMENTS:
        raise FormatError(
            f"{label}: shape {list(shape)} holds {elements} values per frame; at most {MAX_FEATURE_ELEMENTS} are allowed"
        )
    return FeatureSpec(key, dtype, shape, "value", names=names, raw=copy.deepcopy(dict(raw)))


def _shape(shape: Any, label: str, *, allow_unknown: bool) -> tuple[int | None, ...]:
    ok = (
        isinstance(shape, (list, tuple))
        and 0 < len(shape) <= MAX_FEATURE_DIMS
        and all((is_int(d) and 0 <= d <= MAX_FEATURE_ELEMENTS) or (allow_unknown and d is None) for d in shape)
    )
    if not ok:
        raise FormatError(
            f"{label}: shape must be a list of 1 to {MAX_FEATURE_DIMS} integers in [0, {MAX_FEATURE_ELEMENTS}], "
            f"found {str(shape)[:80]}"
        )
    return tuple(shape)


def _camera(
    key: str, raw: Mapping[str, Any], dtype: str, info: Mapping[str, Any], depth_marked: bool, names: Any, label: str
) -> FeatureSpec:
    shape = _shape(raw.get("shape"), label, allow_unknown=False)
    camera = _geometry(shape, raw.get("names"), label)
    if not (1 <= camera.height <= MAX_FRAME_SIDE and 1 <= camera.width <= MAX_FRAME_SIDE) or (
        camera.height * camera.width > MAX_FRAME_PIXELS
    ):
        raise FormatError(
            f"{label}: a {camera.height}x{camera.width} frame is outside this format's limits "
            f"(sides 1 to {MAX_FRAME_SIDE}, at most {MAX_FRAME_PIXELS:,} pixels)"
        )
    codec = pix_fmt = video_channels = None
    if dtype == "video":
        if camera.channels not in VIDEO_CHANNELS:
            raise FormatError(f"{label}: a video camera has 1, 3 or 4 channels, its shape {list(shape)} says {camera.channels}")
        codec = _text(info, "video.codec", label)
        pix_fmt = _text(info, "video.pix_fmt", label)
        video_channels = info.get("video.channels")
        if video_channels is not None and not (is_int(video_channels) and 1 <= video_channels <= 4):
            raise FormatError(f"{label}: info video.channels must be 1 to 4, found {str(video_channels)[:40]!r}")
    elif camera.values > MAX_IMAGE_VALUES:
        raise FormatError(
            f"{label}: pictures of {camera.describe()} = {camera.values:,} values; at most {MAX_IMAGE_VALUES:,} "
            "are allowed (a 4096x4096 colour picture with alpha)"
        )
    depth = None
    if depth_marked:
        if camera.channels != 1:
            raise FormatError(f"{label}: a depth camera has one channel, its shape {list(shape)} says {camera.channels}")
        if dtype == "video":
            if pix_fmt is not None and pix_fmt not in DEPTH_PIXEL_FORMATS:
                raise FormatError(
                    f"{label}: is_depth_map, but its info says video.pix_fmt {pix_fmt!r}, a colour format; a depth "
                    f"video holds one plane of codes ({', '.join(sorted(DEPTH_PIXEL_FORMATS))})"
                )
            if video_channels is not None and video_channels != 1:
                raise FormatError(f"{label}: is_depth_map, but its info says video.channels {video_channels}; a depth map has 1")
        depth = DepthQuantization.of_info(info, where=label)
    return FeatureSpec(
        key,
        dtype,
        shape,
        "video" if dtype == "video" else "image",
        camera=camera,
        depth=depth,
        codec=codec,
        pix_fmt=pix_fmt,
        video_channels=video_channels,
        names=names,
        raw=copy.deepcopy(dict(raw)),
    )


def _geometry(shape: tuple, names: Any, label: str) -> CameraGeometry:
    """(H, W, C) as LeRobot declares cameras, or (C, H, W) when the names say so or only the
    first dimension is a channel count (converted datasets)."""
    if len(shape) != 3:
        raise FormatError(f"{label}: a camera's shape is [height, width, channels], found {list(shape)}")
    first = isinstance(names, (list, tuple)) and len(names) == 3 and isinstance(names[0], str) and "channel" in names[0]
    if not first and shape[2] not in CAMERA_CHANNELS and shape[0] in CAMERA_CHANNELS:
        first = True
    if first:
        channels, height, width = shape
    else:
        height, width, channels = shape
    if channels not in CAMERA_CHANNELS:
        raise FormatError(
            f"{label}: shape {list(shape)} has {channels} channels; a camera has {', '.join(map(str, CAMERA_CHANNELS))}"
        )
    return CameraGeometry(int(height), int(width), int(channels), first)


def _text(info: Mapping[str, Any], name: str, label: str) -> str | None:
    value = info.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise FormatError(f"{label}: info {name} must be a string, found {str(value)[:40]!r}")
    return value


def _names(names: Any) -> tuple[str, ...] | None:
    """A feature's per-dimension names when they are a flat list of strings (or LeRobot's
    one-entry ``{"motors": [...]}``); anything else is kept in the JSON but names nothing."""
    if isinstance(names, Mapping):
        names = next(iter(names.values()), None) if len(names) == 1 else None
    if isinstance(names, (list, tuple)) and len(names) <= _MAX_NAME_ITEMS and all(isinstance(n, str) for n in names):
        return tuple(n[:MAX_KEY_LENGTH] for n in names)
    return None


def is_depth_pixel_format(name: str | None) -> bool:
    """Whether a stream's pixel format (FFmpeg's name) is one plane of codes: what a depth video
    holds (LeRobot writes ``gray12le``); a colour format's luma would read as plausible depth."""
    return isinstance(name, str) and (name in DEPTH_PIXEL_FORMATS or name.startswith("gray"))


def check_language_type(key: str, arrow_type: pa.DataType, *, where: str) -> None:
    """A language column's arrow type is one LeRobot's rows have: a list of structs whose fields
    are among ``LANGUAGE_FIELDS[key]``; ``role``/``content``/``style``/``camera`` text (or null),
    ``timestamp`` a number (or null), ``tool_calls`` a list, text or null.

    Raises:
        FormatError: names the column, the type found and the one expected.
    """
    expected = f"list<struct<{', '.join(LANGUAGE_FIELDS[key])}>> (LeRobot's language rows)"
    found = str(arrow_type)[:200]
    if not (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)) or not pa.types.is_struct(arrow_type.value_type):
        raise FormatError(f"{where}: language column {key!r} is {found}; expected {expected}")
    struct = arrow_type.value_type
    for i in range(struct.num_fields):
        child = struct.field(i)
        kind = child.type
        if child.name not in LANGUAGE_FIELDS[key]:
            ok = False
        elif child.name == "timestamp":
            ok = pa.types.is_null(kind) or pa.types.is_floating(kind) or pa.types.is_integer(kind)
        elif child.name == "tool_calls":
            ok = (
                pa.types.is_null(kind)
                or pa.types.is_string(kind)
                or pa.types.is_large_string(kind)
                or pa.types.is_list(kind)
                or pa.types.is_large_list(kind)
            )
        else:
            ok = pa.types.is_null(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind)
        if not ok:
            raise FormatError(
                f"{where}: language column {key!r} has field {child.name[:80]!r} of type {str(kind)[:80]}; expected {expected}"
            )


def value_column_type_ok(arrow_type: pa.DataType) -> bool:
    """A value feature's column holds what LeRobot returns as tensors or strings: numbers,
    bools or text, or (nested) lists of them; not structs (pictures, records) nor bytes."""
    if isinstance(arrow_type, pa.ExtensionType):
        arrow_type = arrow_type.storage_type  # LeRobot's ArrayND types, as ``datasets`` registers them
    while pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
        arrow_type = arrow_type.value_type
    return (
        pa.types.is_integer(arrow_type)
        or pa.types.is_floating(arrow_type)
        or pa.types.is_boolean(arrow_type)
        or pa.types.is_string(arrow_type)
        or pa.types.is_large_string(arrow_type)
        or pa.types.is_null(arrow_type)
    )


def image_column_type_ok(arrow_type: pa.DataType) -> bool:
    """An image column holds LeRobot's ``{"bytes", "path"}`` structs (or bare bytes)."""
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return True
    if not pa.types.is_struct(arrow_type):
        return False
    names = {arrow_type.field(i).name: arrow_type.field(i).type for i in range(arrow_type.num_fields)}
    data = names.get("bytes")
    return data is not None and (pa.types.is_binary(data) or pa.types.is_large_binary(data) or pa.types.is_null(data))


__all__ = [
    "CAMERA_CHANNELS",
    "DEPTH_PIXEL_FORMATS",
    "DEPTH_QMAX",
    "DEPTH_UNITS",
    "LANGUAGE_COLUMNS",
    "LANGUAGE_EVENTS",
    "LANGUAGE_FIELDS",
    "LANGUAGE_PERSISTENT",
    "MM_PER_METRE",
    "CameraGeometry",
    "DepthQuantization",
    "FeatureSpec",
    "Features",
    "check_language_type",
    "image_column_type_ok",
    "value_column_type_ok",
    "is_depth_pixel_format",
    "parse_feature",
    "parse_features",
]
