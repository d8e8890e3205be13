"""What parquet decodes to is bounded from its page headers, before pyarrow decodes it (issue 21).

The unit tests build page headers byte by byte (the Thrift compact protocol) to show each
refusal; the file tests write real parquet with pyarrow, honest (every writer option we know
of reads back identically, and the bound is never below what Arrow holds) and hostile (a
few KB of run-length-encoded values standing for millions).
"""

from __future__ import annotations

import io
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import MAX_PAGE_BYTES
from lerobot_shards.core.format.parquet import (
    Budget,
    CompactReader,
    check_writer,
    chunk_cost,
    file_cost,
    leaf_columns,
    read_bounded,
)
from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured


# -- the Thrift compact protocol, written by hand -----------------------------------------------
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _i32(field_delta: int, value: int) -> bytes:
    return bytes([(field_delta << 4) | 5]) + _varint((value << 1) ^ (value >> 63))


def page_header(kind: int, uncompressed: int, compressed: int, *, values: int = 1, encoding: int = 0) -> bytes:
    """A parquet PageHeader: type, sizes, and a DataPageHeader (v1) or DictionaryPageHeader."""
    inner = _i32(1, values) + _i32(1, encoding) + _i32(1, 3) + _i32(1, 3) + b"\x00"
    data_field = 5 if kind == 0 else 7
    return _i32(1, kind) + _i32(1, uncompressed) + _i32(1, compressed) + bytes([((data_field - 3) << 4) | 12]) + inner + b"\x00"


def _chunk(pages: bytes, physical: str = "INT64", repeated: int = 0):
    column = SimpleNamespace(
        data_page_offset=0,
        has_dictionary_page=False,
        dictionary_page_offset=None,
        total_compressed_size=len(pages),
        path_in_schema="x",
    )
    schema = SimpleNamespace(physical_type=physical, max_repetition_level=repeated, length=None)
    return memoryview(pages), column, schema


def test_the_thrift_reader_reads_what_the_writer_wrote():
    header = page_header(0, 1000, 20, values=7, encoding=8)
    fields = CompactReader(memoryview(header), 0, len(header)).struct()
    assert (fields[1], fields[2], fields[3], fields[5][1], fields[5][2]) == (0, 1000, 20, 7, 8)


@pytest.mark.parametrize("cut", [1, 3, 6])
def test_a_truncated_header_is_a_format_error(cut):
    header = page_header(0, 1000, 0)
    with pytest.raises(FormatError, match="page header at byte 0: truncated thrift data"):
        chunk_cost(*_chunk(header[:cut]), where="f")


def test_values_and_bytes_are_counted_from_every_page():
    pages = page_header(0, 8, 8, values=1_000_000) + b"\0" * 8 + page_header(0, 8, 8, values=5) + b"\0" * 8
    cost = chunk_cost(*_chunk(pages), where="f")
    assert cost.values == 1_000_005
    assert cost.decoded_bytes >= 1_000_005 * 8


def test_a_page_declaring_more_than_the_format_allows_is_refused():
    pages = page_header(0, MAX_PAGE_BYTES + 1, 4) + b"\0" * 4
    with pytest.raises(FormatError, match=rf"declares 4 compressed / {MAX_PAGE_BYTES + 1} uncompressed bytes"):
        chunk_cost(*_chunk(pages), where="f")


def test_pages_must_tile_their_chunk():
    pages = page_header(0, 100, 100) + b"\0" * 10  # claims 100 body bytes, 10 are there
    with pytest.raises(FormatError, match="10 remain in the chunk"):
        chunk_cost(*_chunk(pages), where="f")


def test_a_chunk_outside_the_bytes_read_is_refused():
    data, column, schema = _chunk(page_header(0, 8, 8) + b"\0" * 8)
    column.data_page_offset = 100
    with pytest.raises(FormatError, match=r"chunk \[100, 1\d\d\) lies outside the bytes read"):
        chunk_cost(data, column, schema, where="f")


def test_an_unknown_encoding_is_refused():
    pages = page_header(0, 8, 8, encoding=42) + b"\0" * 8
    with pytest.raises(FormatError, match="no valid value count or encoding"):
        chunk_cost(*_chunk(pages), where="f")


def test_prefix_encoded_strings_count_as_long_as_their_page():
    # DELTA_BYTE_ARRAY (7): each value may repeat the previous one's bytes; a page of N values
    # of at most its size each.
    pages = page_header(0, 1000, 10, values=50_000, encoding=7) + b"\0" * 10
    cost = chunk_cost(*_chunk(pages, physical="BYTE_ARRAY"), where="f")
    assert cost.decoded_bytes >= 50_000 * 1000


def test_dictionary_strings_are_counted_as_indices_until_measured():
    pages = page_header(2, 64, 64, values=1) + b"\0" * 64 + page_header(0, 10, 10, values=1000, encoding=8) + b"\0" * 10
    cost = chunk_cost(*_chunk(pages, physical="BYTE_ARRAY"), where="f")
    assert cost.dictionary_strings and cost.values == 1000


