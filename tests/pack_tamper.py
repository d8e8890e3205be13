"""An attacker's tools for tests: change a packed dataset and re-seal it consistently.

Checksums catch accidental damage; a hostile writer of a bucket can recompute them. These
helpers play that writer: after any change they recompute every digest the format records
(index rows, ``files``, shard entries, ``content_sha256``), so a test shows which defence
still holds when digests cannot help (format limits, frame-size checks, pinning).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    content_sha256,
    episodes_index_schema,
    shard_parquet_path,
    shard_receipt_path,
    shard_tar_path,
    video_column,
)
from lerobot_shards.core.format.parquet import footer_range, row_group_span


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def reseal(root: Path) -> dict:
    """Recompute every digest and size the manifest records (files, shards, footers,
    ``content_sha256``) and the row-group digests of the episodes index; returns the manifest."""
    root = Path(root)
    manifest = json.loads((root / "manifest.json").read_text())
    table = pq.read_table(root / EPISODES_INDEX_PATH)
    rows = table.to_pylist()
    for shard in manifest["shards"]:
        parquet = (root / shard_parquet_path(shard["index"])).read_bytes()
        metadata = pq.read_metadata(io.BytesIO(parquet))
        for row in rows:
            if row["shard"] == shard["index"] and row["row_group"] < metadata.num_row_groups:
                offset, size = row_group_span(metadata, row["row_group"])
                row.update(
                    row_group_offset=offset, row_group_bytes=size, row_group_sha256=sha256(parquet[offset : offset + size])
                )
        offset, size = footer_range(len(parquet), parquet[-8:])
        tar = (root / shard_tar_path(shard["index"])).read_bytes()
        shard.update(
            tar_bytes=len(tar),
            tar_sha256=sha256(tar),
            parquet_bytes=len(parquet),
            parquet_sha256=sha256(parquet),
            parquet_footer={"offset": offset, "bytes": size, "sha256": sha256(parquet[offset:])},
        )
    schema = episodes_index_schema(manifest["video_keys"], preroll=any(n.endswith("/preroll") for n in table.column_names))
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / EPISODES_INDEX_PATH)
    manifest["totals"]["bytes"] = sum(s["tar_bytes"] + s["parquet_bytes"] for s in manifest["shards"])
    return seal_files(root, manifest)


def seal_files(root: Path, manifest: dict | None = None) -> dict:
    """Recompute the manifest's ``files`` digests and its ``content_sha256`` (nothing else:
    an index that is a bomb is never read) and write it; returns the manifest."""
    root = Path(root)
    if manifest is None:
        manifest = json.loads((root / "manifest.json").read_text())
    for rel in manifest["files"]:
        data = (root / rel).read_bytes()
        manifest["files"][rel] = {"bytes": len(data), "sha256": sha256(data)}
    manifest.pop("content_sha256", None)
    manifest["content_sha256"] = content_sha256(manifest)
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def edit_manifest(root: Path, edit: Callable[[dict], None]) -> dict:
    """Change the manifest's JSON with ``edit`` and re-seal."""
    path = Path(root) / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return reseal(root)


def edit_episodes_index(root: Path, edit: Callable[[list[dict]], None]) -> dict:
    """Change the episodes index rows with ``edit`` (a list of dicts, in place) and re-seal."""
    path = Path(root) / EPISODES_INDEX_PATH
    manifest = json.loads((Path(root) / "manifest.json").read_text())
    table = pq.read_table(path)
    preroll = any(name.endswith("/preroll") for name in table.column_names)  # format 4 keeps its column
    rows = table.to_pylist()
    edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=episodes_index_schema(manifest["video_keys"], preroll=preroll)), path)
    return reseal(root)


def replace_member(root: Path, episode: int, camera: str, data: bytes) -> dict:
    """Put ``data`` in place of one member (the tar is rewritten around it: later members
    move), record its size and digest, and re-seal."""
    root = Path(root)
    rows = pq.read_table(root / EPISODES_INDEX_PATH).to_pylist()
    row = next(r for r in rows if r["episode_index"] == episode)
    tar_path = root / shard_tar_path(row["shard"])
    tar = tar_path.read_bytes()
    offset, size = row[video_column(camera, "offset")], row[video_column(camera, "size")]
    # Keep the tar's 512-byte blocks: pad the new member to the old block count, or append.
    old_blocks = -(-size // 512) * 512
    if len(data) <= old_blocks:
        tar = tar[:offset] + data + b"\0" * (old_blocks - len(data)) + tar[offset + old_blocks :]
        new_offset = offset
    else:
        new_offset = len(tar)
        tar = tar + data + b"\0" * (-len(data) % 512)
    tar_path.write_bytes(tar)

    def edit(rows: list[dict]) -> None:
        target = next(r for r in rows if r["episode_index"] == episode)
        target[video_column(camera, "offset")] = new_offset
        target[video_column(camera, "size")] = len(data)
        target[video_column(camera, "sha256")] = sha256(data)

    return edit_episodes_index(root, edit)


def plant_shard(root: Path, shard: int, edit: Callable[[pa.Table], pa.Table]) -> dict:
    """Rewrite a shard's parquet with ``edit`` applied (row groups kept) and re-seal its
    receipt: sizes, digests, footer and row-group entries recomputed, the plan digest kept.
    What someone who can write a shared destination plants; returns the receipt."""
    root = Path(root)
    path = root / shard_parquet_path(shard)
    original = pq.ParquetFile(path)
    buffer = io.BytesIO()
    # Row groups as slices of one read (pyarrow's read_row_group of a later group can give a
    # struct's null-typed child the wrong length, which a table edit then refuses).
    whole, starts = original.read(), [0]
    for group in range(original.metadata.num_row_groups):
        starts.append(starts[-1] + original.metadata.row_group(group).num_rows)
    groups = [edit(whole.slice(a, b - a)) for a, b in zip(starts, starts[1:])]
    # The original schema, unless the edit changed a column's type (a planted column of another type).
    schema = original.schema_arrow if groups[0].schema.types == original.schema_arrow.types else groups[0].schema
    with pq.ParquetWriter(buffer, schema, compression="zstd", write_page_index=True) as writer:
        for table in groups:
            # (pyarrow's cast gives a struct's null-typed child the wrong length: cast only when needed)
            writer.write_table(table if table.schema.types == schema.types else table.cast(schema))
    parquet = buffer.getvalue()
    path.write_bytes(parquet)
    metadata = pq.read_metadata(io.BytesIO(parquet))
    receipt_path = root / shard_receipt_path(shard)
    receipt = json.loads(receipt_path.read_text())
    for row in receipt["episodes"]:
        offset, size = row_group_span(metadata, row["row_group"])
        row.update(row_group_offset=offset, row_group_bytes=size, row_group_sha256=sha256(parquet[offset : offset + size]))
    offset, size = footer_range(len(parquet), parquet[-8:])
    receipt.update(
        parquet_bytes=len(parquet),
        parquet_sha256=sha256(parquet),
        parquet_footer={"offset": offset, "bytes": size, "sha256": sha256(parquet[offset:])},
    )
    receipt_path.write_text(json.dumps(receipt, indent=1, sort_keys=True))
    return receipt


def fill_column(name: str, value: float) -> Callable[[pa.Table], pa.Table]:
    """An ``edit`` for ``plant_shard``: every element of list column ``name`` set to ``value``."""

    def edit(table: pa.Table) -> pa.Table:
        column = table[name].combine_chunks()
        values = pa.array([[value] * len(v) for v in column.to_pylist()], column.type)
        return table.set_column(table.schema.get_field_index(name), name, values)

    return edit
