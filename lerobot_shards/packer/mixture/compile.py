"""Compiling a mixture: one index of every pack, so training opens a handful of files.

``mixture create`` has opened every pack (its checked manifest, episodes index, the anchors a
``where`` keeps, tasks, stats); this writes what training needs of all of them into
``_mixture/`` beside ``mixture.json`` (``lerobot_shards.core.format.mixture_index``) and returns each file's
size, rows and SHA-256 for ``mixture.json``. The tables come from the reader's own catalog
(``EpisodeCatalog.to_tables``), the inverse of what a reader checks when it opens them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import MIXTURE_PARQUET, sha256_hex
from lerobot_shards.core.format.mixture_index import INDEX_PATHS, IndexFile, table_budget
from lerobot_shards.core.format.parquet import read_bounded
from lerobot_shards.core.pack.catalog import CatalogPack, EpisodeCatalog
from lerobot_shards.core.pack.packed_index import PackedIndex
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import MixtureError


@dataclass(frozen=True)
class OpenedPack:
    """A pack as ``mixture create`` opened it: name, storage, checked index (with the
    mixture's ``where`` applied), tasks and ``meta/stats.json``."""

    name: str
    storage: Storage
    index: PackedIndex
    tasks: dict[int, str]
    where: str | None
    stats: dict


def table_to_parquet(table: pa.Table) -> bytes:
    """The table as the compiled index stores it (``MIXTURE_PARQUET``)."""
    return MIXTURE_PARQUET.to_bytes(table)


def meta_record(pack: OpenedPack) -> dict:
    """What ``MixtureDataset.meta`` needs of one pack (``lerobot_shards.reader.lerobot_meta.meta_from_record``)."""
    manifest = pack.index.manifest
    stats = pack.stats
    source = manifest.source if isinstance(manifest.source, dict) else {}
    return {
        "repo_id": str(source.get("repo_id") or source.get("uri") or pack.name),
        "robot_type": pack.index.info.robot_type if pack.index.info is not None else None,
        "total_episodes": int(manifest.totals["episodes"]),
        "total_frames": int(manifest.totals["frames"]),
        "features": manifest.features.to_json(),
        "stats": stats,
    }


def compile_mixture(root: Storage, packs: Sequence[OpenedPack]) -> dict[str, IndexFile]:
    """Write ``_mixture/`` under ``root`` for ``packs`` (in mixture order).

    Returns:
        ``{name: IndexFile}`` for ``mixture.json``'s ``index`` block.

    Raises:
        StorageError: writing failed beyond the retry policy.
        FormatError, IntegrityError: a pack's stats.json is damaged or altered.
        MixtureError: a compiled table a reader would refuse (beyond the bounds both share).
    """
    datasets = [CatalogPack.opened(p.name, p.storage.url, p.index, where=p.where) for p in packs]
    catalog = EpisodeCatalog.from_packs([(d, p.index, p.tasks) for d, p in zip(datasets, packs)])
    files: dict[str, IndexFile] = {}
    cameras = max((len(d.video_keys) for d in datasets), default=0)
    duplicates = max(Counter(p.index.manifest_sha256 for p in packs).values(), default=1)
    for name, table in catalog.to_tables().items():
        data = table_to_parquet(table)
        # Read back within the budget a reader applies: never write what a reader refuses.
        try:
            read_bounded(
                data,
                where=INDEX_PATHS[name],
                rows=table.num_rows,
                max_rows=table.num_rows,
                budget=table_budget(
                    name,
                    rows=table.num_rows,
                    members=len(catalog.member_offset),
                    cameras=cameras,
                    encoded=len(data),
                    duplicates=duplicates,
                    preroll=catalog.member_preroll is not None,
                ),
            )
        except FormatError as err:
            raise MixtureError(f"the compiled {INDEX_PATHS[name]} would be refused by a reader: {err}") from None
        files[name] = _write_named_by_digest(root, name, data, rows=table.num_rows)
    meta = (json.dumps({"datasets": [meta_record(p) for p in packs]}, sort_keys=True) + "\n").encode()
    files["meta"] = _write_named_by_digest(root, "meta", meta, rows=len(packs))
    return files


def _write_named_by_digest(root: Storage, name: str, data: bytes, *, rows: int) -> IndexFile:
    """Write a compiled file under a name of its own (``_mixture/episodes-<16 hex>.parquet``):
    never over a file the ``mixture.json`` in place names, so a create that fails after this
    leaves the mixture a trainer reads whole (readers take each file's path from mixture.json)."""
    digest = sha256_hex(data)
    stem, dot, ext = INDEX_PATHS[name].rpartition(".")
    path = f"{stem}-{digest[:16]}{dot}{ext}"
    root.write_bytes(path, data)
    return IndexFile(path=path, bytes=len(data), rows=rows, sha256=digest)
