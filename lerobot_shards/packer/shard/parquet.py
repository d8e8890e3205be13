"""The tabular part of a shard: its parquet file and the layout a reader checks before parsing.

Row groups hold whole episodes, filled up to a target size (``ROW_GROUP_TARGET_BYTES``) and
never past the format's cap unless one episode alone is larger; the footer's span and each
row group's span get SHA-256 digests (docs/FORMAT.md, ``shards/shard-NNNNNN.parquet``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.format import ParquetProfile, sha256_hex
from lerobot_shards.core.format.parquet.row_groups import footer_range, row_group_span


def write_shard_parquet(tables: list[pa.Table], path: Path, max_bytes: int, profile: ParquetProfile) -> list[int]:
    """Write episodes' rows with row groups of whole episodes, as ``profile`` says (the pack's
    ``parquet_compression``); returns each episode's group."""
    if tables:
        schema = pa.unify_schemas([t.schema for t in tables], promote_options="default")
        tables = [t.cast(schema) if t.schema != schema else t for t in tables]
    else:
        schema = pa.schema([])
    groups: list[list[pa.Table]] = []
    group_of_episode: list[int] = []
    current_bytes = 0
    for table in tables:
        # Parquet's uncompressed size exceeds Arrow's in-memory size by the level data; keep margin.
        size = int(table.nbytes * 1.25) + 1024
        if groups and groups[-1] and current_bytes + size > max_bytes:
            groups.append([])
            current_bytes = 0
        if not groups:
            groups.append([])
        groups[-1].append(table)
        current_bytes += size
        group_of_episode.append(len(groups) - 1)
    with profile.writer(path, schema) as writer:
        for group in groups:
            combined = pa.concat_tables(group)
            writer.write_table(combined, row_group_size=max(combined.num_rows, 1))
    return group_of_episode


def shard_parquet_layout(path: Path) -> tuple[dict, list[tuple[int, int, str]]]:
    """The footer's ``{offset, bytes, sha256}`` and each row group's ``(offset, bytes, sha256)``:
    what a reader checks before it parses or decodes any of them."""
    data = path.read_bytes()
    offset, nbytes = footer_range(len(data), data[-8:])
    metadata = pq.read_metadata(path)
    spans = []
    for group in range(metadata.num_row_groups):
        start, size = row_group_span(metadata, group)
        spans.append((start, size, sha256_hex(data[start : start + size])))
    return {"offset": offset, "bytes": nbytes, "sha256": sha256_hex(data[offset:])}, spans
