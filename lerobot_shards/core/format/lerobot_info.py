"""``meta/info.json`` of a LeRobot v3.0 dataset: its schema and the one validating parser.

Read where a source is opened (the packer), where ``finalize`` reads the copy packed into a
pack's ``meta/``, and where a reader opens a pack; every field used anywhere is typed and
bounded here (``LeRobotInfo``), so no caller indexes into the JSON.
"""

from __future__ import annotations

import copy
import json
import string
from dataclasses import dataclass, field
from typing import Any

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.features import Features, parse_features
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.layout import STORAGE_FORMAT, STORAGE_FORMAT_KEY
from lerobot_shards.core.format.lerobot_reading import (
    V21_TO_V30,
    converter_hint,
    parse_codebase_version,
    parse_fps,
    read_codebase_version,
)
from lerobot_shards.core.format.limits import MAX_FPS, MAX_JSON_DEPTH, MAX_RECORD_BYTES

SUPPORTED_CODEBASE_VERSION = "v3.0"
"""What LeRobot 0.6.1 writes; any 3.x spelling reads (``lerobot_reading.parse_codebase_version``)."""
V21_CONVERTER = V21_TO_V30.format(root="PATH")
_MAX_TEXT = 4096

# The fields a LeRobot v3 path template may use, each with an optional integer format spec.
TEMPLATE_FIELDS = {"data_path": ("chunk_index", "file_index"), "video_path": ("chunk_index", "file_index", "video_key")}
# LeRobot v2.1's: a file per episode, in chunks of ``chunks_size`` episodes.
V21_TEMPLATE_FIELDS = {
    "data_path": ("episode_chunk", "episode_index"),
    "video_path": ("episode_chunk", "video_key", "episode_index"),
}


@dataclass(frozen=True)
class LeRobotInfo:
    """``meta/info.json``, parsed.

    Attributes:
        codebase_version: as written (``"v3.0"``, ``"3.0"``, ``"v3"``: any major 3, as LeRobot reads it).
        fps: frames per second, in ``(0, MAX_FPS]`` (``30.0`` in the file reads as the int 30;
            29.97 stays a float: ``lerobot_reading.parse_fps``).
        features: the parsed features (``parse_features``).
        data_path: the data files' path template (known fields, integer formats only).
        video_path: the videos' template, None when no feature is a video.
        robot_type: a string or None.
        raw: the JSON object as read (written back verbatim; not for decisions).
    """

    codebase_version: str
    fps: float
    features: Features
    data_path: str
    video_path: str | None
    robot_type: str | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def data_file(self, chunk_index: int, file_index: int) -> str:
        """The data file of a chunk and file index, from the checked template."""
        return self.data_path.format(chunk_index=chunk_index, file_index=file_index)

    def video_file(self, video_key: str, chunk_index: int, file_index: int) -> str:
        """A camera's video file of a chunk and file index, from the checked template."""
        if self.video_path is None:
            raise FormatError(f"info.json has no video_path for camera {video_key!r}")
        return self.video_path.format(video_key=video_key, chunk_index=chunk_index, file_index=file_index)


def parse_lerobot_info(data: bytes | str, *, where: str) -> LeRobotInfo:
    """Parse and check a LeRobot v3.0 ``meta/info.json``.

    Raises:
        FormatError: not JSON, an unsupported version (v2.x gets the converter's command), or a
            missing or malformed field; names ``where`` and the field.
    """
    info = _info_object(data, where)
    root = where[: -len("/meta/info.json")] if where.endswith("/meta/info.json") else "PATH"
    version = parse_codebase_version(info.get("codebase_version"), where=where, root=root)
    return _parsed_info(info, version.text, TEMPLATE_FIELDS, where)


def parse_lerobot_v21_info(data: bytes | str, *, where: str) -> LeRobotInfo:
    """Parse and check a LeRobot v2.1 ``meta/info.json`` (a data and a video file per episode:
    its templates take ``episode_chunk`` and ``episode_index``; ``chunks_size`` a positive int).

    Raises:
        FormatError: not JSON, another version than 2.1, or a missing or malformed field.
    """
    info = _info_object(data, where)
    version = read_codebase_version(info.get("codebase_version"), where=where)
    if (version.major, version.minor) != (2, 1):
        root = where[: -len("/meta/info.json")] if where.endswith("/meta/info.json") else "PATH"
        raise FormatError(
            f"{where}: codebase_version {version.text!r} is not v2.1, though the root lists meta/episodes.jsonl as v2.1 "
            f"does. {converter_hint(version, root)}"
        )
    chunks = info.get("chunks_size")
    if not isinstance(chunks, int) or isinstance(chunks, bool) or not 1 <= chunks <= 10**9:
        raise FormatError(f"{where}: chunks_size must be a positive integer, found {str(chunks)[:40]!r}")
    return _parsed_info(info, version.text, V21_TEMPLATE_FIELDS, where)


