"""Parquet from bytes already in memory, read so that the process can always exit cleanly.

pyarrow readers over memory that Python owns (``bytes`` through ``pa.BufferReader`` or
``io.BytesIO``, or any Python file object) made interpreter shutdown abort with
``terminate called without an active exception`` in 10-30% of runs of a small script that
read a parquet file from ``bytes`` in a few threads (2 of 60 runs of our own reader): Arrow's
thread pools still hold references to Python objects when they are torn down after Python has
finalized. Copying the bytes into memory Arrow allocated and owns first gave 0 aborts in 1,800
runs of the same scripts; the copy costs far less than decoding the parquet it holds.
``tests/contracts/test_clean_exit.py`` runs the reader's paths in subprocesses and checks that every one
exits 0.

Every parquet read from bytes in ``reader/`` and ``packer/`` goes through this module.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq


def arrow_buffer(data: bytes | bytearray | memoryview) -> pa.Buffer:
    """A copy of ``data`` in memory allocated and owned by Arrow (no reference to ``data``)."""
    return placed_buffer(data, 0)


def placed_buffer(data: bytes | bytearray | memoryview, offset: int) -> pa.Buffer:
    """An Arrow-owned buffer of ``offset + len(data)`` bytes holding ``data`` at ``offset``.

    The bytes before ``offset`` are allocated but never written (the allocator maps them
    lazily, so they cost address space, not memory): a parquet reader given file metadata reads
    a row group at its file offsets, and the caller guarantees it reads nothing before ``offset``.
    """
    view = memoryview(data).cast("B")
    buffer = pa.allocate_buffer(offset + view.nbytes)
    memoryview(buffer).cast("B")[offset:] = view
    return buffer


def parquet_file(data: bytes | bytearray | memoryview, *, where: str = "parquet file", **options) -> pq.ParquetFile:
    """``pq.ParquetFile`` over an Arrow-owned copy of ``data``, its footer counted first
    (``check_footer``).

    Raises:
        FormatError: a footer beyond the format's bounds (names ``where``).
        pyarrow.ArrowException, OSError: ``data`` is not parquet (callers name the file).
    """
    check_footer(data, where=where)
    return pq.ParquetFile(pa.BufferReader(arrow_buffer(data)), **options)


WHOLE_FILE = -1


def check_footer(data: bytes | bytearray | memoryview, *, where: str, body_bytes: int | None = WHOLE_FILE) -> None:
    """Count a parquet file's footer before pyarrow parses it: at most ``MAX_SCHEMA_ELEMENTS``
    schema nodes, at most as many chunks per row group as the schema has nodes, at most
    ``MAX_FOOTER_CHUNKS`` chunks, and no more chunks than the file's body (``body_bytes``;
    ``WHOLE_FILE``: ``data`` is the whole file; None: unknown) could hold pages for. ``data``
    ends with the footer and its 8-byte tail. A file without a parquet tail is left to
    pyarrow, which names what is wrong.

    Raises:
        FormatError: names ``where`` and the count.
    """
    from lerobot_shards.core.errors import FormatError
    from lerobot_shards.core.format.limits import MAX_FOOTER_CHUNKS, MAX_SCHEMA_ELEMENTS, MIN_CHUNK_BYTES
    from lerobot_shards.core.format.parquet.thrift import footer_shape

    view = memoryview(data).cast("B")
    if view.nbytes < 12 or bytes(view[-4:]) != b"PAR1":
        return
    length = int.from_bytes(view[-8:-4], "little")
    start = view.nbytes - 8 - length
    if start < 0 or (body_bytes == WHOLE_FILE and start < 4):
        return
    try:
        schema, groups, chunks = footer_shape(view, start, view.nbytes - 8)
    except FormatError as err:
        raise FormatError(f"{where}: parquet footer does not parse ({err})") from None
    body = start - 4 if body_bytes == WHOLE_FILE else body_bytes
    if (
        schema > MAX_SCHEMA_ELEMENTS
        or chunks > MAX_FOOTER_CHUNKS
        or chunks > groups * max(schema, 1)
        or (body is not None and chunks > body // MIN_CHUNK_BYTES + schema)
    ):
        raise FormatError(
            f"{where}: parquet footer lists {chunks:,} column chunks in {groups:,} row groups over {schema:,} schema "
            f"nodes ({length:,} bytes of footer, {body if body is not None else 'unknown':,} bytes of data); at most {MAX_SCHEMA_ELEMENTS:,} nodes, "
            f"{MAX_FOOTER_CHUNKS:,} chunks, one per column per row group, each with a page in the file"
        )


def read_parquet_bytes(data: bytes | bytearray | memoryview, *, columns: list[str] | None = None) -> pa.Table:
    """The whole table in ``data`` (single-threaded, no pre-buffering thread pool).

    Raises:
        pyarrow.ArrowException, OSError: ``data`` is not parquet (callers name the file).
    """
    return parquet_file(data).read(columns=columns, use_threads=False)


def read_parquet_metadata(data: bytes | bytearray | memoryview, *, body_bytes: int | None = WHOLE_FILE) -> pq.FileMetaData:
    """The footer metadata of the parquet file in ``data`` (``body_bytes``: as ``check_footer``;
    None for a footer behind a magic, its file's body unknown), counted first.

    Raises:
        FormatError: a footer beyond the format's bounds.
        pyarrow.ArrowException, OSError: ``data`` is not parquet (callers name the file).
    """
    check_footer(data, where="parquet file", body_bytes=body_bytes)
    return pq.ParquetFile(pa.BufferReader(arrow_buffer(data))).metadata
