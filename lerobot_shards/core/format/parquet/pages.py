"""What a parquet column chunk decodes to, read from its page headers before pyarrow decodes it.

Parquet metadata *declares* sizes (``total_byte_size``, ``num_values``); what a decoder does is
driven by each page's own header: how many values (level entries) it decodes and how many bytes
it decompresses into. A few KB of run-length-encoded levels or dictionary indices can stand
for millions of values, so the only honest bound is one counted from the pages themselves:
``chunk_cost`` walks every page header of a chunk (they must tile its byte range exactly, as
a decoder reads them) and returns the values and an upper bound on the Arrow bytes they decode
to. ``chunk_range`` is the byte range pyarrow reads for a chunk, computed as pyarrow computes
it. Pure: bytes in, numbers out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.limits import MAX_PAGE_BYTES
from lerobot_shards.core.format.parquet.thrift import CompactReader

# PageType
_DATA_PAGE, _INDEX_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 1, 2, 3
# Encoding
_PLAIN, _PLAIN_DICTIONARY, _DELTA_LENGTH_BYTE_ARRAY, _DELTA_BYTE_ARRAY, _RLE_DICTIONARY = 0, 2, 6, 7, 8
_DICTIONARY_ENCODINGS = (_PLAIN_DICTIONARY, _RLE_DICTIONARY)
_KNOWN_ENCODINGS = frozenset(range(10))

# Arrow bytes per value of each physical type (INT96 becomes a 64-bit timestamp).
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 8, "FLOAT": 4, "DOUBLE": 8}
# Per value besides its data: levels decoded as int16 pairs, a validity bit, and per repetition
# level one 64-bit list offset (the widest Arrow uses).
_LEVEL_BYTES = 5
_OFFSET_BYTES = 8

_PARQUET_MR = re.compile(r"parquet-mr version (\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class ChunkCost:
    """What one column chunk decodes to.

    Attributes:
        path: the column's path in the schema (``tasks.list.element``).
        values: level entries in its data pages (for a flat column, its rows; for a list
            column, its elements plus empty and null lists).
        decoded_bytes: an upper bound on the Arrow memory its values take once decoded, with
            dictionary-encoded strings counted as dictionary indices (``dictionary_strings``).
        dictionary_strings: its strings are dictionary-encoded: read them as a dictionary and
            measure them before decoding them into plain strings (``bounded.read_bounded``).
        encoded_bytes: the chunk's bytes in the file.
    """

    path: str
    values: int
    decoded_bytes: int
    dictionary_strings: bool
    encoded_bytes: int


def check_writer(metadata: pq.FileMetaData, *, where: str) -> None:
    """Refuse files whose writer makes pyarrow read past a chunk's recorded range.

    pyarrow pads the range it reads for files of parquet-mr 1.2.8 and older (PARQUET-816): the
    pages it reads would not be the ones counted here.

    Raises:
        FormatError: such a file.
    """
    created_by = metadata.created_by or ""
    if created_by.startswith("parquet-mr"):
        match = _PARQUET_MR.match(created_by)
        if match is None or tuple(int(v) for v in match.groups()) < (1, 2, 9):
            raise FormatError(
                f"{where}: written by {created_by[:60]!r}, older than parquet-mr 1.2.9; rewrite it with a current writer"
            )


def chunk_range(column: pq.ColumnChunkMetaData) -> tuple[int, int]:
    """``(offset, bytes)`` pyarrow reads for a column chunk (its dictionary page, if it comes
    first, and its data pages)."""
    start = column.data_page_offset
    if column.has_dictionary_page and column.dictionary_page_offset and 0 < column.dictionary_page_offset < start:
        start = column.dictionary_page_offset
    return start, column.total_compressed_size


def value_bytes(width: int, repeated: int, *, strings: bool = False) -> int:
    """What ``chunk_cost`` counts per decoded value of a leaf column (string bytes apart): its
    fixed width, its levels, one list offset per repetition level, a string's offset."""
    return width + _LEVEL_BYTES + _OFFSET_BYTES * repeated + (_OFFSET_BYTES + 4 if strings else 0)


