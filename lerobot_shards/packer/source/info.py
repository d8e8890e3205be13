"""``meta/info.json`` of a LeRobot v3.0 dataset: the one validating parser.

Used wherever the packer reads an ``info.json``: opening a source, describing it for the pack
plan, and ``finalize`` (which reads the copy packed into ``meta/``). Every field the packer
uses is checked for type and range here, so no caller indexes into unchecked JSON.
"""

from __future__ import annotations

import string
from typing import Any

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import check_key, video_keys_of
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.limits import (
    MAX_FEATURE_DIMS,
    MAX_FPS,
    MAX_FRAME_PIXELS,
    MAX_FRAME_SIDE,
    MAX_JSON_DEPTH,
    MAX_RECORD_BYTES,
)
from lerobot_shards.core.format.manifest import check_feature_shape
from lerobot_shards.packer.errors import SourceError

SUPPORTED_CODEBASE_VERSION = "v3.0"

# The fields a LeRobot v3 path template may use, each with an optional integer format spec.
_TEMPLATE_FIELDS = {"data_path": ("chunk_index", "file_index"), "video_path": ("chunk_index", "file_index", "video_key")}


def parse_info(data: bytes, *, where: str) -> dict[str, Any]:
    """Parse and check a LeRobot v3.0 ``meta/info.json``.

    Returns:
        The parsed object: ``codebase_version`` is ``"v3.0"``, ``fps`` a positive int,
        ``features`` an object of objects with safe keys, ``data_path`` (and ``video_path``
        when there are video features) a template of known fields only.

    Raises:
        SourceError: not JSON, an unsupported version (v2.x gets the converter's command),
            or a missing or malformed field; names ``where`` and the field.
    """
    try:
        info = load_json(data, where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH)
    except FormatError as err:
        raise SourceError(str(err)) from None
    if not isinstance(info, dict):
        raise SourceError(f"{where}: expected a JSON object, found {type(info).__name__}")
    version = info.get("codebase_version")
    if version != SUPPORTED_CODEBASE_VERSION:
        hint = ""
        if isinstance(version, str) and version.startswith("v2"):
            hint = (
                " Convert it to v3.0 first with LeRobot's converter: "
                "python -m lerobot.datasets.v30.convert_dataset_v21_to_v30 --repo-id=ORG/NAME"
            )
        raise SourceError(
            f"{where}: codebase_version {str(version)[:40]!r} is not supported (expected {SUPPORTED_CODEBASE_VERSION!r}).{hint}"
        )
    for key in ("fps", "features", "data_path"):
        if key not in info:
            raise SourceError(f"{where}: missing key {key!r}")
    fps = info["fps"]
    if not isinstance(fps, int) or isinstance(fps, bool) or not 0 < fps <= MAX_FPS:
        raise SourceError(f"{where}: fps must be a positive integer, found {str(fps)[:40]!r}")
    features = info["features"]
    if not isinstance(features, dict):
        raise SourceError(f"{where}: features must be an object")
    for key, feature in features.items():
        try:
            check_key(key, where=f"{where}: features")
        except ValueError as err:
            raise SourceError(str(err)) from None
        if not isinstance(feature, dict):
            raise SourceError(f"{where}: feature {key!r} must be an object")
        _check_shape(key, feature, where)
    video_keys = video_keys_of(features)
    if video_keys and not info.get("video_path"):
        raise SourceError(f"{where}: video features {video_keys} but no video_path")
    for name in _TEMPLATE_FIELDS:
        # A dataset without cameras stored as video (images only, depth as images) has
        # ``"video_path": null``: LeRobot writes it so and reads the dataset without it.
        if name == "video_path" and info.get(name) is None and not video_keys:
            continue
        if name in info:
            _check_template(info[name], name, where)
    return info


def feature_elements(feature: dict) -> int:
    """Values per frame of a tabular feature: the product of its (checked) shape."""
    elements = 1
    for dim in feature["shape"]:
        elements *= dim
    return elements


def _check_shape(key: str, feature: dict, where: str) -> None:
    """A feature's dtype is a string and its shape a short list of positive integers that no
    honest dataset comes near: frames within ``MAX_FRAME_SIDE``/``MAX_FRAME_PIXELS``, tabular
    features within ``MAX_FEATURE_ELEMENTS`` values per frame (what the data holds is
    compared with the shape when rows are read)."""
    dtype, shape = feature.get("dtype"), feature.get("shape")
    if not isinstance(dtype, str):
        raise SourceError(f"{where}: feature {key!r}: dtype must be a string, found {str(dtype)[:40]!r}")
    if (
        not isinstance(shape, list)
        or not 0 < len(shape) <= MAX_FEATURE_DIMS
        or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
    ):
        raise SourceError(
            f"{where}: feature {key!r}: shape must be a list of 1 to {MAX_FEATURE_DIMS} positive integers, "
            f"found {str(shape)[:80]}"
        )
    if dtype == "video":
        if len(shape) != 3 or shape[0] > MAX_FRAME_SIDE or shape[1] > MAX_FRAME_SIDE or shape[0] * shape[1] > MAX_FRAME_PIXELS:
            raise SourceError(
                f"{where}: feature {key!r}: video shape {shape} is beyond {MAX_FRAME_SIDE} per side or "
                f"{MAX_FRAME_PIXELS:,} pixels (or not [height, width, channels])"
            )
        return
    try:
        check_feature_shape(dtype, shape, where=f"{where}: feature {key!r}")
    except FormatError as err:
        raise SourceError(str(err)) from None


def _check_template(template: object, name: str, where: str) -> None:
    """A path template from info.json may only use its known fields, with integer formats.

    ``str.format`` on an untrusted template could otherwise reach attributes of its arguments
    (``{chunk_index.__class__}``); what the template yields is checked again by
    ``LeRobotSource.file``.
    """
    allowed = _TEMPLATE_FIELDS[name]
    if not isinstance(template, str):
        raise SourceError(f"{where}: {name} must be a string, found {type(template).__name__}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        raise SourceError(f"{where}: {name} {template[:200]!r} is not a path template ({err})") from None
    for _, field, spec, conversion in parts:
        if field is None:
            continue
        if field not in allowed or conversion or not all(c.isdigit() or c == "d" for c in spec or ""):
            raise SourceError(
                f"{where}: {name} {template[:200]!r} uses {{{field}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}}; a LeRobot v3 template may only use {list(allowed)} with integer formats"
            )
