"""How LeRobot 0.6.1 reads a v3 dataset: one model, used by ``check``, ``pack``, a pack's own
parsers and the tests (issue 54).

Each function here answers one question the way ``LeRobotDataset`` answers it, from the bytes,
and says where LeRobot is lenient (a version without its ``v``, an integral ``30.0`` fps, a
tasks file written by pandas with an unnamed index) and where it raises or gives something we
refuse to copy (a task looked up by row position in a file without pandas metadata). What the
model cannot follow yet is refused by name, with the fix.

LeRobot's code is the reference (``lerobot/datasets/utils.py``, ``io_utils.py``,
``dataset_reader.py`` at 0.6.1); nothing of it is imported: the packer and the reader run
without LeRobot installed, and ``make parity`` compares this model with LeRobot itself.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

import pyarrow as pa

from lerobot_shards.core.errors import FormatError

CODEBASE_MAJOR = 3
"""The major codebase version LeRobot 0.6.1 reads, and the only one a pack is made from."""

V21_TO_V30 = "python -m lerobot.scripts.convert_dataset_v21_to_v30 --repo-id=ORG/NAME --root={root}"
"""LeRobot 0.6.1's converter of a local v2.1 dataset (it rewrites ``--root`` in place)."""

V20_TO_V21 = "python -m lerobot.datasets.v21.convert_dataset_v20_to_v21 --repo-id=ORG/NAME"
"""LeRobot 0.3.3's converter of a v2.0 Hub dataset to v2.1 (it converts Hub repos only)."""

# packaging.version's grammar, as far as a dataset version uses it: an optional "v", dotted
# integers, an optional pre/post/dev tail (ignored: LeRobot compares major and minor only).
_VERSION = re.compile(
    r"^\s*[vV]?(\d{1,6})(?:\.(\d{1,6}))?(?:\.\d{1,6})*(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview|post|rev|r|dev)\.?\d*)*\s*$"
)


@dataclass(frozen=True)
class CodebaseVersion:
    """A dataset's ``codebase_version`` as LeRobot reads it (``packaging.version.parse``)."""

    major: int
    minor: int
    text: str

    def __str__(self) -> str:
        return self.text


def read_codebase_version(value: object, *, where: str) -> CodebaseVersion:
    """``codebase_version`` as a version, whichever it is (``parse_codebase_version`` then
    says which a v3 reader takes; a v2.1 source format takes 2.1).

    Raises:
        FormatError: not a version string.
    """
    match = _VERSION.match(value) if isinstance(value, str) and len(value) <= 64 else None
    if match is None:
        raise FormatError(f"{where}: codebase_version {str(value)[:40]!r} is not a version (LeRobot writes 'v3.0')")
    return CodebaseVersion(int(match.group(1)), int(match.group(2) or 0), value.strip())  # type: ignore[union-attr]


def parse_codebase_version(value: object, *, where: str, root: str = "PATH") -> CodebaseVersion:
    """``codebase_version`` read as LeRobot reads it: ``v3.0``, ``3.0``, ``v3`` and ``3.0.1``
    are the same major version; LeRobot checks the major number only.

    Returns:
        The parsed version (major 3).

    Raises:
        FormatError: not a version string, or a major version other than 3; a v2.x dataset
            gets the LeRobot commands that convert it (``root`` is the dataset's folder, for the
            command's ``--root``), a newer one says a newer LeRobot wrote it.
    """
    parsed = read_codebase_version(value, where=where)
    major = parsed.major
    if major == CODEBASE_MAJOR:
        return parsed
    if major > CODEBASE_MAJOR:
        raise FormatError(
            f"{where}: codebase_version {parsed.text!r} is newer than the v3 format this version of lerobot-shards "
            "reads; upgrade lerobot-shards (pip install -U lerobot-shards)"
        )
    raise FormatError(
        f"{where}: codebase_version {parsed.text!r} is not supported (a v3 dataset is needed). {converter_hint(parsed, root)}"
    )


def converter_hint(version: CodebaseVersion, root: str = "PATH") -> str:
    """The LeRobot commands that bring a dataset of ``version`` to v3.0, as one sentence."""
    v30 = V21_TO_V30.format(root=root)
    if (version.major, version.minor) == (2, 1):
        if not version.text.startswith("v"):
            # The converter compares codebase_version with "v2.1" as a string.
            return f'LeRobot\'s converter needs "codebase_version": "v2.1" in meta/info.json: set it, then run {v30}'
        return (
            "lerobot-shards packs LeRobot v2.1 directly from its meta/episodes.jsonl, which this root lacks; "
            f"or convert it with LeRobot (0.6.1): {v30}"
        )
    if version.major == 2:
        return (
            f"Convert it to v2.1 with LeRobot 0.3.3 ({V20_TO_V21}, for a Hub dataset), which lerobot-shards packs "
            f"directly, or then to v3.0 with LeRobot 0.6.1: {v30}"
        )
    return "LeRobot has no converter from this version to v3.0 in its current releases; re-record or convert it to v2.1 first"


def parse_fps(value: object, *, where: str, max_fps: int) -> float:
    """``fps`` as LeRobot uses it: a positive number. LeRobot keeps it as written and computes
    ``1 / fps`` and ``round(ts * fps)`` with it: ``30.0`` reads as the integer 30, and an NTSC
    rate (29.97, rows at ``k / 29.97`` s) as that float (``is_fractional_fps``).

    Returns:
        An ``int`` for a whole number of frames per second, else the float.

    Raises:
        FormatError: not a number, below 1 or above ``max_fps``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FormatError(f"{where}: fps must be a number from 1 to {max_fps}, found {str(value)[:40]!r}")
    if not 1 <= value <= max_fps:
        # LeRobot takes any positive rate; below one frame a second nothing is recorded here.
        raise FormatError(f"{where}: fps must be a number from 1 to {max_fps}, found {value!r}")
    if isinstance(value, float) and not value.is_integer():
        return float(value)
    return int(value)


def is_fractional_fps(fps: float) -> bool:
    """Whether ``fps`` is not a whole number (a pack of it is format 5, a mixture of it version 5)."""
    return not float(fps).is_integer()


def video_rate(fps: float):
    """The rate (a ``Fraction``) an encoder is given for frames at ``fps``: the integer itself,
    or the fraction with the smallest denominator up to 1001 (29.97 -> 2997/100)."""
    from fractions import Fraction

    return Fraction(fps).limit_denominator(1001)


# -- which frame a row reads ---------------------------------------------------------------------


def lerobot_frame_positions(queries_s, frames_s, tolerance_s: float):
    """Which of a window's frames LeRobot gives each row: the frame whose presentation time lies
    within ``tolerance_s`` of the row's query time (``from_timestamp + timestamp``), as
    ``decode_video_frames_torchcodec`` loads frame ``round(query * average_fps)`` and accepts it
    only that close (frames are further apart than twice any tolerance LeRobot uses, so at most
    one frame can be).

    Args:
        queries_s: each row's query time in seconds (float64), in row order.
        frames_s: the window's frames' presentation times in seconds, ascending.

    Returns:
        An int64 array: per row, the position of its frame in the window, or -1 where no frame
        is within the tolerance (LeRobot raises ``FrameTimestampError`` on that row).
    """
    import numpy as np

    queries = np.asarray(queries_s, dtype=np.float64)
    frames = np.asarray(frames_s, dtype=np.float64)
    if not len(frames):
        return np.full(len(queries), -1, dtype=np.int64)
    right = np.clip(np.searchsorted(frames, queries), 0, len(frames) - 1)
    left = np.clip(right - 1, 0, len(frames) - 1)
    nearest = np.where(np.abs(frames[left] - queries) <= np.abs(frames[right] - queries), left, right)
    return np.where(np.abs(frames[nearest] - queries) < tolerance_s, nearest, -1).astype(np.int64)


def describe_positions(positions) -> str:
    """A short description of a row-to-frame map for messages: ``rows 0-4 read frames 0, 2, 4, 6, 8``."""
    shown = ", ".join(str(int(p)) if p >= 0 else "none" for p in list(positions)[:6])
    more = ", ..." if len(positions) > 6 else ""
    return f"rows 0-{len(positions) - 1} read frames {shown}{more}"


# -- columns cast to their declared types ------------------------------------------------------

# The dtype strings ``datasets.Value`` accepts beside pyarrow's own aliases (``float32``,
# ``int64``, ``bool``, ``string``, ...), as ``datasets`` maps them.
_DATASETS_ALIASES = {"float": "float32", "double": "float64", "half": "float16"}


def declared_leaf_type(dtype: str) -> pa.DataType | None:
    """The arrow type ``datasets.Value(dtype)`` holds (what LeRobot casts a value feature's
    column to when it loads the data), or None for a dtype ``datasets`` does not know."""
    try:
        kind = pa.type_for_alias(_DATASETS_ALIASES.get(dtype, dtype))
    except (ValueError, KeyError):
        return None
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind) or pa.types.is_time(kind) or pa.types.is_duration(kind):
        return None  # not a value LeRobot returns as a tensor or a string
    return kind


def declared_column_type(stored: pa.DataType, leaf: pa.DataType) -> pa.DataType:
    """``stored`` with its values (the innermost type under any lists) replaced by ``leaf``:
    LeRobot's ``get_hf_features_from_features`` fixes each value feature's element type; its
    list nesting is its shape's, which the packer checks apart (values per frame)."""
    if isinstance(stored, pa.ExtensionType):
        stored = stored.storage_type
    if pa.types.is_fixed_size_list(stored):
        return pa.list_(declared_column_type(stored.value_type, leaf), stored.list_size)
    if pa.types.is_large_list(stored):
        return pa.large_list(declared_column_type(stored.value_type, leaf))
    if pa.types.is_list(stored):
        return pa.list_(declared_column_type(stored.value_type, leaf))
    return leaf


