"""Field-by-field mutations of the files a dataset, pack or mixture says about itself (issue 48).

The fuzzer is schema-agnostic on purpose: it walks an honest file's JSON tree (or a parquet
table's columns) and mutates *every* node it finds, so a field added to a format is fuzzed the
day it is written, without anyone listing it. ``TARGETS`` names the file kinds; the worker
(``tests/scripts/field_fuzz_worker.py``) applies a ``Mutation`` to an honest copy, runs what reads
that file (``check``/``pack``, a reader's open, a resume, ``verify``/``finalize``) and says whether
it ended in one of our named errors or in samples equal to the honest ones, and how much memory
it took.
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

# File kinds and what reads them (the worker's consumers).
JSON_TARGETS = ("info", "stats", "manifest", "pack_info", "plan", "receipt", "mixture", "state")
TABLE_TARGETS = ("episodes_meta", "tasks", "data")
TARGETS = JSON_TARGETS + TABLE_TARGETS

# What is put in a JSON node's place. Each is a value no honest writer produces there (or an
# honest one of the wrong type); ``raw`` kinds change the JSON text itself.
JSON_KINDS = (
    "null",
    "true",
    "zero",
    "negative",
    "huge_int",
    "float32_overflow",
    "negative_zero",
    "tiny_float",
    "nan",
    "infinity",
    "empty_string",
    "long_string",
    "unicode_string",
    "empty_list",
    "long_list",
    "empty_object",
    "type_swap",
    "duplicate",
    "delete",
    "unknown_field",
)
TABLE_KINDS = ("null_column", "as_string", "negate", "huge", "zero", "drop_column", "duplicate_rows", "empty", "as_float")

# Changes made consistently across a source's files (issue 54): what one file says about another
# (rows against the video's frame times, a declared type against its column, the episodes table
# against the rows, the tasks file as each LeRobot release writes it, stats against sense), each
# judged by the independent LeRobot reference (tests/lerobot_reference.py) of the changed source.
# The worker lists each kind's places (``{"op": "paths"}`` under the target ``cross``): a path is
# ``(kind, *arguments)``.
CROSS_TARGET = "cross"
CROSS_KINDS = (
    "swap_timestamps",  # (episode, row): rows row and row+1 read each other's frames
    "shift_timestamp",  # (episode, row): half a frame off: no frame within the tolerance
    "declared_dtype",  # (feature, dtype): info.json declares another type than the column holds
    "stored_type",  # (feature, arrow type): the column holds another type than info.json declares
    "unlisted_episode",  # (episode,): the episodes table forgets it, its rows stay
    "tasks_layout",  # (layout,): tasks.parquet as LeRobot 0.4.x or plain pyarrow writes it
    "stats_unsound",  # (feature, stat, value): NaN, inf or min above max in stats.json
)

LONG_STRING = 1 << 20  # a megabyte of text where a name or a digest belongs
LONG_LIST = 100_000


@dataclass(frozen=True)
class Mutation:
    """One change to one file: ``path`` is the JSON path (keys and indices) or ``[column]``."""

    target: str
    path: tuple
    kind: str
    seed: int = 0
    value: Any = None  # a hypothesis-drawn value replacing the node (kind "value")

    def to_json(self) -> dict:
        data = asdict(self)
        data["path"] = list(self.path)
        return data

    @classmethod
    def from_json(cls, data: dict) -> Mutation:
        return cls(data["target"], tuple(data["path"]), data["kind"], data.get("seed", 0), data.get("value"))

    def describe(self) -> str:
        where = "/".join(str(p) for p in self.path) or "<root>"
        shown = f"={json.dumps(self.value)[:60]}" if self.kind == "value" else ""
        return f"{self.target}:{where}:{self.kind}{shown}"


def json_paths(value: Any, *, max_items: int = 3, prefix: tuple = ()) -> Iterator[tuple]:
    """Every node of a JSON value: the root, each object member, and a list's first
    ``max_items`` items (the rest are the same shape; the list itself is a node too)."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from json_paths(child, max_items=max_items, prefix=(*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value[:max_items]):
            yield from json_paths(child, max_items=max_items, prefix=(*prefix, i))


def _get(doc: Any, path: tuple) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _swapped(node: Any) -> Any:
    """A value of another JSON type with the same 'meaning' a lax parser might accept."""
    if isinstance(node, bool):
        return int(node)
    if isinstance(node, (int, float)):
        return str(node)
    if isinstance(node, str):
        try:
            return float(node) if "." in node else int(node)
        except ValueError:
            return [node]
    if isinstance(node, list):
        return {str(i): v for i, v in enumerate(node)}
    if isinstance(node, dict):
        return list(node.values())
    return "null"


def _replacement(kind: str, node: Any, rng: random.Random) -> Any:
    if kind == "null":
        return None
    if kind == "true":
        return True
    if kind == "zero":
        return 0
    if kind == "negative":
        return -1 if not isinstance(node, (int, float)) or isinstance(node, bool) else -abs(node) - 1
    if kind == "huge_int":
        return rng.choice([2**31, 2**53 + 1, 2**63, 2**64, 10**30])
    if kind == "float32_overflow":
        return rng.choice([1e39, -1e39, 1.7e308, 3.4028236e38])
    if kind == "negative_zero":
        return -0.0
    if kind == "tiny_float":
        return 5e-324
    if kind == "empty_string":
        return ""
    if kind == "long_string":
        return "x" * LONG_STRING
    if kind == "unicode_string":
        return rng.choice(["\u202e\u0000kanji\u6f22", "e\u0301\ud7ff", "../../etc/passwd", "a/b", "\n\r\t", "\ufeff"])
    if kind == "empty_list":
        return []
    if kind == "long_list":
        return [0] * LONG_LIST
    if kind == "empty_object":
        return {}
    if kind == "type_swap":
        return _swapped(node)
    raise ValueError(kind)


def mutate_json(doc: Any, mutation: Mutation) -> str:
    """The JSON text of ``doc`` with ``mutation`` applied (the honest ``doc`` is not changed)."""
    rng = random.Random(mutation.seed)
    out = copy.deepcopy(doc)
    path, kind = mutation.path, mutation.kind
    if kind in ("nan", "infinity"):
        # Not JSON numbers (Python's parser takes them): written into the text itself.
        token = "NaN" if kind == "nan" else "-Infinity"
        marker = "__FUZZ_NONFINITE__"
        out = _set(out, path, marker)
        return json.dumps(out).replace(json.dumps(marker), token)
    if kind == "duplicate":
        parent = _get(out, path[:-1]) if path else None
        if path and isinstance(parent, list):
            parent.insert(path[-1], copy.deepcopy(parent[path[-1]]))
            return json.dumps(out)
        if path and isinstance(parent, dict) and mutation.target != "state":
            # The same key twice in an object, the honest value first and another last. What it
            # means (core/format/fields.py load_json): a LeRobot file (info.json, stats.json) is
            # read as LeRobot's json.load reads it, the last one counting, so the samples and
            # meta must be what the LeRobot reference reads; a record of ours is refused. (A
            # resume state reaches the reader as a dict, which cannot hold a key twice: the
            # mutation is a type swap there.) Written as text after the honest member.
            value, marker = parent[path[-1]], "__FUZZ_DUPLICATE__"
            parent[path[-1]] = marker
            return json.dumps(out).replace(
                json.dumps(marker), f"{json.dumps(value)}, {json.dumps(path[-1])}: {json.dumps(_swapped(value))}", 1
            )
        kind = "type_swap"
    if kind == "delete":
        if not path:
            return "{}"
        parent = _get(out, path[:-1])
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            del parent[path[-1]]
        return json.dumps(out)
    if kind == "unknown_field":
        node = _get(out, path)
        if isinstance(node, dict):
            node["fuzz_unknown_field"] = {"x": [1, 2, 3]}
            return json.dumps(out)
        kind = "type_swap"
    if kind == "value":
        return json.dumps(_set(out, path, mutation.value))
    return json.dumps(_set(out, path, _replacement(kind, _get(out, path), rng)))


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def sweep(target: str, paths: list[tuple], kinds: tuple[str, ...], *, rounds: int = 1, offset: int = 0) -> list[Mutation]:
    """Every path of a file, each with ``rounds`` mutation kinds taken in turn (so every kind
    meets every shape of node across a target): the coverage the CI sweep guarantees."""
    out = []
    for i, path in enumerate(paths):
        for r in range(rounds):
            kind = kinds[(i * rounds + r + offset) % len(kinds)]
            out.append(Mutation(target, path, kind, seed=i * 7919 + r))
    return out


def full_product(target: str, paths: list[tuple], kinds: tuple[str, ...]) -> list[Mutation]:
    """Every path with every kind (``make fuzz``)."""
    return [Mutation(target, path, kind, seed=i) for i, path in enumerate(paths) for kind in kinds]


def finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


__all__ = [
    "JSON_KINDS",
    "JSON_TARGETS",
    "TABLE_KINDS",
    "TABLE_TARGETS",
    "TARGETS",
    "CROSS_KINDS",
    "CROSS_TARGET",
    "Mutation",
    "full_product",
    "json_paths",
    "mutate_json",
    "sweep",
]