def arrow_leaf_bytes(field_type: pa.DataType, values_per_list: int, *, string_bytes: int) -> int:
    """What ``chunk_cost`` may count for one row of an Arrow field: each leaf value's
    ``value_bytes`` (lists holding ``values_per_list`` values), strings at most ``string_bytes``."""
    repeated, kind = 0, field_type
    while pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        repeated, kind = repeated + 1, kind.value_type
    count = max(values_per_list, 1) ** repeated  # an empty list still decodes one level entry
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return count * (value_bytes(0, repeated, strings=True) + string_bytes)
    width = kind.byte_width if pa.types.is_fixed_size_binary(kind) else max(kind.bit_width // 8, 1)
    return count * value_bytes(width, repeated)


def row_bytes(fields, *, string_bytes: int) -> int:
    """What ``chunk_cost`` may count for one row of these Arrow fields, each holding one value
    (a list: one element), strings at most ``string_bytes`` (``arrow_leaf_bytes`` summed)."""
    return sum(arrow_leaf_bytes(field.type, 1, string_bytes=string_bytes) for field in fields)


def chunk_cost(
    data: memoryview, column: pq.ColumnChunkMetaData, schema_column: pq.ColumnSchema, *, base: int = 0, where: str
) -> ChunkCost:
    """Walk the page headers of one column chunk and bound what it decodes to.

    Args:
        data: bytes holding the chunk; file offset ``o`` is ``data[o - base]``.
        column: the chunk's metadata (its byte range).
        schema_column: the leaf column's schema (physical type, repetition level).

    Raises:
        FormatError: the chunk lies outside ``data``, its pages do not tile its range, a page
            declares more than ``MAX_PAGE_BYTES`` uncompressed or an unknown encoding.
    """
    path = column.path_in_schema
    label = f"{where}: column {path}"
    start, length = chunk_range(column)
    pos, end = start - base, start - base + length
    if not (0 <= pos <= end <= len(data)):
        raise FormatError(f"{label}: chunk [{start}, {start + length}) lies outside the bytes read")
    physical = schema_column.physical_type
    repeated = schema_column.max_repetition_level
    width = schema_column.length if physical == "FIXED_LEN_BYTE_ARRAY" else _WIDTH.get(physical, 0)
    strings = physical == "BYTE_ARRAY"
    values = string_bytes = dictionary_bytes = 0
    dictionary_encoded = False
    while pos < end:
        reader = CompactReader(data, pos, end)
        try:
            header = reader.struct()
        except FormatError as err:
            raise FormatError(f"{label}: page header at byte {base + pos}: {err}") from None
        kind, uncompressed, compressed = header.get(1), header.get(2), header.get(3)
        if not (isinstance(kind, int) and isinstance(uncompressed, int) and isinstance(compressed, int)):
            raise FormatError(f"{label}: page header at byte {base + pos} lacks its type or sizes")
        if not (0 <= compressed <= end - reader.pos and 0 <= uncompressed <= MAX_PAGE_BYTES):
            raise FormatError(
                f"{label}: page at byte {base + pos} declares {compressed} compressed / {uncompressed} uncompressed bytes; "
                f"{end - reader.pos} remain in the chunk and a page may decompress to at most {MAX_PAGE_BYTES}"
            )
        pos = reader.pos + compressed
        if kind == _DICTIONARY_PAGE:
            dictionary_bytes += uncompressed
            continue
        if kind not in (_DATA_PAGE, _DATA_PAGE_V2):
            continue  # index pages are never decoded
        page = header.get(5 if kind == _DATA_PAGE else 8)
        count = page.get(1) if isinstance(page, dict) else None
        encoding = page.get(2 if kind == _DATA_PAGE else 4) if isinstance(page, dict) else None
        if not isinstance(count, int) or count < 0 or encoding not in _KNOWN_ENCODINGS:
            raise FormatError(f"{label}: data page at byte {base + pos - compressed} has no valid value count or encoding")
        values += count
        if strings:
            if encoding in _DICTIONARY_ENCODINGS:
                dictionary_encoded = True
            elif encoding == _DELTA_BYTE_ARRAY:
                # Each value shares a prefix with the one before: one page can spell a long
                # string over and over. Every value is at most the page's size.
                string_bytes += count * uncompressed
            else:
                string_bytes += uncompressed  # the strings are in the page itself
    per_value = value_bytes(width, repeated, strings=strings)
    return ChunkCost(
        path=path,
        values=values,
        decoded_bytes=values * per_value + string_bytes + dictionary_bytes,
        dictionary_strings=dictionary_encoded,
        encoded_bytes=length,
    )


__all__ = ["ChunkCost", "check_writer", "chunk_cost", "chunk_range"]
