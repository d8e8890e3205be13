"""Parquet as the format reads it: from Arrow-owned memory, with decoded size bounded first.

- ``arrow_io``: bytes into Arrow-owned buffers (so processes exit cleanly);
- ``thrift`` and ``pages``: page headers walked to count what a column chunk decodes to;
- ``bounded``: whole files and batches read within a ``Budget``;
- ``row_groups``: shard parquet footers and row groups, checked against the index.
"""

from reader.format.parquet.bounded import (
    Budget,
    expansion_budget,
    iter_bounded_batches,
    open_bounded,
    read_bounded,
    read_parquet_schema,
)
from reader.format.parquet.row_groups import (
    check_row_group,
    decode_row_group,
    feature_budget,
    footer_range,
    parse_footer,
    row_group_span,
)

__all__ = [
    "Budget",
    "check_row_group",
    "decode_row_group",
    "expansion_budget",
    "feature_budget",
    "footer_range",
    "iter_bounded_batches",
    "open_bounded",
    "parse_footer",
    "read_bounded",
    "read_parquet_schema",
    "row_group_span",
]
