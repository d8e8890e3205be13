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


def parquet_file(data: bytes | bytearray | memoryview, **options) -> pq.ParquetFile:
    """``pq.ParquetFile`` over an Arrow-owned copy of ``data``.

    Raises:
        pyarrow.ArrowException, OSError: ``data`` is not parquet (callers name the file).
    """
    return pq.ParquetFile(pa.BufferReader(arrow_buffer(data)), **options)


def read_parquet_bytes(data: bytes | bytearray | memoryview, *, columns: list[str] | None = None) -> pa.Table:
    """The whole table in ``data`` (single-threaded, no pre-buffering thread pool).

    Raises:
        pyarrow.ArrowException, OSError: ``data`` is not parquet (callers name the file).
    """
    return parquet_file(data).read(columns=columns, use_threads=False)


def read_parquet_metadata(data: bytes | bytearray | memoryview) -> pq.FileMetaData:
    """The footer metadata of the parquet file in ``data``.

    Raises:
        pyarrow.ArrowException, OSError: ``data`` is not parquet (callers name the file).
    """
    return parquet_file(data).metadata