def _info_object(data: bytes | str, where: str) -> dict:
    info = load_json(data, where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH, lerobot_file=True)
    if not isinstance(info, dict):
        raise FormatError(f"{where}: expected a JSON object, found {type(info).__name__}")
    return info


def _parsed_info(info: dict, version: str, template_fields: dict[str, tuple[str, ...]], where: str) -> LeRobotInfo:
    """An ``info.json`` object's fields, each checked: fps, features, path templates (using only
    ``template_fields``), robot type."""
    for key in ("fps", "features", "data_path"):
        if key not in info:
            raise FormatError(f"{where}: missing key {key!r}")
    fps = parse_fps(info["fps"], where=where, max_fps=MAX_FPS)
    features = parse_features(info["features"], where=where)
    video_keys = features.video_keys
    if video_keys and not info.get("video_path"):
        raise FormatError(f"{where}: video features {video_keys} but no video_path")
    templates: dict[str, str | None] = {}
    for name, allowed in template_fields.items():
        # A dataset without cameras stored as video (images only, depth as images) has
        # ``"video_path": null``: LeRobot writes it so and reads the dataset without it.
        value = info.get(name)
        if name == "video_path" and value is None and not video_keys:
            templates[name] = None
            continue
        templates[name] = _check_template(value, name, where, allowed)
    robot_type = info.get("robot_type")
    if robot_type is not None and (not isinstance(robot_type, str) or len(robot_type) > _MAX_TEXT):
        raise FormatError(f"{where}: robot_type must be a string or null, found {type(robot_type).__name__}")
    return LeRobotInfo(
        codebase_version=version,
        fps=fps,
        features=features,
        data_path=str(templates["data_path"]),
        video_path=templates["video_path"],
        robot_type=robot_type,
        raw=copy.deepcopy(info),
    )


def lerobot_view(raw: dict[str, Any], features: dict[str, Any]) -> bytes:
    """A pack's ``meta/info.json``: its source's (``raw``), with ``features`` as the pack holds
    them (re-encoded cameras' codec, pixel format and size) and ``storage_format`` naming the
    reader LeRobot's registry loads for it (``STORAGE_FORMAT``). Written as LeRobot writes its
    own (``json.dump(..., indent=4, ensure_ascii=False)``), so ``LeRobotDatasetMetadata`` opens
    the pack's ``meta/`` as a dataset's: what it says is what the samples hold."""
    view = {**copy.deepcopy(raw), "features": copy.deepcopy(features), STORAGE_FORMAT_KEY: STORAGE_FORMAT}
    return json.dumps(view, indent=4, ensure_ascii=False).encode()


def is_lerobot_view(raw: dict[str, Any]) -> bool:
    """Whether an ``info.json`` is a pack's own (``lerobot_view``: its features already as
    packed), rather than a source's copied verbatim (packs made before 2026-12-06)."""
    return raw.get(STORAGE_FORMAT_KEY) == STORAGE_FORMAT


def _check_template(template: object, name: str, where: str, allowed: tuple[str, ...]) -> str:
    """A path template from info.json may only use its known fields, with integer formats.

    ``str.format`` on an untrusted template could otherwise reach attributes of its arguments
    (``{chunk_index.__class__}``); what the template yields is checked again where it is used
    (``source_relative_path``).
    """
    if not isinstance(template, str) or not template or len(template) > _MAX_TEXT:
        raise FormatError(f"{where}: {name} must be a path template string, found {type(template).__name__}")
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as err:
        raise FormatError(f"{where}: {name} {template[:200]!r} is not a path template ({err})") from None
    for _, fld, spec, conversion in parts:
        if fld is None:
            continue
        if fld not in allowed or conversion or not all(c.isdigit() or c == "d" for c in spec or ""):
            raise FormatError(
                f"{where}: {name} {template[:200]!r} uses {{{fld}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}}; this template may only use {list(allowed)} with integer formats"
            )
    return template


__all__ = [
    "SUPPORTED_CODEBASE_VERSION",
    "TEMPLATE_FIELDS",
    "LeRobotInfo",
    "is_lerobot_view",
    "lerobot_view",
    "parse_lerobot_info",
]
