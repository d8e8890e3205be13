"""``info`` and ``sql``: look inside a packed dataset (local or in a bucket) with DuckDB.

Nothing read from the dataset becomes SQL: the views are built from the format's own paths
(``shard_parquet_path(i)``) under the root the user gave, quoted as string literals, and the
manifest is validated first. The user's query is theirs and runs as given.
"""

from __future__ import annotations

from dataclasses import dataclass

from packer.errors import InspectError
from reader.errors import FormatError, StorageError
from reader.fetch.packed_index import read_manifest
from reader.format import (
    EPISODES_INDEX_PATH,
    SAMPLES_INDEX_PATH,
    Manifest,
    shard_parquet_path,
    sql_string_literal,
)
from reader.storage import Storage


def load_manifest(storage: Storage) -> tuple[Manifest, str]:
    """The validated manifest and its pin (``sha256:<hex>`` of its bytes), as the reader
    reads it (``reader.fetch.packed_index.read_manifest``).

    Raises:
        InspectError: no manifest (or no dataset at all), or a manifest that does not validate.
    """
    try:
        return read_manifest(storage)
    except (FormatError, StorageError) as err:
        raise InspectError(str(err)) from None


def connect(dst: str, *, storage_options: dict | None = None):
    """A DuckDB connection with views ``episodes``, ``samples`` and ``frames`` (all shard rows).

    Remote datasets are read through the fsspec filesystem registered on the connection
    (DuckDB's httpfs extension is not needed).
    """
    import duckdb

    storage = Storage(dst, storage_options)
    manifest, _ = load_manifest(storage)
    con = duckdb.connect()
    base = storage.register_with_duckdb(con)

    def literal(rel: str) -> str:
        return sql_string_literal(f"{base}/{rel}")

    con.execute(f"CREATE VIEW episodes AS SELECT * FROM read_parquet({literal(EPISODES_INDEX_PATH)})")
    con.execute(f"CREATE VIEW samples AS SELECT * FROM read_parquet({literal(SAMPLES_INDEX_PATH)})")
    if manifest.shards:
        shard_files = ", ".join(literal(shard_parquet_path(s.index)) for s in manifest.shards)
        con.execute(f"CREATE VIEW frames AS SELECT * FROM read_parquet([{shard_files}], union_by_name=true)")
    return con


def run_sql(dst: str, query: str, *, storage_options: dict | None = None):
    """Run ``query`` against the views; returns ``(column names, rows)``.

    Raises:
        InspectError: the dataset is incomplete or the query fails (DuckDB's message kept).
    """
    import duckdb

    con = connect(dst, storage_options=storage_options)
    try:
        result = con.execute(query)
        return [d[0] for d in result.description], result.fetchall()
    except duckdb.Error as err:
        raise InspectError(f"SQL failed: {err}") from None
    finally:
        con.close()


@dataclass(frozen=True)
class DatasetSummary:
    manifest: Manifest
    url: str
    pin: str

    def rows(self) -> list[tuple[str, str]]:
        m = self.manifest
        options = m.options
        source = m.source.get("repo_id") or m.source.get("uri")
        return [
            ("dataset", self.url),
            ("format", f"{m.format} v{m.format_version} (packer {m.packer_version})"),
            ("pin", self.pin),
            ("source", f"{source} ({m.source.get('codebase_version')})"),
            ("episodes / frames", f"{m.totals['episodes']} / {m.totals['frames']}"),
            ("shards / bytes", f"{m.totals['shards']} / {m.totals['bytes'] / 1e6:.2f} MB"),
            ("fps", str(m.fps)),
            ("video", f"{options.get('video')} " + ", ".join(f"{k} {m.features[k]['shape']}" for k in m.video_keys)),
            ("windows", ", ".join(m.windows) or "-"),
            ("dropped / padded / re-encoded", f"{len(m.extra.get('dropped_episodes', []))} / {len(m.extra.get('padded_episodes', []))} / {len(m.extra.get('reencoded_episodes', []))}"),
        ]


def summarize(dst: str, *, storage_options: dict | None = None) -> DatasetSummary:
    """Read and validate the manifest and return a summary; raises ``InspectError``."""
    storage = Storage(dst, storage_options)
    manifest, pin = load_manifest(storage)
    return DatasetSummary(manifest, storage.url, pin)
