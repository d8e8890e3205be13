"""Reading untrusted parquet with a bound on what it decodes to, checked before decoding.

Every parquet file of a dataset, a mixture or a LeRobot source is read through here (or
through ``row_groups``, which uses ``group_cost``): the page headers of every column chunk
are walked first (``pages.chunk_cost``) and the values and decoded bytes they add up to are
checked against a ``Budget``, in three ways:

- values per row: a flat column has one per row; a list column at most what the caller
  allows (``values_per_row``: a feature's shape, ``MAX_EPISODE_TASKS``...), so a row holding
  a list of millions of copies of one value is refused before it is decoded;
- decoded bytes: at most ``Budget.max_bytes``, by default ``expansion_budget(file bytes)``
  (``MAX_EXPANSION`` times what was read, at least ``EXPANSION_FLOOR_BYTES``, at most
  ``MAX_DECODED_BYTES``);
- strings: dictionary-encoded string columns are read as dictionaries (indices + the distinct
  strings), measured exactly, and only then turned into plain strings.

Pure: bytes in, Arrow out (through ``arrow_io``'s Arrow-owned buffers); callers do the I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as _compute
import pyarrow.parquet as pq

from lerobot_shards.core.address_space import at_limit
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.limits import EXPANSION_FLOOR_BYTES, MAX_DECODED_BYTES, MAX_EXPANSION, MAX_FEATURE_ELEMENTS
from lerobot_shards.core.format.parquet.arrow_io import arrow_buffer, check_footer
from lerobot_shards.core.format.parquet.pages import ChunkCost, check_writer, chunk_cost

# pyarrow.compute makes its functions at import; a static checker cannot see them.
pc: Any = _compute

_EMPTY_CHUNK_BYTES = 4096


def expansion_budget(encoded_bytes: int) -> int:
    """The decoded bytes a read of ``encoded_bytes`` may produce by default."""
    return min(MAX_DECODED_BYTES, max(EXPANSION_FLOOR_BYTES, MAX_EXPANSION * encoded_bytes))


@dataclass(frozen=True)
class Budget:
    """What one read may decode to.

    Attributes:
        max_bytes: decoded Arrow bytes of every column read (``None``: the expansion budget of
            the bytes read).
        values_per_row: leaf column path -> values allowed per row; flat columns allow one,
            list columns not named here ``MAX_FEATURE_ELEMENTS``.
    """

    max_bytes: int | None = None
    values_per_row: Mapping[str, int] = field(default_factory=dict)
    # Values that honest files back with bytes that do not compress (top-level column -> the
    # fewest encoded bytes one of its values takes: a SHA-256 digest is 32 random bytes): a column
    # holding more values than its chunks' bytes can back is refused before decoding.
    backed: Mapping[str, float] = field(default_factory=dict)
    # What the refusal of an unbacked column adds (an honest writer that once wrote such files: what fixes them).
    backed_note: str = ""
    # Dictionary pages, on top of ``max_bytes``: at most this many decoded bytes per column chunk
    # (what the writer's dictionary page limit allows), and never more than the expansion
    # budget of the bytes read. None: dictionary pages count against ``max_bytes`` itself.
    dictionary_chunk_bytes: int | None = None
    # Every row group but the last holds at least this many rows (what the writer does): a file
    # cut into more groups (each adding dictionary pages) is refused. None: any.
    min_group_rows: int | None = None
    # Columns whose decoded size no row count gives (free text: task strings), on top of
    # ``max_bytes``: at most this many times the bytes of their own chunks (text compresses a few
    # times), so what they may add is paid for in the file's bytes.
    expanding: Mapping[str, float] = field(default_factory=dict)


def leaf_columns(metadata: pq.FileMetaData, *, where: str) -> list[tuple[str, str, int]]:
    """``(leaf path, top-level column, repetition level)`` of every leaf column, in order.

    Raises:
        FormatError: the Arrow schema and the parquet leaves disagree (pyarrow would too).
    """
    owners: list[str] = []
    for arrow_field in metadata.schema.to_arrow_schema():
        owners += [arrow_field.name] * _leaf_count(arrow_field.type)
    if len(owners) != metadata.num_columns:
        raise FormatError(f"{where}: its schema has {metadata.num_columns} leaf columns, its Arrow schema {len(owners)}")
    return [
        (metadata.schema.column(j).path, owners[j], metadata.schema.column(j).max_repetition_level)
        for j in range(metadata.num_columns)
    ]


def _leaf_count(kind: pa.DataType) -> int:
    if pa.types.is_struct(kind):
        return sum(_leaf_count(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _leaf_count(kind.key_type) + _leaf_count(kind.item_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _leaf_count(kind.value_type)
    return 1


def check_costs(
    costs: list[tuple[int, ChunkCost]], leaves: list[tuple[str, str, int]], *, rows: int, budget: Budget, encoded: int, where: str
) -> int:
    """Check chunk costs (``(leaf number, cost)`` pairs) against ``budget``; returns the
    decoded-bytes bound.

    Raises:
        FormatError: a column with more values than its rows allow, or more decoded bytes
            than the budget (names the column, the counts and the limit).
    """
    values = [0] * len(leaves)
    encoded_of = [0] * len(leaves)
    for leaf, cost in costs:
        values[leaf] += cost.values
        encoded_of[leaf] += cost.encoded_bytes
    for (path, owner, repeated), count in zip(leaves, values):
        per_row = budget.values_per_row.get(owner, MAX_FEATURE_ELEMENTS if repeated else 1)
        if count > rows * per_row:
            raise FormatError(
                f"{where}: column {path} holds {count} values in {rows} rows; at most {per_row} per row are allowed"
            )
    for owner, fewest in budget.backed.items():
        held = sum(count for (_, leaf_owner, _), count in zip(leaves, values) if leaf_owner == owner)
        backing = sum(size for (_, leaf_owner, _), size in zip(leaves, encoded_of) if leaf_owner == owner)
        # An empty list still takes one level entry: up to one per row may hold no value.
        free = rows if any(repeated for (_, leaf_owner, repeated) in leaves if leaf_owner == owner) else 0
        if held - free > backing / fewest + 1:
            raise FormatError(
                f"{where}: column {owner} holds {held} values in {backing} bytes; an honest one takes at least "
                f"{fewest:g} bytes per value (its values do not compress: digests){budget.backed_note}"
            )
    total = sum(cost.decoded_bytes for _, cost in costs)
    limit = budget.max_bytes if budget.max_bytes is not None else expansion_budget(encoded)
    if budget.max_bytes is not None:
        extra = sum(
            factor * sum(size for (_, leaf_owner, _), size in zip(leaves, encoded_of) if leaf_owner == owner)
            for owner, factor in budget.expanding.items()
        )
        if budget.dictionary_chunk_bytes is not None:
            extra += budget.dictionary_chunk_bytes * len(costs)
        limit += min(expansion_budget(encoded), int(extra))
    if total > limit:
        worst = max((cost for _, cost in costs), key=lambda c: c.decoded_bytes)
        raise FormatError(
            f"{where}: decodes to up to {total} bytes from {encoded} (column {worst.path}: {worst.decoded_bytes}); "
            f"at most {limit} are allowed"
        )
    return total


def group_cost(
    metadata: pq.FileMetaData, group: int, data: memoryview, *, base: int = 0, budget: Budget, where: str
) -> tuple[int, list[str]]:
    """Walk row group ``group``'s pages in ``data`` (file offset ``o`` at ``data[o - base]``)
    and check them against ``budget``.

    Returns:
        ``(decoded-bytes bound, leaf paths of dictionary-encoded string columns)``.

    Raises:
        FormatError: see ``check_costs`` and ``pages.chunk_cost``.
    """
    return _cost(metadata, [group], data, base=base, budget=budget, encoded=None, where=where)


def file_cost(metadata: pq.FileMetaData, data: memoryview, *, budget: Budget, where: str) -> tuple[int, list[str]]:
    """``group_cost`` over every row group of a whole file (``data``), checked as one read."""
    return _cost(metadata, range(metadata.num_row_groups), data, base=0, budget=budget, encoded=len(data), where=where)


def _cost(metadata, groups, data, *, base: int, budget: Budget, encoded: int | None, where: str) -> tuple[int, list[str]]:
    check_writer(metadata, where=where)
    leaves = leaf_columns(metadata, where=where)
    if budget.min_group_rows is not None and metadata.num_row_groups > 1:
        short = [g for g in range(metadata.num_row_groups - 1) if metadata.row_group(g).num_rows < budget.min_group_rows]
        if short:
            raise FormatError(
                f"{where}: row group {short[0]} holds {metadata.row_group(short[0]).num_rows} rows; its writer's "
                f"groups hold at least {budget.min_group_rows} (all but the last)"
            )
    costs = []
    rows = 0
    for group in groups:
        row_group = metadata.row_group(group)
        rows += row_group.num_rows
        for j in range(len(leaves)):
            column = row_group.column(j)
            if row_group.num_rows == 0:
                # An empty table's group: writers leave its chunks without data pages (offset 0)
                # and readers decode nothing of it; a few bytes at most are allowed there.
                if column.total_compressed_size > _EMPTY_CHUNK_BYTES:
                    raise FormatError(
                        f"{where}: an empty row group with {column.total_compressed_size} bytes in column {leaves[j][0]}"
                    )
                continue
            costs.append((j, chunk_cost(data, column, metadata.schema.column(j), base=base, where=where)))
    if encoded is None:
        encoded = sum(c.encoded_bytes for _, c in costs)
    total = check_costs(costs, leaves, rows=rows, budget=budget, encoded=encoded, where=where)
    return total, sorted({c.path for _, c in costs if c.dictionary_strings})


def materialized_bytes(array: pa.Array | pa.ChunkedArray) -> int:
    """Bytes ``array`` takes once its dictionaries are decoded into plain values (exact for
    strings, the data's own size for everything else)."""
    if isinstance(array, pa.ChunkedArray):
        return sum(materialized_bytes(chunk) for chunk in array.chunks)
    kind = array.type
    if pa.types.is_dictionary(kind):
        lengths = pc.binary_length(array.dictionary) if _is_binary_like(kind.value_type) else None
        if lengths is None:
            return len(array) * max(kind.value_type.bit_width // 8, 1)
        # A null index needs no lookup (take gives null, sum skips it): an all-null column has an
        # empty dictionary, where filling the nulls with index 0 would index past its end.
        used = pc.take(lengths.fill_null(0), array.indices)
        return int(pc.sum(used).as_py() or 0) + 8 * len(array)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return 8 * len(array) + materialized_bytes(array.flatten())
    if pa.types.is_struct(kind):
        return len(array) + sum(materialized_bytes(array.field(i)) for i in range(kind.num_fields))
    return array.nbytes


def _is_binary_like(kind: pa.DataType) -> bool:
    return (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
    )


def decode_dictionaries(table: pa.Table, schema: pa.Schema, *, limit: int, where: str) -> pa.Table:
    """Turn the dictionary columns of ``table`` (read with ``read_dictionary``) into the
    types of ``schema``, after checking the bytes that takes.

    Raises:
        FormatError: the decoded table would exceed ``limit`` bytes.
    """
    dictionary_columns = [name for name in table.column_names if _has_dictionary(table.schema.field(name).type)]
    if not dictionary_columns:
        return table
    total = sum(
        materialized_bytes(table[name]) if name in dictionary_columns else table[name].nbytes for name in table.column_names
    )
    if total > limit:
        raise FormatError(f"{where}: its strings decode to {total} bytes; at most {limit} are allowed")
    for name in dictionary_columns:
        index = table.schema.get_field_index(name)
        try:
            target = schema.field(name).type
            table = table.set_column(index, schema.field(name), table[name].cast(target))
        except (pa.ArrowException, KeyError) as err:
            raise FormatError(f"{where}: column {name} does not decode ({err})") from None
    return table


def _has_dictionary(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _has_dictionary(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_has_dictionary(kind.field(i).type) for i in range(kind.num_fields))
    return False


@dataclass(frozen=True)
class CheckedParquet:
    """A parquet file in memory whose pages were shown to fit a budget (``open_bounded``)."""

    buffer: pa.Buffer
    metadata: pq.FileMetaData
    dictionary_paths: list[str]
    limit: int


def open_bounded(
    data: bytes | bytearray | memoryview,
    *,
    where: str,
    max_rows: int,
    rows: int | None = None,
    rows_expected: str = "",
    budget: Budget = Budget(),
) -> CheckedParquet:
    """Check a whole parquet file in ``data`` before anything of it is decoded: its row count
    (at most ``max_rows``; exactly ``rows`` when given, ``rows_expected`` saying where that
    number comes from) and every page of every column against ``budget`` (``check_costs``).

    Raises:
        FormatError: not parquet, another row count, or pages beyond the budget.
    """
    view = memoryview(data).cast("B")
    check_footer(view, where=where)  # counted before pyarrow builds ~1.5 KB per column chunk
    try:
        buffer = arrow_buffer(view)
        metadata = pq.ParquetFile(pa.BufferReader(buffer)).metadata
        found = metadata.num_rows
        if rows is not None and found != rows:
            raise FormatError(f"{where}: {found} rows, {rows_expected or f'{rows} expected'}")
        if found > max_rows:
            raise FormatError(f"{where}: {found} rows, more than the {max_rows} allowed")
        _, dictionary_paths = file_cost(metadata, view, budget=budget, where=where)
    except (pa.ArrowException, OSError, MemoryError) as err:
        if at_limit(err):  # this process at its limit, not a damaged file
            raise
        raise FormatError(f"{where}: not a readable parquet file ({type(err).__name__}: {str(err)[:300]})") from None
    limit = budget.max_bytes if budget.max_bytes is not None else expansion_budget(len(view))
    return CheckedParquet(buffer, metadata, dictionary_paths, limit)


def read_bounded(
    data: bytes | bytearray | memoryview,
    *,
    where: str,
    columns: list[str] | None = None,
    max_rows: int,
    rows: int | None = None,
    rows_expected: str = "",
    budget: Budget = Budget(),
) -> pa.Table:
    """Read a whole parquet file from ``data`` once ``open_bounded`` has checked it.

    Args:
        columns: top-level columns to decode (every column's pages are still checked).

    Returns:
        The table, strings as plain strings.

    Raises:
        FormatError: see ``open_bounded``; strings beyond the budget, or data that does not
            decode.
    """
    checked = open_bounded(data, where=where, max_rows=max_rows, rows=rows, rows_expected=rows_expected, budget=budget)
    try:
        if not checked.dictionary_paths:
            return pq.ParquetFile(pa.BufferReader(checked.buffer)).read(columns=columns, use_threads=False)
        # Dictionary strings: one row group at a time (pyarrow cannot read nested dictionary
        # columns into more than one chunk), each measured, the total within the budget.
        parquet = pq.ParquetFile(pa.BufferReader(checked.buffer), read_dictionary=checked.dictionary_paths)
        schema = checked.metadata.schema.to_arrow_schema()
        groups, left = [], checked.limit
        for group in range(checked.metadata.num_row_groups):
            table = decode_dictionaries(
                parquet.read_row_group(group, columns=columns, use_threads=False), schema, limit=left, where=where
            )
            left -= table.nbytes
            groups.append(table)
        if not groups:
            return parquet.read(columns=columns, use_threads=False).cast(
                pa.schema([schema.field(n) for n in (columns or schema.names)])
            )
        return pa.concat_tables(groups)
    except (pa.ArrowException, OSError, MemoryError, UnicodeDecodeError) as err:
        if at_limit(err):  # this process at its limit, not a damaged file
            raise
        raise FormatError(f"{where}: does not decode ({type(err).__name__}: {str(err)[:300]})") from None


class BoundedColumns:
    """A parquet file checked by ``open_bounded``, read one column at a time: a caller that turns
    each column into its own arrays before reading the next holds those arrays and one column,
    not the whole decoded table beside them. Dictionary-encoded string columns come back as
    dictionaries (indices and the distinct strings) unless ``plain`` asks for strings.

    Attributes:
        schema: the file's Arrow schema (strings as strings).
        num_rows: rows of the file.
    """

    def __init__(self, checked: CheckedParquet, *, where: str):
        self._checked, self._where = checked, where
        self._file = pq.ParquetFile(pa.BufferReader(checked.buffer), read_dictionary=checked.dictionary_paths)
        self.schema = checked.metadata.schema.to_arrow_schema()
        self.num_rows = checked.metadata.num_rows
        self._left = checked.limit

    def column(self, name: str, *, plain: bool = False) -> pa.ChunkedArray:
        """One column, decoded (within what the file's budget has left).

        Raises:
            FormatError: strings beyond the budget, or data that does not decode.
        """
        try:
            table = self._file.read(columns=[name], use_threads=False)
            if plain:
                table = decode_dictionaries(table, self.schema, limit=self._left, where=self._where)
            self._left -= table.nbytes
            return table.column(0)
        except (pa.ArrowException, OSError, MemoryError, UnicodeDecodeError) as err:
            if at_limit(err):  # this process at its limit, not a damaged file
                raise
            raise FormatError(f"{self._where}: column {name} does not decode ({type(err).__name__}: {str(err)[:300]})") from None


def read_bounded_columns(
    data: bytes | bytearray | memoryview,
    *,
    where: str,
    max_rows: int,
    rows: int | None = None,
    rows_expected: str = "",
    budget: Budget = Budget(),
) -> BoundedColumns:
    """``open_bounded``'s checks, then a ``BoundedColumns`` to read the file column by column.

    Raises:
        FormatError: see ``open_bounded``.
    """
    return BoundedColumns(
        open_bounded(data, where=where, max_rows=max_rows, rows=rows, rows_expected=rows_expected, budget=budget), where=where
    )


def read_parquet_schema(data: bytes | bytearray | memoryview, *, where: str) -> pa.Schema:
    """The Arrow schema of the parquet file in ``data`` (its footer only).

    Raises:
        FormatError: not a parquet file.
    """
    try:
        check_footer(data, where=where)
        return pq.ParquetFile(pa.BufferReader(arrow_buffer(data))).schema_arrow
    except (pa.ArrowException, OSError) as err:
        if at_limit(err):  # this process at its limit, not a damaged file
            raise
        raise FormatError(f"{where}: not a readable parquet file ({type(err).__name__}: {str(err)[:300]})") from None


def iter_bounded_batches(
    data: bytes | bytearray | memoryview,
    *,
    where: str,
    columns: list[str] | None = None,
    rows: int,
    rows_expected: str = "",
    batch_rows: int = 1 << 20,
    budget: Budget = Budget(max_bytes=MAX_DECODED_BYTES),
) -> Iterator[pa.RecordBatch]:
    """Stream a parquet file of exactly ``rows`` rows in batches once ``open_bounded`` has
    checked it: for files whose size follows the dataset (the samples index: a row per
    frame), memory stays one batch, not the file. The checks run when this is called;
    decoding as batches are taken.

    Raises:
        FormatError: see ``open_bounded``; string columns (the files streamed hold numbers);
            while iterating, data that does not decode.
    """
    checked = open_bounded(data, where=where, max_rows=rows, rows=rows, rows_expected=rows_expected, budget=budget)
    if checked.dictionary_paths:
        raise FormatError(f"{where}: string columns {checked.dictionary_paths[:5]} where the format has numbers")
    return _batches(pq.ParquetFile(pa.BufferReader(checked.buffer)), batch_rows, columns, where)


def _batches(parquet: pq.ParquetFile, batch_rows: int, columns: list[str] | None, where: str) -> Iterator[pa.RecordBatch]:
    try:
        yield from parquet.iter_batches(batch_size=batch_rows, columns=columns, use_threads=False)
    except (pa.ArrowException, OSError, MemoryError) as err:
        if at_limit(err):  # this process at its limit, not a damaged file
            raise
        raise FormatError(f"{where}: does not decode ({type(err).__name__}: {str(err)[:300]})") from None


__all__ = [
    "BoundedColumns",
    "read_bounded_columns",
    "Budget",
    "CheckedParquet",
    "check_costs",
    "decode_dictionaries",
    "expansion_budget",
    "file_cost",
    "group_cost",
    "iter_bounded_batches",
    "leaf_columns",
    "materialized_bytes",
    "open_bounded",
    "read_bounded",
    "read_parquet_schema",
]
