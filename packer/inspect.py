"""``info`` and ``sql``: look inside a packed dataset (local or in a bucket) with DuckDB."""

from __future__ import annotations

from dataclasses import dataclass

from packer.destination import Destination
from reader.format import EPISODES_INDEX_PATH, MANIFEST_PATH, SAMPLES_INDEX_PATH, SHARDS_DIR, FormatError, Manifest


class InspectError(ValueError):
    """The destination is not a complete packed dataset, or the SQL failed."""


def load_manifest(destination: Destination) -> Manifest:
    if not destination.exists(MANIFEST_PATH):
        raise InspectError(f"{destination.url}: no {MANIFEST_PATH}; not a (complete) packed dataset")
    return Manifest.from_json(destination.read_bytes(MANIFEST_PATH), where=f"{destination.url}/{MANIFEST_PATH}")


def connect(dst: str, *, storage_options: dict | None = None):
    """A DuckDB connection with views ``episodes``, ``samples`` and ``frames`` (all shard rows).

    Remote datasets are read through the fsspec filesystem registered on the connection
    (DuckDB's httpfs extension is not needed).
    """
    import duckdb

    destination = Destination(dst, storage_options)
    manifest = load_manifest(destination)
    con = duckdb.connect()
    if destination.is_local:
        base = destination.root
    else:
        con.register_filesystem(destination.fs)
        protocol = destination.fs.protocol
        protocol = protocol[0] if isinstance(protocol, (tuple, list)) else protocol
        base = f"{protocol}://{destination.root}"
    shard_files = ", ".join(f"'{base}/{SHARDS_DIR}/{s.name}.parquet'" for s in manifest.shards)
    con.execute(f"CREATE VIEW episodes AS SELECT * FROM read_parquet('{base}/{EPISODES_INDEX_PATH}')")
    con.execute(f"CREATE VIEW samples AS SELECT * FROM read_parquet('{base}/{SAMPLES_INDEX_PATH}')")
    if manifest.shards:
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

    def rows(self) -> list[tuple[str, str]]:
        m = self.manifest
        options = m.options
        source = m.source.get("repo_id") or m.source.get("uri")
        return [
            ("dataset", self.url),
            ("format", f"{m.format} v{m.format_version} (packer {m.packer_version})"),
            ("source", f"{source} ({m.source.get('codebase_version')})"),
            ("episodes / frames", f"{m.totals['episodes']} / {m.totals['frames']}"),
            ("shards / bytes", f"{m.totals['shards']} / {m.totals['bytes'] / 1e6:.2f} MB"),
            ("fps", str(m.fps)),
            ("video", f"{options.get('video')} " + ", ".join(f"{k} {m.features[k]['shape']}" for k in m.video_keys)),
            ("windows", ", ".join(m.windows) or "-"),
            ("dropped / padded / re-encoded", f"{len(m.extra.get('dropped_episodes', []))} / {len(m.extra.get('padded_episodes', []))} / {len(m.extra.get('reencoded_episodes', []))}"),
        ]


def summarize(dst: str, *, storage_options: dict | None = None) -> DatasetSummary:
    """Read the manifest and return a summary; raises ``InspectError``/``FormatError``."""
    destination = Destination(dst, storage_options)
    try:
        return DatasetSummary(load_manifest(destination), destination.url)
    except FormatError as err:
        raise InspectError(str(err)) from None
