"""Parsing JSON records of the format with bounded cost, and checking their fields.

Every JSON file of a dataset (manifest, receipts, pack plan, mixture file) is untrusted:
``load_json`` bounds its size and nesting before and while parsing, and ``Fields`` checks
each field's type and range where it is read, raising ``FormatError`` with the file, the
field's path and what was expected vs found.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from lerobot_shards.core.errors import ArgumentError, FormatError, IntegrityError

T = TypeVar("T")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def load_json(
    data: bytes | str, *, where: str, max_bytes: int, max_depth: int, allow_nan: bool = False, lerobot_file: bool = False
) -> Any:
    """Parse ``data`` as JSON, refusing more than ``max_bytes`` or ``max_depth`` levels.

    ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's parser accepts, but JSON does not
    have) are refused unless ``allow_nan``: records of the format are hashed as canonical
    JSON, which cannot hold them. LeRobot's ``stats.json`` may (a constant feature's ratio).

    A key given twice in one object: in a LeRobot file (``lerobot_file``: ``info.json``,
    ``stats.json``, a source's or a pack's copy) the last one counts, as LeRobot's
    ``json.load`` reads it; in a record of ours (manifest, receipts, plans, mixtures, resume
    states) it is refused: we never write one, and parsers disagree on which one counts, so
    the file would say two things.

    Raises:
        FormatError: too large, not UTF-8, not JSON, a non-finite number, a key given twice in
            a record of ours, or nested deeper than ``max_depth``.
    """
    if len(data) > max_bytes:
        raise FormatError(f"{where}: {len(data)} bytes, more than the {max_bytes} this format allows")
    hook = None if lerobot_file else _unique_keys
    try:
        if allow_nan:
            value = json.loads(data, object_pairs_hook=hook)
        else:
            value = json.loads(data, parse_constant=_refuse_constant, object_pairs_hook=hook)
    except _DuplicateKey as err:
        raise FormatError(f"{where}: key {str(err)[:200]} is given twice in one object; a file we write never does") from None
    except UnicodeDecodeError as err:
        raise FormatError(f"{where}: not UTF-8 text ({err})") from None
    except json.JSONDecodeError as err:
        raise FormatError(f"{where}: not valid JSON ({err})") from None
    except RecursionError:
        raise FormatError(f"{where}: nested too deeply to be a {where.rsplit('/', 1)[-1]}") from None
    except _NonFinite as err:
        raise FormatError(f"{where}: {err} is not a JSON number") from None
    depth = _depth(value, max_depth)
    if depth > max_depth:
        raise FormatError(f"{where}: nested {depth} levels deep; at most {max_depth} expected")
    return value


class _NonFinite(ValueError):
    pass


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(repr(next(k for k, _ in pairs if k in seen or seen.add(k))))
    return out


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, iteratively (stops counting past ``limit``)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level > limit:
                return level
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def canonical_json(value: Any) -> bytes:
    """Key-sorted, separator-minimal JSON: the bytes record digests are computed over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def sha256_hex(data: bytes | memoryview) -> str:
    """The SHA-256 of ``data`` as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()


def sha256_chunks(chunks: Iterable[bytes]) -> tuple[str, int]:
    """``(SHA-256 hex, total bytes)`` of a stream of chunks, never holding more than one."""
    digest, size = hashlib.sha256(), 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def sha256_file(path: str | Path, *, chunk_bytes: int = 1 << 22) -> tuple[str, int]:
    """``(SHA-256 hex, size)`` of a local file, read in ``chunk_bytes`` pieces."""
    with open(path, "rb") as handle:
        return sha256_chunks(iter(lambda: handle.read(chunk_bytes), b""))


def is_sha256_hex(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None


def check_pin(pin: object, *, what: str = "manifest_sha256") -> str:
    """A pin the user gives (``sha256:`` and 64 hex digits, as ``info`` prints it; the bare digits
    too), normalized to ``sha256:<lowercase hex>``.

    Raises:
        ArgumentError: anything else, named as bad input (not as a pack that changed).
    """
    text = pin.strip().lower() if isinstance(pin, str) else ""
    digest = text.removeprefix("sha256:")
    if not is_sha256_hex(digest):
        raise ArgumentError(
            f"{what} {str(pin)[:80]!r} is not a pin: expected 'sha256:' and 64 hex digits, as `lerobot-shards info` "
            "prints it on the line 'pin'"
        )
    return "sha256:" + digest


def check_bytes(data: bytes | memoryview, *, size: int, sha256: str, where: str) -> None:
    """Check bytes against the size and SHA-256 the format records for them.

    Raises:
        IntegrityError: the size or the digest differs (damaged or replaced after packing).
    """
    if len(data) != size:
        raise IntegrityError(f"{where}: {len(data)} bytes, the dataset records {size} (damaged or replaced after packing)")
    found = sha256_hex(data)
    if found != sha256:
        raise IntegrityError(
            f"{where}: sha256 {found[:16]}... differs from the recorded {sha256[:16]}... (damaged or replaced after packing)"
        )


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class Fields:
    """Typed access to one JSON object, raising ``FormatError`` that names ``where`` and the field.

    >>> Fields({"fps": 30}, "manifest.json").int("fps", lo=1)
    30
    """

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise FormatError(f"{where}: expected a JSON object, found {type(data).__name__}")
        self.data = data
        self.where = where

    def _get(self, key: str, expected: str) -> Any:
        if key not in self.data:
            raise FormatError(f"{self.where}: missing field {key!r} ({expected})")
        return self.data[key]

    def _bad(self, key: str, expected: str, value: Any) -> FormatError:
        shown = repr(value)
        return FormatError(f"{self.where}: field {key!r} must be {expected}, found {shown[:200]}")

    def has(self, key: str) -> bool:
        return key in self.data

    def int(self, key: str, *, lo: int = 0, hi: int | None = None) -> int:
        expected = f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer >= {lo}"
        value = self._get(key, expected)
        if not is_int(value) or value < lo or (hi is not None and value > hi):
            raise self._bad(key, expected, value)
        return value

    def number(self, key: str, *, lo: float = 0.0, hi: float | None = None) -> float:
        expected = f"a number in [{lo}, {hi}]" if hi is not None else f"a number >= {lo}"
        value = self._get(key, expected)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise self._bad(key, expected, value)
        if value < lo or (hi is not None and value > hi):
            raise self._bad(key, expected, value)
        return float(value)

    def str(self, key: str, *, choices: tuple[str, ...] | None = None, check: Callable[[str], object] | None = None) -> str:
        expected = f"one of {list(choices)}" if choices else "a string"
        value = self._get(key, expected)
        if not isinstance(value, str) or (choices is not None and value not in choices):
            raise self._bad(key, expected, value)
        if check is not None:
            check(value)
        return value

    def bool(self, key: str) -> bool:
        value = self._get(key, "true or false")
        if not isinstance(value, bool):
            raise self._bad(key, "true or false", value)
        return value

    def sha256(self, key: str) -> str:
        value = self._get(key, "a sha256 hex digest")
        if not is_sha256_hex(value):
            raise self._bad(key, "64 lowercase hex digits (sha256)", value)
        return value

    def obj(self, key: str) -> Fields:
        value = self._get(key, "an object")
        if not isinstance(value, dict):
            raise self._bad(key, "an object", value)
        return Fields(value, f"{self.where}: {key}")

    def list(self, key: str, *, max_items: int | None = None) -> list:
        value = self._get(key, "a list")
        if not isinstance(value, list) or (max_items is not None and len(value) > max_items):
            raise self._bad(key, "a list" + (f" of at most {max_items} items" if max_items is not None else ""), value)
        return value

    def int_list(self, key: str, *, lo: int = 0) -> list[int]:
        values = self.list(key)
        if not all(is_int(v) and v >= lo for v in values):
            raise self._bad(key, f"a list of integers >= {lo}", values)
        return values

    def optional(self, key: str, read: Callable[[str], T]) -> T | None:
        """``read(key)`` when the field is present and not null, else None."""
        return None if self.data.get(key) is None else read(key)