def test_old_parquet_mr_files_are_refused():
    # pyarrow reads past a chunk's range in files of parquet-mr <= 1.2.8 (PARQUET-816).
    with pytest.raises(FormatError, match="older than parquet-mr 1.2.9"):
        check_writer(SimpleNamespace(created_by="parquet-mr version 1.2.8 (build abc)"), where="f")
    check_writer(SimpleNamespace(created_by="parquet-mr version 1.12.3 (build abc)"), where="f")
    check_writer(SimpleNamespace(created_by="parquet-cpp-arrow version 26.0.1"), where="f")


# -- real files -------------------------------------------------------------------------------
def _honest_table(rows: int = 3000) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table(
        {
            "index": pa.array(np.arange(rows), pa.int64()),
            "timestamp": pa.array(np.arange(rows) / 30, pa.float32()),
            "action": pa.array(list(rng.random((rows, 7)).astype("float32")), pa.list_(pa.float32(), 7)),
            "nested": pa.array([[[1, 2], [3]]] * rows, pa.list_(pa.list_(pa.int64()))),
            "task": pa.array([f"task {i % 17} " * (1 + i % 5) for i in range(rows)]),
            "tasks": pa.array([[f"t{i % 3}"] * (i % 4) for i in range(rows)], pa.list_(pa.string())),
            "maybe": pa.array([None if i % 3 else float(i) for i in range(rows)], pa.float64()),
            "image": pa.array([{"bytes": bytes([i % 256]) * 50, "path": f"p{i}"} for i in range(rows)]),
            "flag": pa.array([i % 2 == 0 for i in range(rows)]),
        }
    )


WRITERS = {
    "snappy": {},
    "zstd-v2": {"compression": "zstd", "data_page_version": "2.0"},
    "none-no-dictionary": {"compression": "none", "use_dictionary": False},
    "gzip-small-pages": {"compression": "gzip", "data_page_size": 1024, "row_group_size": 700},
    "brotli": {"compression": "brotli"},
    "lz4": {"compression": "lz4"},
    "delta": {
        "use_dictionary": False,
        "column_encoding": {"index": "DELTA_BINARY_PACKED", "task": "DELTA_LENGTH_BYTE_ARRAY", "timestamp": "BYTE_STREAM_SPLIT"},
    },
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_honest_files_read_back_identically_within_their_bound(writer):
    table = _honest_table()
    buffer = io.BytesIO()
    pq.write_table(table, buffer, **WRITERS[writer])
    data = buffer.getvalue()
    read = read_bounded(data, where="f", max_rows=table.num_rows, rows=table.num_rows)
    assert read.equals(table)
    metadata = pq.read_metadata(io.BytesIO(data))
    bound, dictionary_paths = file_cost(metadata, memoryview(data), budget=Budget(max_bytes=1 << 40), where="f")
    # Strings read as dictionaries count as their indices; everything else is bounded outright.
    others = sum(table[name].nbytes for name in table.column_names if name not in ("task", "tasks"))
    assert bound >= others
    assert [path for path, _, _ in leaf_columns(metadata, where="f")][:4] == [
        "index",
        "timestamp",
        "action.list.element",
        "nested.list.element.list.element",
    ]


def _list_bomb(values_per_row: int, rows: int = 6) -> bytes:
    # One value repeated: dictionary + run-length encoding store it in a few bytes.
    column = pa.ListArray.from_arrays(
        pa.array(np.arange(0, (rows + 1) * values_per_row, values_per_row, dtype=np.int32)),
        pa.array(np.zeros(rows * values_per_row, dtype=np.float32)),
    )
    buffer = io.BytesIO()
    pq.write_table(pa.table({"action": column}), buffer, compression="zstd")
    return buffer.getvalue()


def test_a_list_repeating_one_value_is_refused_by_its_values_per_row():
    data = _list_bomb(1_000_000)
    assert len(data) < 30_000
    with pytest.raises(FormatError, match=r"column action.list.element holds 6000000 values in 6 rows; at most 7 per row"):
        read_bounded(data, where="f", max_rows=6, budget=Budget(values_per_row={"action": 7}))


def test_a_small_file_may_not_expand_beyond_its_budget():
    data = _list_bomb(1_000_000)
    with pytest.raises(FormatError, match=r"decodes to up to \d+ bytes from \d+ .*at most 67108864 are allowed"):
        read_bounded(data, where="f", max_rows=6, budget=Budget(values_per_row={"action": 1_000_000}))


def test_a_string_bomb_is_measured_as_a_dictionary_and_never_decoded(tmp_path):
    # 6 rows, each a list of 3M copies of one 96-byte string: 1.7 GB as Python would hold it.
    path = tmp_path / "bomb.parquet"
    tasks = pa.array([["pick up the red block and place it in the bin " * 2] * 3_000_000] * 6, pa.list_(pa.string()))
    pq.write_table(pa.table({"tasks": tasks}), path, compression="zstd")
    assert path.stat().st_size < 10_000
    measured = run_measured(
        """
        from lerobot_shards.core.format.parquet import Budget, read_bounded
        data = open(sys.argv[1], "rb").read()
        read_bounded(data, where="f", max_rows=6, budget=Budget(max_bytes=1 << 30, values_per_row={"tasks": 3_000_000}))
        """,
        str(path),
    )
    assert measured.outcome == "FormatError: f: its strings decode to 1800000048 bytes; at most 1073741824 are allowed"
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES
