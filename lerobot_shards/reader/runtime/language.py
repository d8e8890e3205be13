"""LeRobot's language columns as ``LeRobotDataset`` returns them.

LeRobot 0.6.1's annotation pipeline writes ``language_persistent`` and ``language_events`` as
lists of message structs whose Arrow types pyarrow inferred (a ``timestamp`` of float64, tool
calls as nested structs). ``LeRobotDataset`` loads them through ``datasets`` cast to its own
feature types (``lerobot.datasets.language``): each message has exactly its fields in its
order (``timestamp`` as float32, then a Python float), and ``tool_calls`` is a list of
``datasets.Json`` values, i.e. what ``ujson_loads(ujson_dumps(value))`` gives (pandas'
ujson, 10 significant decimals for floats). The pack keeps the column verbatim; this turns a
cell into that value, a fresh object per sample.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lerobot_shards.core.format.features import LANGUAGE_FIELDS


def _json_codec():
    """pandas' ujson (what ``datasets.Json`` uses), or the standard library where pandas is
    missing (the same values except floats beyond 10 significant decimals)."""
    try:
        from pandas.io.json import ujson_dumps, ujson_loads

        return ujson_dumps, ujson_loads
    except ImportError:  # pandas is an optional dependency of the reader
        return json.dumps, json.loads


def _tool_call(value: Any, dumps, loads) -> Any:
    if isinstance(value, str):
        try:
            return loads(value)  # stored as JSON text (``pa.json_()`` or string)
        except ValueError:
            return value
    return loads(dumps(value))


def language_value(column: str, cell: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """One row's ``column`` (a LeRobot language column) as ``LeRobotDataset`` returns it."""
    if cell is None:
        return None
    dumps, loads = _json_codec()
    fields = LANGUAGE_FIELDS[column]
    messages = []
    for message in cell:
        out: dict[str, Any] = {}
        for name in fields:
            value = message.get(name) if isinstance(message, Mapping) else None
            if name == "timestamp" and value is not None:
                value = float(np.float32(value))
            elif name == "tool_calls" and value is not None:
                value = [_tool_call(call, dumps, loads) if call is not None else None for call in value]
            out[name] = value
        messages.append(out)
    return messages


__all__ = ["language_value"]
