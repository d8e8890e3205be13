"""``meta/info.json`` of a LeRobot v3.0 dataset: the one validating parser.

Used wherever the packer reads an ``info.json``: opening a source, describing it for the pack
plan, and ``finalize`` (which reads the copy packed into ``meta/``). Every field the packer
uses is checked for type and range here, so no caller indexes into unchecked JSON.
"""

from __future__ import annotations

import json
import string
from typing import Any

from packer.errors import SourceError
from reader.format import check_key, video_keys_of
from reader.format.limits import MAX_FPS

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
        info = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise SourceError(f"{where}: not valid JSON ({type(err).__name__}: {str(err)[:200]})") from None
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
            f"{where}: codebase_version {str(version)[:40]!r} is not supported (expected "
            f"{SUPPORTED_CODEBASE_VERSION!r}).{hint}"
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
    video_keys = video_keys_of(features)
    if video_keys and not info.get("video_path"):
        raise SourceError(f"{where}: video features {video_keys} but no video_path")
    for name in _TEMPLATE_FIELDS:
        if name in info:
            _check_template(info[name], name, where)
    return info


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
