"""``sql``: look inside a packed dataset (local or in a bucket) with DuckDB.

Nothing read from the dataset becomes SQL but column names, as quoted identifiers: the views
are built from the format's own paths (``shard_parquet_path(i)``) under the root the user gave,
quoted as string literals, and the manifest is validated first. The user's query is theirs and
runs as given. DuckDB's identifiers ignore case, so columns whose names differ only by case
(``observation.state`` beside ``OBSERVATION.STATE``) are each named ``<name>@<n>`` in the views
(``sql_aliases``): no name shows another column's values, and a query naming the bare name
fails with the names to use.

DuckDB trusts a parquet file's page headers as pyarrow does (a 2 KB file listing a string 18
million times took it to 3 GB before its ``memory_limit`` stopped it), so it is never handed
a file the format's bounds were not checked on: the two indexes are checked against their
digests and bounds and queried from private copies; a query that reads ``frames`` first has
every shard parquet's footer checked and every row group's pages walked (``lerobot_shards.core.format.parquet``).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from dataclasses import dataclass

import pyarrow as pa

from lerobot_shards.core.errors import FormatError, InspectError, SqlSyntaxError, StorageError
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    SAMPLES_INDEX_PATH,
    Manifest,
    shard_parquet_path,
    sql_aliases,
    sql_identifier,
    sql_string_literal,
)
from lerobot_shards.core.format.limits import MAX_DECODED_BYTES, MAX_EPISODE_TASKS, MAX_EXPANSION, ROW_GROUP_MAX_BYTES
from lerobot_shards.core.format.parquet import Budget, feature_budget, open_bounded, parse_footer, row_group_span
from lerobot_shards.core.format.parquet.bounded import group_cost
from lerobot_shards.core.pack.packed_index import load_tasks, read_manifest, verified_read
from lerobot_shards.core.storage import Storage

_FRAMES = re.compile(r"\bframes\b", re.IGNORECASE)


def load_manifest(storage: Storage) -> tuple[Manifest, str]:
    """The validated manifest and its pin (``sha256:<hex>`` of its bytes), as the reader
    reads it (``lerobot_shards.core.pack.packed_index.read_manifest``).

    Raises:
        InspectError: no manifest (or no dataset at all), or a manifest that does not validate.
    """
    try:
        return read_manifest(storage)
    except (FormatError, StorageError) as err:
        raise InspectError(str(err)) from None


def connect(dst: str, *, storage_options: dict | None = None, frames: bool = True, workdir: str | None = None):
    """A DuckDB connection with views ``episodes``, ``samples``, ``tasks`` (``task_index``,
    ``task``) and ``frames`` (all shard rows).

    The index views read checked copies in ``workdir`` (when not given, a private temporary
    directory removed with the connection); ``frames`` exists when ``frames`` is true,
    after every shard parquet was checked (see the module docstring). Remote datasets are
    read through the fsspec filesystem registered on the connection (DuckDB's httpfs
    extension is not needed).

    Raises:
        InspectError: no or an invalid manifest, or a file that differs from its digest or
            exceeds the format's bounds (names it).
    """
    import duckdb

    storage = Storage(dst, storage_options)
    manifest, _ = load_manifest(storage)
    owned = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="lerobot-shards-sql-")
    names: list[list[str]] = []
    try:
        copies = {rel: _checked_index_copy(storage, manifest, rel, workdir) for rel in (EPISODES_INDEX_PATH, SAMPLES_INDEX_PATH)}
        tasks = load_tasks(storage, manifest)  # checked and bounded; the view holds the parsed values only
        if frames:
            names = [_check_shard_parquet(storage, manifest, shard) for shard in manifest.shards]
            if sql_aliases(names[0] if names else []) and any(n != names[0] for n in names):
                raise FormatError(
                    f"{storage.url}: shard parquets hold columns whose names differ only by case, in different "
                    "orders; DuckDB cannot tell them apart (query the pack from Python: PackedDataset)"
                )
    except (FormatError, StorageError) as err:
        if owned:
            shutil.rmtree(workdir, ignore_errors=True)
        raise InspectError(str(err)) from None
    con = duckdb.connect()
    if owned:
        weakref.finalize(con, shutil.rmtree, workdir, ignore_errors=True)
    base = storage.register_with_duckdb(con)
    for view, rel in (("episodes", EPISODES_INDEX_PATH), ("samples", SAMPLES_INDEX_PATH)):
        path = copies[rel]
        con.execute(f"CREATE VIEW {view} AS {_select(_parquet_names(path), sql_string_literal(path))}")
    con.register(
        "_tasks", pa.table({"task_index": pa.array(sorted(tasks), pa.int64()), "task": [tasks[i] for i in sorted(tasks)]})
    )
    con.execute("CREATE TABLE tasks AS SELECT * FROM _tasks")
    con.unregister("_tasks")
    if manifest.shards and frames:
        shard_files = ", ".join(sql_string_literal(f"{base}/{shard_parquet_path(s.index)}") for s in manifest.shards)
        con.execute(f"CREATE VIEW frames AS {_select(names[0], f'[{shard_files}]', union=True)}")
    return con


def _parquet_names(path: str) -> list[str]:
    """The top-level column names of a checked local parquet copy."""
    import pyarrow.parquet as pq

    return pq.read_schema(path).names


def _select(names: list[str], files: str, *, union: bool = False) -> str:
    """``SELECT * FROM read_parquet(files)``; when names differ only by case, each column by its
    place under its ``sql_aliases`` name (DuckDB would give one of them the other's name)."""
    aliases = sql_aliases(names)
    if not aliases:
        return f"SELECT * FROM read_parquet({files}{', union_by_name=true' if union else ''})"
    # By place: the names are ambiguous to DuckDB; every file has these columns in this order.
    columns = ", ".join(f"#{i} AS {sql_identifier(aliases.get(n, n))}" for i, n in enumerate(names, 1))
    return f"SELECT {columns} FROM read_parquet({files})"


def case_note(con) -> str:
    """What a failed query should know when views name columns ``<name>@<n>`` (else "")."""
    import duckdb

    renamed = []
    for view in ("episodes", "samples", "frames"):
        try:
            columns = [row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()]
        except duckdb.CatalogException:  # no frames view (the query did not name it)
            continue
        renamed += [f"{view}.{c}" for c in columns if re.search(r"@+\d+$", c)]
    if not renamed:
        return ""
    return (
        "note: columns whose names differ only by case (DuckDB ignores case) are named <name>@<n>: "
        + ", ".join(f'"{c.split(".", 1)[1]}"' for c in renamed[:8])
        + (f" and {len(renamed) - 8} more" if len(renamed) > 8 else "")
    )


def _checked_index_copy(storage: Storage, manifest: Manifest, rel: str, workdir: str) -> str:
    """A private copy of an index file, after its digest and bounds are checked."""
    data = verified_read(storage, manifest, rel)
    where = storage.describe(rel)
    if rel == EPISODES_INDEX_PATH:
        episodes = manifest.totals["episodes"]
        open_bounded(
            data, where=where, rows=episodes, max_rows=episodes, budget=Budget(values_per_row={"tasks": MAX_EPISODE_TASKS})
        )
    else:
        frames = manifest.totals["frames"]
        open_bounded(data, where=where, rows=frames, max_rows=frames, budget=Budget(max_bytes=MAX_DECODED_BYTES))
    path = os.path.join(workdir, rel.replace("/", "-"))
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def _check_shard_parquet(storage: Storage, manifest: Manifest, shard) -> list[str]:
    """A shard parquet's footer against its digest, then every row group's pages against the
    format's bounds, one row group in memory at a time; returns its top-level column names."""
    rel = shard_parquet_path(shard.index)
    where = storage.describe(rel)
    footer = shard.parquet_footer
    metadata = parse_footer(
        storage.read_range(rel, footer.offset, footer.bytes), size=footer.bytes, sha256=footer.sha256, where=where
    )
    caps = feature_budget(manifest.features)
    for group in range(metadata.num_row_groups):
        offset, nbytes = row_group_span(metadata, group)
        if not 0 <= offset <= offset + nbytes <= footer.offset:
            raise FormatError(f"{where}: row group {group} lies outside the file's row groups")
        data = storage.read_range(rel, offset, nbytes)
        budget = Budget(max_bytes=max(ROW_GROUP_MAX_BYTES, MAX_EXPANSION * nbytes), values_per_row=caps)
        group_cost(metadata, group, memoryview(data), base=offset, budget=budget, where=f"{where}: row group {group}")
    return metadata.schema.to_arrow_schema().names


@dataclass(frozen=True)
class SqlResult:
    """One statement's result: its text, column names (empty for a statement without rows),
    the rows kept (at most ``max_rows`` of ``run_statements``) and how many it returned."""

    statement: str
    columns: list[str]
    rows: list[tuple]
    total_rows: int


def run_statements(dst: str, query: str, *, storage_options: dict | None = None, max_rows: int | None = None) -> list[SqlResult]:
    """Run every statement of ``query`` against the views, in order; returns one ``SqlResult``
    each, keeping at most ``max_rows`` rows of each (the rest are counted, not held). Shard
    parquets are checked (and the ``frames`` view made) only when the query names ``frames``.

    Raises:
        SqlSyntaxError: a statement does not parse or names what does not exist (DuckDB's
            message, its lines and ``^`` pointer kept: the user's own query).
        InspectError: the dataset is incomplete, a file fails its checks, or a statement fails
            otherwise (DuckDB's message kept).
    """
    import duckdb

    with tempfile.TemporaryDirectory(prefix="lerobot-shards-sql-") as workdir:
        con = connect(dst, storage_options=storage_options, frames=_FRAMES.search(query) is not None, workdir=workdir)
        try:
            statements = con.extract_statements(query)
            if not statements:
                raise SqlSyntaxError("SQL failed: no statement given")
            results = []
            for statement in statements:
                cursor = con.execute(statement)
                if cursor.description is None:
                    results.append(SqlResult(statement.query.strip(), [], [], 0))
                    continue
                rows = cursor.fetchall() if max_rows is None else cursor.fetchmany(max_rows)
                total = len(rows)
                if max_rows is not None:
                    while chunk := cursor.fetchmany(65536):
                        total += len(chunk)
                results.append(SqlResult(statement.query.strip(), [d[0] for d in cursor.description], rows, total))
            return results
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException) as err:
            note = case_note(con)
            raise SqlSyntaxError(f"SQL failed: {err}" + (f"\n{note}" if note else "")) from None
        except duckdb.Error as err:
            raise InspectError(f"SQL failed: {err}") from None
        finally:
            con.close()


def run_sql(dst: str, query: str, *, storage_options: dict | None = None):
    """Run ``query`` against the views; returns ``(column names, rows)`` of its last statement
    (``run_statements`` returns each one's). Raises as ``run_statements``."""
    last = run_statements(dst, query, storage_options=storage_options)[-1]
    return last.columns, last.rows
