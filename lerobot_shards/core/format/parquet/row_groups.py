"""Shard parquet files as the format pins them down: a footer and row groups, each with a
recorded byte span and SHA-256, decoded only after their bytes were checked.

A reader never lets pyarrow read a shard parquet on its own: it fetches the footer span
(recorded in the manifest), checks its digest and parses it; then for an episode it fetches
its row group's span (recorded in the episodes index), checks that digest and decodes the
group from those bytes alone (``decode_row_group``). The footer's row-group metadata is
checked against the index and the format's size limits before any row is decoded, so a
damaged or hostile shard can neither yield wrong rows nor make the reader allocate more than
the format allows: what a group decodes to is counted from its page headers
(``bounded.group_cost``) before pyarrow decodes it. Pure: bytes in, Arrow out; the caller
does the I/O.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.address_space import at_limit
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.features import Features
from lerobot_shards.core.format.fields import check_bytes
from lerobot_shards.core.format.limits import MAX_EXPANSION, MAX_FEATURE_ELEMENTS, MAX_LANGUAGE_VALUES, ROW_GROUP_MAX_BYTES
from lerobot_shards.core.format.parquet.arrow_io import placed_buffer, read_parquet_metadata
from lerobot_shards.core.format.parquet.bounded import Budget, decode_dictionaries, group_cost
from lerobot_shards.core.format.parquet.pages import chunk_range

_MAGIC = b"PAR1"


def footer_range(file_size: int, tail: bytes) -> tuple[int, int]:
    """``(offset, bytes)`` of a parquet file's footer (metadata + length + magic), from its
    size and its last 8 bytes.

    Raises:
        FormatError: not a parquet tail, or a footer length beyond the file.
    """
    if len(tail) != 8 or tail[4:] != _MAGIC:
        raise FormatError("not a parquet file (no PAR1 magic at its end)")
    length = int.from_bytes(tail[:4], "little")
    if length + 12 > file_size:
        raise FormatError(f"parquet footer of {length} bytes does not fit a {file_size}-byte file")
    return file_size - 8 - length, length + 8


def row_group_span(metadata: pq.FileMetaData, group: int) -> tuple[int, int]:
    """``(offset, bytes)`` of row group ``group``'s column chunks (contiguous in the file), as
    pyarrow reads them (``pages.chunk_range``)."""
    row_group = metadata.row_group(group)
    starts, ends = [], []
    for j in range(row_group.num_columns):
        start, length = chunk_range(row_group.column(j))
        starts.append(start)
        ends.append(start + length)
    if not starts:
        return 4, 0
    return min(starts), max(ends) - min(starts)


def parse_footer(footer: bytes, *, size: int, sha256: str, where: str) -> pq.FileMetaData:
    """Check a footer's bytes against its recorded size and digest, then parse it.

    Raises:
        IntegrityError: the bytes differ from the recorded ones.
        FormatError: the footer does not parse as parquet metadata.
    """
    check_bytes(footer, size=size, sha256=sha256, where=f"{where} footer")
    try:
        # A footer alone parses as the tail of a file that starts with the magic.
        return read_parquet_metadata(_MAGIC + bytes(footer), body_bytes=None)
    except (pa.ArrowException, OSError) as err:
        if at_limit(err):  # this process at its limit, not a damaged file
            raise
        raise FormatError(f"{where}: footer does not parse as parquet metadata ({err})") from None


def check_row_group(
    metadata: pq.FileMetaData,
    group: int,
    *,
    offset: int,
    nbytes: int,
    first_row: int,
    rows: int,
    group_rows: int,
    where: str,
) -> int:
    """Check row group ``group`` of a parsed footer against the index before reading it.

    The group must exist, span exactly ``[offset, offset + nbytes)``, hold exactly
    ``group_rows`` rows (those of the index's episodes in it) with this episode's rows
    ``[first_row, first_row + rows)`` among them. What it decodes to is checked by
    ``decode_row_group``, from its bytes.

    Returns:
        The file row at which the group starts.

    Raises:
        FormatError: any of the above does not hold (names the file and group).
    """
    if not 0 <= group < metadata.num_row_groups:
        raise FormatError(f"{where}: has no row group {group} (it has {metadata.num_row_groups})")
    start_row = sum(metadata.row_group(g).num_rows for g in range(group))
    row_group = metadata.row_group(group)
    if row_group_span(metadata, group) != (offset, nbytes):
        raise FormatError(
            f"{where}: row group {group} spans {row_group_span(metadata, group)}, the index records {(offset, nbytes)}"
        )
    if row_group.num_rows != group_rows:
        raise FormatError(f"{where}: row group {group} holds {row_group.num_rows} rows, its episodes in the index {group_rows}")
    if not (start_row <= first_row and first_row + rows <= start_row + row_group.num_rows):
        raise FormatError(
            f"{where}: rows [{first_row}, {first_row + rows}) are not inside row group {group} "
            f"(rows [{start_row}, {start_row + row_group.num_rows}))"
        )
    return start_row


def feature_budget(features: Features) -> dict[str, int]:
    """Values per row each tabular feature's column may hold: its shape's product (``Budget``)."""
    caps = {}
    for key, feature in features.items():
        if feature.kind == "language":
            caps[key] = MAX_LANGUAGE_VALUES  # lists of messages: no shape gives their length
            continue
        if feature.kind != "value":
            continue
        size = 1
        for dim in feature.shape:
            size = size * dim if dim is not None else MAX_FEATURE_ELEMENTS
        caps[key] = min(max(size, 1), MAX_FEATURE_ELEMENTS)
    return caps


def decode_row_group(
    metadata: pq.FileMetaData,
    group: int,
    data: bytes,
    *,
    offset: int,
    sha256: str,
    file_size: int,
    single_episode: bool,
    values_per_row: dict[str, int] | None = None,
    where: str,
) -> pa.Table:
    """Decode row group ``group`` from its own bytes (``data``, found at ``offset``), after
    checking them against their recorded digest and what they decode to.

    A group decodes to at most ``ROW_GROUP_MAX_BYTES``, counted from its page headers; a group
    of one episode may exceed that, but never by expanding more than ``MAX_EXPANSION`` times
    its bytes. A column holds at most ``values_per_row`` values per row (a feature's shape,
    ``feature_budget``), so a row cannot hide a long list behind a few bytes.

    Raises:
        IntegrityError: ``data`` is not the recorded row group.
        FormatError: the bytes decode beyond those bounds, or do not decode (or pyarrow asked
            for bytes outside the group).
    """
    check_bytes(data, size=len(data), sha256=sha256, where=f"{where} row group {group}")
    if not 0 <= offset <= offset + len(data) <= file_size:
        raise FormatError(
            f"{where}: row group {group} span [{offset}, {offset + len(data)}) is outside the {file_size}-byte file"
        )
    label = f"{where}: row group {group}"
    limit = max(ROW_GROUP_MAX_BYTES, MAX_EXPANSION * len(data)) if single_episode else ROW_GROUP_MAX_BYTES
    budget = Budget(max_bytes=limit, values_per_row=values_per_row or {})
    _, dictionary_paths = group_cost(metadata, group, memoryview(data), base=offset, budget=budget, where=label)
    try:
        # The group's bytes at their file offset in an Arrow-owned buffer (see arrow_io for
        # why not a Python file object). Nothing before ``offset`` is ever read: check_row_group
        # proved every column chunk starts inside the span, and the buffer ends where it ends.
        source = pa.BufferReader(placed_buffer(data, offset))
        parquet = pq.ParquetFile(source, metadata=metadata, read_dictionary=dictionary_paths or None)
        table = parquet.read_row_group(group, use_threads=False)
        return (
            decode_dictionaries(table, metadata.schema.to_arrow_schema(), limit=limit, where=label) if dictionary_paths else table
        )
    except (pa.ArrowException, OSError, MemoryError) as err:
        if at_limit(err):  # this process at its limit, not a damaged file
            raise
        raise FormatError(f"{label} does not decode ({err})") from None


__all__ = ["check_row_group", "decode_row_group", "feature_budget", "footer_range", "parse_footer", "row_group_span"]
