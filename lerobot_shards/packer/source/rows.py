"""An episode's rows, read as LeRobot reads them, whatever file layout holds them.

A format says where an episode's rows lie (a data file, shared with other episodes in LeRobot
v3, its own in v2.1) and what its record says (length, global index range, tasks); a
``RowReader`` reads them: the file through the bounded reader (the last file kept, parsed once
for all of its episodes), every row column present, non-null and cast as LeRobot loads it
(``core.format.lerobot_reading``), the episode's rows sliced out (contiguous, as LeRobot writes
them), filled where ``--on-frame-mismatch pad`` asks, checked against the record and the
features, and cast to the declared types.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import image_column_bytes, open_image
from lerobot_shards.core.format.features import (
    LANGUAGE_COLUMNS,
    Features,
    check_language_type,
    image_column_type_ok,
    value_column_type_ok,
)
from lerobot_shards.core.format.lerobot_reading import (
    cast_as_declared,
    check_row_columns,
    check_row_values,
    declared_leaf_type,
    episode_spans,
    frame_ranges,
    row_columns_as_declared,
)
from lerobot_shards.core.format.limits import MAX_DATASET_FRAMES, MAX_EPISODE_TASKS
from lerobot_shards.core.format.parquet import feature_budget
from lerobot_shards.packer.errors import MissingRowsError, SourceError
from lerobot_shards.packer.source.files import file_key, parquet_schema, read_source_file, read_source_table
from lerobot_shards.packer.source.records import EpisodeRecord


@dataclass(frozen=True)
class SchemaDrift:
    """Tabular features the dataset declares vs the columns its data files hold."""

    only_in_info: list[str]
    only_in_parquet: list[str]
    columns: list[str]

    def __bool__(self) -> bool:
        return bool(self.only_in_info or self.only_in_parquet)


class RowReader:
    """Reads episodes' rows (see the module docstring).

    Args:
        features: the dataset's features (what the rows must hold, and their declared types).
        fps: its rate (a filled row's ``timestamp`` is ``frame_index / fps``).
        episodes: each episode's record.
        tasks: ``{task_index: task}``.
        declared_in: the file that declares the features (named in refusals).
    """

    def __init__(
        self,
        features: Features,
        fps: float,
        episodes: Mapping[int, EpisodeRecord],
        tasks: Mapping[int, str],
        *,
        declared_in: Path,
    ):
        self.features, self.fps, self.episodes, self.tasks = features, fps, episodes, tasks
        self.declared_in = declared_in
        self._data_cache: tuple[tuple, pa.Table, dict[int, tuple[int, int]]] | None = None

    def rows(self, episode_index: int, path: Path, *, fill_missing: bool = False) -> pa.Table:
        """The episode's rows from the data file ``path``, all columns with their declared types.

        ``fill_missing`` (``--on-frame-mismatch pad``): rows the record's length says the
        episode has but the file lacks (at its end or in its middle) are filled, each from the
        row before it (the first from the row after), with their own ``frame_index``, ``index``
        and ``timestamp``: every row keeps its own video frame.

        Raises:
            MissingRowsError: fewer rows than the record's length, their ``frame_index`` values
                naming which are missing (without ``fill_missing``).
            SourceError: the data file is missing or unreadable, holds more rows for the episode
                than its length, or repeats a frame.
        """
        if not path.is_file():
            raise SourceError(f"{path}: missing (data file of episode {episode_index})")
        table, spans = self._data(path)
        # LeRobot writes each episode's rows contiguously: slice instead of filtering per
        # episode (a filter per episode is quadratic in the rows of a 100 MB data file).
        start, count = spans.get(episode_index, (0, 0))
        rows = table.slice(start, count)
        expected = self.episodes[episode_index].length
        if rows.num_rows and rows["frame_index"].to_pylist() != list(range(rows.num_rows)):
            rows = rows.sort_by("frame_index")
        if rows.num_rows < expected:
            present = rows["frame_index"].to_pylist() if "frame_index" in rows.column_names else []
            missing = sorted(set(range(expected)) - {f for f in present if isinstance(f, int)})
            if not fill_missing:
                raise MissingRowsError(
                    f"{path}: episode {episode_index} has {rows.num_rows} rows, metadata says length {expected} "
                    f"(frame_index {frame_ranges(missing)} missing)",
                    episode=episode_index,
                    missing=tuple(missing),
                    rows=rows.num_rows,
                )
            rows = self._filled(episode_index, rows, expected, path)
        elif rows.num_rows > expected:
            raise SourceError(f"{path}: episode {episode_index} has {rows.num_rows} rows, metadata says length {expected}")
        record = self.episodes[episode_index]
        try:
            check_row_values(
                rows,
                self.features,
                start=record.dataset_from_index,
                stop=record.dataset_to_index,
                where=f"{path}: episode {episode_index}",
            )
        except FormatError as err:
            raise SourceError(str(err)) from None
        return self._as_declared(episode_index, rows, path)

    def _data(self, path: Path) -> tuple[pa.Table, dict[int, tuple[int, int]]]:
        """The data file's rows (row columns checked and cast) and each episode's span in it;
        the last file is kept, keyed by its size and time too (``open_source`` keeps a parsed
        source for a process, which may pack the same root again after its data changed)."""
        key = file_key(path)
        if self._data_cache is None or self._data_cache[0] != key:
            table = read_source_table(
                read_source_file(path, "data parquet"),
                path,
                "data parquet",
                max_rows=MAX_DATASET_FRAMES,
                values_per_row=self._values_per_row,
            )
            try:
                check_row_columns(table, where=str(path))
                table = row_columns_as_declared(table, self._declared_leaves, where=str(path))
                spans = episode_spans(table)
            except FormatError as err:
                text = str(err)
                raise SourceError(text if text.startswith(str(path)) else f"{path}: {text}") from None
            self._data_cache = (key, table, spans)
        return self._data_cache[1], self._data_cache[2]

    @functools.cached_property
    def _declared_leaves(self) -> dict[str, pa.DataType]:
        """Each value feature's declared element type (``declared_leaf_type``).

        Raises:
            SourceError: a dtype ``datasets`` does not know (LeRobot cannot load the dataset).
        """
        leaves = {}
        for key, spec in self.features.items():
            if spec.kind != "value":
                continue
            leaf = declared_leaf_type(spec.dtype)
            if leaf is None:
                raise SourceError(
                    f"{self.declared_in}: feature {key!r} has dtype {spec.dtype[:40]!r}, which is no type LeRobot "
                    "(datasets.Value) loads a column as: use one of float32, float64, int64, int32, bool, string"
                )
            leaves[key] = leaf
        return leaves

    @functools.cached_property
    def _values_per_row(self) -> dict[str, int]:
        """What a data parquet's columns may hold per row (the reader's own caps)."""
        return feature_budget(self.features)

    def _as_declared(self, episode_index: int, rows: pa.Table, path: Path) -> pa.Table:
        """``rows`` with every value feature cast to its declared type, as LeRobot loads them
        (``cast_as_declared``): a pack stores what LeRobot returns, not what the file holds."""
        for key, leaf in self._declared_leaves.items():
            if key not in rows.column_names:
                continue
            column = rows[key]
            try:
                cast = cast_as_declared(column, leaf, where=f"{path}: episode {episode_index}, column {key!r}")
            except FormatError as err:
                raise SourceError(str(err)) from None
            if cast is not column:
                rows = rows.set_column(rows.schema.get_field_index(key), pa.field(key, cast.type), cast)
        return rows

    def _filled(self, episode_index: int, rows: pa.Table, length: int, path: Path) -> pa.Table:
        """``rows`` with the missing frames of ``0..length-1`` filled (``rows``)."""
        frames = rows["frame_index"].to_pylist() if "frame_index" in rows.column_names else []
        if (
            not rows.num_rows
            or any(not isinstance(f, int) or not 0 <= f < length for f in frames)
            or len(set(frames)) != len(frames)
        ):
            held = frame_ranges(sorted({f for f in frames if isinstance(f, int)})) or "(none)"
            raise SourceError(
                f"{path}: episode {episode_index}: frame_index {held} cannot be filled to the metadata length {length} "
                "(no rows, repeated or out-of-range frames)"
            )
        at = {f: i for i, f in enumerate(frames)}
        source_row, last = [], None
        for frame in range(length):
            last = at.get(frame, last)
            source_row.append(last if last is not None else at[min(at)])
        filled = rows.take(pa.array(source_row, pa.int64()))
        start = self.episodes[episode_index].dataset_from_index
        own = {
            "frame_index": range(length),
            "index": range(start, start + length),
            "timestamp": [f / self.fps for f in range(length)],
        }
        for name, values in own.items():
            if name in filled.column_names:
                filled = filled.set_column(
                    filled.schema.get_field_index(name), name, pa.array(values, filled.schema.field(name).type)
                )
        return filled

    # -- what the rows must be ----------------------------------------------------------------
    def check_rows(self, episode_index: int, rows: pa.Table, path: Path, *, tasks_file: Path) -> None:
        """Check an episode's rows before packing them: its pictures (``_check_images``), and
        every ``task_index`` names a task of the task list (a reader resolves each sample's task
        string through it).

        Raises:
            SourceError: unknown task indices (names the data file and episode).
        """
        self._check_images(episode_index, rows, path)
        if "task_index" not in rows.column_names or not rows.num_rows:
            return
        unknown = sorted(set(rows["task_index"].to_pylist()) - set(self.tasks))
        if unknown:
            raise SourceError(
                f"{path}: episode {episode_index} has task_index {unknown[:10]}, which "
                f"{tasks_file} does not define (it has {len(self.tasks)} tasks)"
            )

    def _check_images(self, episode_index: int, rows: pa.Table, path: Path) -> None:
        """Every picture of an image feature is stored as LeRobot stores it (embedded bytes in
        a ``{bytes, path}`` struct) in a format readers open, exactly of its feature's shape
        (headers only: nothing is decoded here).

        Raises:
            SourceError: names the data file, episode, feature, frame and what is wrong.
        """
        for key in self.features.image_keys:
            if key not in rows.column_names or not rows.num_rows:
                continue
            where = f"{path}: episode {episode_index}, image feature {key}"
            if not image_column_type_ok(rows[key].type):
                raise SourceError(f"{where}: stored as {rows[key].type}; LeRobot stores pictures as {{bytes, path}} structs")
            camera = self.features[key].camera
            assert camera is not None  # an image feature is a camera (parse_feature)
            for frame, cell in enumerate(rows[key].to_pylist()):
                data = image_column_bytes(cell)
                if data is None:
                    raise SourceError(
                        f"{where}, frame {frame}: no embedded picture bytes (a path only); re-save the dataset "
                        "with LeRobot, which embeds them"
                    )
                try:
                    open_image(data, camera=camera, where=f"{where}, frame {frame}", load=False)
                except FormatError as err:
                    raise SourceError(str(err)) from None

    def episode_tasks(self, episode_index: int, rows: pa.Table, path: Path) -> list[str]:
        """The episode's task strings: its record's, or, where the source lists none, the tasks
        of its rows' ``task_index`` in order of first appearance (``check_rows`` has checked
        every index names a task)."""
        recorded = self.episodes[episode_index].tasks
        if recorded is not None:
            return list(recorded)
        if "task_index" not in rows.column_names or not rows.num_rows:
            return []
        distinct = list(dict.fromkeys(rows["task_index"].to_pylist()))
        if len(distinct) > MAX_EPISODE_TASKS:
            raise SourceError(
                f"{path}: episode {episode_index} has {len(distinct)} distinct tasks; at most {MAX_EPISODE_TASKS} are allowed"
            )
        return [self.tasks[int(i)] for i in distinct]

    def schema_drift(self, first_episode_of: Mapping[Path, int]) -> SchemaDrift:
        """The tabular features declared against the columns of the data files given (each with
        an episode it holds, named in errors; parquet footers only).

        Raises:
            SourceError: a data file is missing or is not a readable parquet file, a column's
                type is not what its feature (or no feature) allows, or an image feature's
                column is missing (a camera: leaving it out would drop it in silence).
        """
        _ = self._declared_leaves  # a dtype LeRobot cannot load is refused before anything is written
        # Image features (dtype "image") live in the data parquet too; only videos do not.
        declared = [k for k, f in self.features.items() if not f.is_video]
        present: list[str] = []
        for path, episode in sorted(first_episode_of.items()):
            schema = parquet_schema(path, episode)
            self._check_column_types(schema, path)
            present += [name for name in schema.names if name not in present]
        lost = [k for k in declared if k not in present and self.features[k].is_image]
        if lost:
            raise SourceError(
                f"{sorted(first_episode_of)[0]}: image feature(s) {lost} declared in meta/info.json are not columns of "
                "the data parquet; LeRobot cannot load the dataset: restore the column from the recording, or remove "
                "the feature from meta/info.json to pack without it"
            )
        return SchemaDrift(
            only_in_info=[k for k in declared if k not in present],
            only_in_parquet=[c for c in present if c not in declared],
            columns=present,
        )

    def _check_column_types(self, schema: pa.Schema, path: Path) -> None:
        """Columns whose type the features fix (LeRobot's language rows, pictures) have it, and
        every other column is a value LeRobot returns as a tensor or text (a struct or bytes
        column there, pictures without their image feature, would reach samples as raw bytes).

        Raises:
            SourceError: names the file, the column, the type found and the one expected.
        """
        for name in LANGUAGE_COLUMNS:
            if name in schema.names:
                try:
                    check_language_type(name, schema.field(name).type, where=str(path))
                except FormatError as err:
                    raise SourceError(str(err)) from None
        for key in self.features.image_keys:
            if key in schema.names and not image_column_type_ok(schema.field(key).type):
                raise SourceError(
                    f"{path}: image feature {key!r} is stored as {str(schema.field(key).type)[:120]}; LeRobot stores "
                    "pictures as {bytes, path} structs"
                )
        for name in schema.names:
            feature = self.features.get(name)
            if name in LANGUAGE_COLUMNS or (feature is not None and feature.kind != "value"):
                continue
            if not value_column_type_ok(schema.field(name).type):
                what = "feature" if feature is not None else "column (not in meta/info.json)"
                raise SourceError(
                    f"{path}: {what} {name!r} of dtype {feature.dtype if feature else '?'!r} holds "
                    f"{str(schema.field(name).type)[:120]}, which is no value LeRobot returns (numbers, bools, text or "
                    "lists of them); pictures need their feature declared with dtype 'image'"
                )


def first_episode_of(paths: Sequence[tuple[int, Path]]) -> dict[Path, int]:
    """Each data file with the first of its episodes (``(episode, path)`` pairs in order)."""
    found: dict[Path, int] = {}
    for episode, path in paths:
        found.setdefault(path, episode)
    return found


__all__ = ["RowReader", "SchemaDrift", "first_episode_of"]