def cast_as_declared(column: pa.ChunkedArray | pa.Array, leaf: pa.DataType, *, where: str) -> pa.ChunkedArray | pa.Array:
    """A value column as LeRobot loads it: cast to its declared element type as ``datasets``
    casts (pyarrow's safe cast: int64 -> float32, 0/1 -> bool, "1.5" -> 1.5; a value that does
    not convert exactly fails there too). Returns ``column`` itself when it already holds that.

    Raises:
        FormatError: a value the cast refuses (LeRobot's load fails on it as well): names
            ``where``, the types and the first refusal.
    """
    target = declared_column_type(column.type, leaf)
    if column.type == target:
        return column
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise FormatError(
            f"{where}: holds {str(column.type)[:80]}, which cannot be cast to the declared {leaf} as LeRobot casts it "
            f"({str(err)[:160]}); LeRobot fails to load it too: fix the column, or its dtype in meta/info.json"
        ) from None


# -- a dataset's rows ---------------------------------------------------------------------------

ROW_COLUMNS = ("index", "episode_index", "frame_index", "timestamp", "task_index")
"""The columns every LeRobot row holds: rows are found (episode, frame) and checked by them."""


def check_row_columns(table: pa.Table, *, where: str) -> None:
    """A data file holds every ``ROW_COLUMNS`` column, without nulls (LeRobot's ``datasets``
    load refuses a file without a declared column; a null places a row nowhere).

    Raises:
        FormatError: names the file and the columns.
    """
    absent = [c for c in ROW_COLUMNS if c not in table.column_names]
    if absent:
        raise FormatError(
            f"{where}: the data parquet has no column {', '.join(absent)}, which every LeRobot row holds; "
            "write the dataset again with LeRobot (or add the column)"
        )
    empty = [c for c in ROW_COLUMNS if table[c].null_count]
    if empty:
        raise FormatError(
            f"{where}: column {', '.join(empty)} holds nulls; every LeRobot row has its {empty[0]}: "
            "write the dataset again with LeRobot (or fill the column)"
        )


def row_columns_as_declared(table: pa.Table, leaves: dict[str, pa.DataType], *, where: str) -> pa.Table:
    """The ``ROW_COLUMNS`` cast as LeRobot loads them (``cast_as_declared``); each but
    ``timestamp`` must then hold integers.

    Raises:
        FormatError: a cast LeRobot's load refuses too, or a row column that is not integers.
    """
    for name in ROW_COLUMNS:
        if name in leaves:
            cast = cast_as_declared(table[name], leaves[name], where=f"{where}: column {name!r}")
            table = table.set_column(table.schema.get_field_index(name), pa.field(name, cast.type), cast)
        if name != "timestamp" and not pa.types.is_integer(table[name].type):
            raise FormatError(
                f"{where}: column {name} holds {table[name].type}, not integers (meta/info.json declares no integer "
                "type for it either); write the dataset again with LeRobot"
            )
    return table


def episode_spans(table: pa.Table) -> dict[int, tuple[int, int]]:
    """``{episode: (first row, rows)}`` of a data file: LeRobot writes each episode's rows
    contiguously.

    Raises:
        FormatError: an episode's rows interleaved with another's.
    """
    import numpy as np

    episodes = table["episode_index"].to_numpy()
    if len(episodes) == 0:
        return {}
    change = np.flatnonzero(np.diff(episodes)) + 1
    starts = np.concatenate([[0], change])
    counts = np.diff(np.concatenate([starts, [len(episodes)]]))
    values = episodes[starts]
    if len(set(values.tolist())) != len(values):
        raise FormatError("episode rows are interleaved in a data file; LeRobot writes them contiguously")
    return {int(v): (int(a), int(c)) for v, a, c in zip(values, starts, counts)}


def values_per_frame(kind: pa.DataType, column: pa.ChunkedArray) -> set[int] | None:
    """The distinct numbers of values per row of a (nested) list column; {1} for a scalar;
    None for types without a fixed element count (strings, structs)."""
    import pyarrow.compute as pc

    if pa.types.is_fixed_size_list(kind):
        inner = values_per_frame(kind.value_type, pc.list_flatten(column)) if len(column) else {1}  # pyright: ignore[reportAttributeAccessIssue]
        return None if inner is None or len(inner) != 1 else {kind.list_size * next(iter(inner))}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = set(pc.unique(pc.list_value_length(column)).to_pylist())  # pyright: ignore[reportAttributeAccessIssue]
        inner = values_per_frame(kind.value_type, pc.list_flatten(column)) if len(column) else {1}  # pyright: ignore[reportAttributeAccessIssue]
        if inner is None or len(inner) != 1 or None in lengths:
            return None if inner is None else {-1}
        return {n * next(iter(inner)) for n in lengths}
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return {1}
    return None


def frame_ranges(values: list[int], limit: int = 10) -> str:
    """``[1, 2, 3, 7]`` as ``1-3,7`` (the first ``limit`` runs, then how many more): frames
    named in a message."""
    runs: list[str] = []
    start = previous = None
    for value in values:
        if previous is not None and value == previous + 1:
            previous = value
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = value
    if start is not None:
        runs.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(runs[:limit]) + (f" and {len(runs) - limit} more runs" if len(runs) > limit else "")


def check_row_values(rows: pa.Table, features, *, start: int, stop: int, where: str) -> None:
    """What an episode's rows hold against what its dataset declares, as LeRobot would read
    them: no null in a feature's column (LeRobot's tensors fail on one), a feature of shape
    ``[1]`` stored as a value and any other as a list, each feature's values per frame its
    shape's product, and ``index`` running over ``[start, stop)`` (the episode's
    ``dataset_from_index``, ``dataset_to_index``: LeRobot's windows clamp to them).

    Raises:
        FormatError: names ``where`` (file and episode), the column, what was found and declared.
    """
    for name in features:
        if name in rows.column_names and rows[name].null_count:
            frames = [f for f, null in enumerate(rows[name].is_null().to_pylist()) if null]
            raise FormatError(
                f"{where}: column {name} holds no value (null) at frame_index {frame_ranges(frames)}; LeRobot fails "
                "to read those rows: fill them, or leave the episode out (--episodes)"
            )
    if not rows.num_rows:
        return
    for name, feature in features.items():
        if feature.kind != "value" or name not in rows.column_names:
            continue
        shape, kind = list(feature.shape), rows[name].type
        if shape != [1] and not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
            # datasets loads a feature of shape [1] as a value, any other as a sequence or an
            # ArrayND, which a column of one value a row cannot be cast to.
            raise FormatError(
                f"{where}: column {name} holds one value a frame; meta/info.json declares shape {shape}, which "
                "LeRobot loads as a sequence or an array and fails to cast it to: declare shape [1]"
            )
    for name, feature in features.items():
        if feature.kind != "value" or name not in rows.column_names or None in feature.shape:
            continue  # language lists have no fixed number of values
        found = values_per_frame(rows[name].type, rows[name])
        if found is not None and found != {feature.elements}:
            raise FormatError(
                f"{where}: column {name} holds {sorted(found)[:5]} values per frame; meta/info.json "
                f"declares shape {list(feature.shape)} ({feature.elements} values)"
            )
    if "index" in rows.column_names:
        first, last = rows["index"][0].as_py(), rows["index"][rows.num_rows - 1].as_py()
        if stop - start != rows.num_rows or first != start or last != stop - 1:
            raise FormatError(
                f"{where}: rows have index {first}..{last}; the episodes metadata says "
                f"dataset_from_index {start}, dataset_to_index {stop}"
            )


# -- meta/stats.json ---------------------------------------------------------------------------


def stats_problems(stats: object) -> dict[str, str]:
    """What is wrong with each feature's statistics in a ``meta/stats.json`` object, as LeRobot
    would hand them to a policy's normalisation: non-finite values (NaN, inf), a negative
    ``std`` or ``count``, ``min`` above ``max``, or statistics that are not numbers. LeRobot
    reads all of these without a word (``load_stats`` casts them to arrays).

    Returns:
        ``{feature: what is wrong}`` (one short clause per feature), empty when sound.
    """
    import numpy as np

    if not isinstance(stats, dict):
        return {}
    problems: dict[str, str] = {}
    for key, values in stats.items():
        if not isinstance(values, dict):
            continue
        found: list[str] = []
        arrays: dict[str, np.ndarray] = {}
        for name, value in values.items():
            try:
                array = np.asarray(value, dtype=np.float64)
            except (ValueError, TypeError):
                found.append(f"{name} is not numbers")
                continue
            arrays[name] = array
            bad = int(array.size - np.isfinite(array).sum())
            if bad:
                kinds = sorted({"NaN" if np.isnan(v) else "inf" for v in array.reshape(-1) if not np.isfinite(v)})
                found.append(f"{name} holds {'/'.join(kinds)} ({bad} of {array.size} values)")
        for name in ("std", "count"):
            if name in arrays and bool((arrays[name] < 0).any()):
                found.append(f"{name} is negative")
        low, high = arrays.get("min"), arrays.get("max")
        if low is not None and high is not None and low.shape == high.shape and bool((low > high).any()):
            found.append(f"min exceeds max in {int((low > high).sum())} of {low.size} values")
        if found:
            problems[str(key)] = ", ".join(found)
    return problems


# -- meta/tasks.parquet --------------------------------------------------------------------


@dataclass(frozen=True)
class TasksLayout:
    """Where ``pd.read_parquet`` (what LeRobot 0.6.1's ``load_tasks`` calls) finds a tasks
    file's strings.

    Attributes:
        task_column: the column holding the task strings: the pandas index column when the
            file's pandas metadata names one (``task`` from LeRobot 0.5+, ``__index_level_0__``
            from LeRobot 0.4.x), else a column named ``task``.
        lerobot_task_is_row_number: the file has no pandas index column, so LeRobot's index is
            the row number and ``item["task"]`` is that number, not the string; we give the
            string (said by ``check`` and in docs/FORMAT.md).
    """

    task_column: str
    lerobot_task_is_row_number: bool


def tasks_layout(schema: pa.Schema, *, where: str) -> TasksLayout:
    """Which column of a ``meta/tasks.parquet`` holds the task strings, as LeRobot reads it.

    Raises:
        FormatError: no integer ``task_index`` column, or no column of task strings (names
            the columns found).
    """
    names = schema.names
    if "task_index" not in names or not pa.types.is_integer(schema.field("task_index").type):
        found = schema.field("task_index").type if "task_index" in names else "no task_index"
        raise FormatError(f"{where}: needs an integer task_index column and the task strings, found {names[:10]} ({found})")
    index = _pandas_index_column(schema)
    if index is not None and index in names and index != "task_index":
        column, row_number = index, False
    elif "task" in names:
        column, row_number = "task", index is None or index not in names
    else:
        raise FormatError(f"{where}: needs columns task_index and task (or a pandas index of task strings), found {names[:10]}")
    kind = schema.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise FormatError(f"{where}: the task strings ({column}) must be strings, found {kind}")
    return TasksLayout(column, row_number)


