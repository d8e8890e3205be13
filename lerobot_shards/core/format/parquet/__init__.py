"""Parquet as the format reads it: from Arrow-owned memory, with decoded size bounded first.

- ``arrow_io``: bytes into Arrow-owned buffers (so processes exit cleanly);
- ``thrift`` and ``pages``: page headers walked to count what a column chunk decodes to;
- ``bounded``: whole files and batches read within a ``Budget``;
- ``row_groups``: shard parquet footers and row groups, checked against the index.
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.core.format.parquet.bounded": [
        "Budget",
        "BoundedColumns",
        "expansion_budget",
        "iter_bounded_batches",
        "open_bounded",
        "read_bounded",
        "read_bounded_columns",
        "read_parquet_schema",
        "file_cost",
        "leaf_columns",
    ],
    "lerobot_shards.core.format.parquet.row_groups": [
        "check_row_group",
        "decode_row_group",
        "feature_budget",
        "footer_range",
        "parse_footer",
        "row_group_span",
    ],
    "lerobot_shards.core.format.parquet.arrow_io": ["read_parquet_bytes", "read_parquet_metadata"],
    "lerobot_shards.core.format.parquet.pages": ["check_writer", "chunk_cost"],
    "lerobot_shards.core.format.parquet.thrift": ["CompactReader"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