def task_strings(task_index: pa.ChunkedArray | pa.Array, tasks: pa.ChunkedArray | pa.Array, *, where: str) -> dict[int, str]:
    """``{task_index: task}`` of a tasks file's two columns, as LeRobot looks a task up:
    ``tasks.iloc[task_index]``, by row position. Every file LeRobot writes numbers its rows
    0..n-1 in order, where position and ``task_index`` agree; a file where they differ would
    give other tasks than it says, and is refused.

    Raises:
        FormatError: nulls, or ``task_index`` values other than the row numbers in order.
    """
    indices = task_index.to_pylist()
    strings = tasks.to_pylist()
    if any(s is None for s in strings) or any(i is None for i in indices):
        raise FormatError(f"{where}: task_index and the task strings may not be null")
    if indices != list(range(len(indices))):
        first = next(k for k, i in enumerate(indices) if i != k)
        raise FormatError(
            f"{where}: row {first} has task_index {indices[first]}; LeRobot looks a task up by its row "
            "(tasks.iloc[task_index]), so the rows must be ordered by task_index 0, 1, 2, ...: rewrite the file "
            "sorted by task_index"
        )
    return dict(zip(indices, strings, strict=True))


@dataclass(frozen=True)
class LeRobotTasks:
    """A ``meta/tasks.parquet`` as LeRobot reads it.

    Attributes:
        names: ``{task_index: task}``.
        layout: where the strings were found (``tasks_layout``).
    """

    names: dict[int, str]
    layout: TasksLayout


def read_tasks(data: bytes, *, where: str, max_rows: int, max_task_bytes: int) -> LeRobotTasks:
    """A LeRobot ``meta/tasks.parquet`` (any writer LeRobot reads: 0.4.x's unnamed pandas
    index, 0.5+'s ``task`` index, plain pyarrow's ``task`` column), read within bounds: at
    most ``max_rows`` tasks of at most ``max_task_bytes`` each, decoding to at most
    ``MAX_EXPANSION`` times the file (``parquet.read_bounded``).

    Raises:
        FormatError: not parquet, beyond a bound, or what ``tasks_layout`` and
            ``task_strings`` refuse (names ``where``).
    """
    from lerobot_shards.core.format.indexes import check_strings
    from lerobot_shards.core.format.parquet.bounded import read_bounded, read_parquet_schema

    layout = tasks_layout(read_parquet_schema(data, where=where), where=where)
    table = read_bounded(data, where=where, columns=["task_index", layout.task_column], max_rows=max_rows)
    check_strings(table[layout.task_column], limit=max_task_bytes, where=f"{where}: column {layout.task_column}")
    return LeRobotTasks(task_strings(table["task_index"], table[layout.task_column], where=where), layout)


def _pandas_index_column(schema: pa.Schema) -> str | None:
    """The one index column pandas metadata names, or None (a RangeIndex, no metadata)."""
    raw = (schema.metadata or {}).get(b"pandas")
    if raw is None or len(raw) > 1 << 20:
        return None
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    columns = meta.get("index_columns") if isinstance(meta, dict) else None
    if isinstance(columns, list) and len(columns) == 1 and isinstance(columns[0], str):
        return columns[0]
    return None


__all__ = [
    "CODEBASE_MAJOR",
    "ROW_COLUMNS",
    "check_row_columns",
    "check_row_values",
    "episode_spans",
    "frame_ranges",
    "row_columns_as_declared",
    "values_per_frame",
    "V20_TO_V21",
    "V21_TO_V30",
    "CodebaseVersion",
    "LeRobotTasks",
    "TasksLayout",
    "cast_as_declared",
    "converter_hint",
    "declared_column_type",
    "declared_leaf_type",
    "describe_positions",
    "lerobot_frame_positions",
    "parse_codebase_version",
    "read_codebase_version",
    "is_fractional_fps",
    "parse_fps",
    "video_rate",
    "read_tasks",
    "stats_problems",
    "task_strings",
    "tasks_layout",
]
