"""``mixture create`` / ``mixture report``: describe the packed datasets under a root.

Which datasets: those given by name (``NAME=PATH``), else the lines of a sources file
(``packer.mixture.sources``), else every directory directly under ``DST`` (names starting
with ``_`` or ``.`` are skipped). Each is read through fsspec (local or ``s3://``):

* ``ok``: ``manifest.json`` parses (``reader.format.Manifest``); it enters ``mixture.json``
  with its anchors (frames, or the rows of ``index/samples.parquet`` matching ``where``),
  episodes, fps, features and video keys.
* ``failed``: the SLURM array recorded ``DST/_failures/<name>.json`` (its error is shown).
* ``incomplete``: the directory exists without a manifest (a pack still running, or killed
  before it could record anything: time limit, out of memory).
* ``missing``: listed by name or sources file but nothing is there (its task never ran).
* ``invalid``: the manifest is unreadable, the where filter fails, or (``verify=True``)
  ``lerobot-shards verify`` finds a problem.

Only ``ok`` datasets enter the mixture; the others are reported.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from packer.errors import MixtureError
from packer.mixture.sources import read_sources
from reader.fetch.packed_index import read_manifest
from reader.format import MANIFEST_PATH, SAMPLES_INDEX_PATH, FormatError
from reader.format.arrow_io import read_parquet_bytes
from reader.format.mixture import MIXTURE_FILE, FeatureInfo, MixtureEntry, MixtureSpec
from reader.storage import Storage

MIXTURE_PATH = MIXTURE_FILE
FAILURES_DIR = "_failures"

Status = Literal["ok", "failed", "incomplete", "missing", "invalid"]


@dataclass
class DatasetStatus:
    """One dataset's row in the report."""

    name: str
    path: str
    status: Status
    error: str = ""
    anchors: int = 0


@dataclass
class MixtureReport:
    """What ``create_mixture`` found, and the spec it wrote (None when nothing was complete)."""

    rows: list[DatasetStatus] = field(default_factory=list)
    spec: MixtureSpec | None = None
    written_to: str | None = None

    @property
    def datasets(self) -> list[dict]:
        """The mixture's entries as written to ``mixture.json``."""
        return [d.to_dict() for d in self.spec.datasets] if self.spec is not None else []

    @property
    def failures(self) -> dict[str, str]:
        """``{name: "<status>: error"}`` of every dataset left out."""
        return {r.name: r.error for r in self.rows if r.status != "ok"}

    @property
    def ok(self) -> bool:
        return all(r.status == "ok" for r in self.rows)


def failure_path(name: str) -> str:
    """Where the array task records a dataset's failure, relative to DST."""
    return f"{FAILURES_DIR}/{name}.json"


def scan_datasets(
    dst: str,
    *,
    names: Mapping[str, str] | None = None,
    sources_file: str | None = None,
    where: str | None = None,
    verify: bool = False,
    storage_options: dict | None = None,
) -> tuple[MixtureReport, list[MixtureEntry]]:
    """Inspect the datasets (see the module docstring) without writing anything.

    Returns:
        ``(report, entries)``: a row per dataset (plus failure records of datasets not
        otherwise listed) and the entries of the ``ok`` ones, in order.

    Raises:
        MixtureError: both ``names`` and ``sources_file`` given.
        SourcesError: a malformed sources file.
    """
    if names and sources_file:
        raise MixtureError("give dataset names (NAME=PATH) or a sources file, not both")
    root = Storage(dst, storage_options)
    if names:
        listed = dict(names)
    elif sources_file:
        listed = {s.name: s.name for s in read_sources(sources_file)}
    else:
        listed = {n: n for n in root.list_dirs() if not n.startswith(("_", "."))}
    failures = _failure_records(root)
    report, entries = MixtureReport(), []
    for name, path in listed.items():
        dataset = Storage(path if _absolute(path) else f"{root.url}/{path}", storage_options)
        row = DatasetStatus(name=name, path=path, status="ok")
        report.rows.append(row)
        if not dataset.exists(MANIFEST_PATH):
            if name in failures:
                row.status, row.error = "failed", failures[name]
            elif dataset.exists(""):
                row.status, row.error = "incomplete", "no manifest.json: the pack did not finish (still running, or killed)"
            else:
                row.status, row.error = "missing", f"nothing at {dataset.url}: its pack never ran"
            continue
        try:
            manifest, _ = read_manifest(dataset)
            anchors = manifest.totals["frames"] if where is None else _count_anchors(dataset, where)
            if verify:
                from packer.tools.verify import verify as verify_dataset

                problems = verify_dataset(dataset.url, storage_options=storage_options).problems
                if problems:
                    raise FormatError(f"verify found {len(problems)} problem(s), first: {problems[0]}")
        except (FormatError, ValueError, KeyError) as err:
            row.status, row.error = "invalid", f"{type(err).__name__}: {err}"
            continue
        row.anchors = int(anchors)
        entries.append(
            MixtureEntry(
                name=name,
                path=path,
                anchors=int(anchors),
                episodes=int(manifest.totals["episodes"]),
                fps=int(manifest.fps),
                features={k: FeatureInfo.from_dict(f, where=f"{name}: features[{k!r}]") for k, f in manifest.features.items()},
                video_keys=tuple(manifest.video_keys),
                weight=float(anchors),
                where=where,
            )
        )
    for name, error in failures.items():
        if name not in listed:
            report.rows.append(DatasetStatus(name=name, path=name, status="failed", error=error))
    return report, entries


def create_mixture(
    dst: str,
    *,
    names: Mapping[str, str] | None = None,
    sources_file: str | None = None,
    where: str | None = None,
    verify: bool = False,
    storage_options: dict | None = None,
) -> MixtureReport:
    """Write ``DST/mixture.json`` (``default_weights: "anchors"``) for the complete datasets.

    ``names`` maps dataset names to paths (relative to ``dst``, or absolute/URLs); paths
    are recorded as given, so relative ones resolve against the mixture file.

    Returns:
        The ``MixtureReport`` (``report.failures`` lists the datasets left out).

    Raises:
        MixtureError: no dataset is complete (nothing is written), or bad arguments.
        SourcesError: a malformed sources file.
    """
    report, entries = scan_datasets(dst, names=names, sources_file=sources_file, where=where, verify=verify, storage_options=storage_options)
    if not entries:
        looked = f"{len(report.rows)} dataset(s)" if report.rows else "no dataset directories"
        raise MixtureError(f"no complete packed dataset under {dst} ({looked} found); mixture.json not written", report)
    report.spec = MixtureSpec(datasets=tuple(entries), default_weights="anchors")
    root = Storage(dst, storage_options)
    root.write_bytes(MIXTURE_PATH, report.spec.to_json().encode())
    report.written_to = f"{root.url}/{MIXTURE_PATH}"
    return report


def format_report(report: MixtureReport) -> list[str]:
    """The report as text lines: one per dataset left out, ``STATUS name: error``."""
    problems = [r for r in report.rows if r.status != "ok"]
    if not problems:
        return []
    lines = [f"{len(problems)} dataset(s) not in the mixture:"]
    lines += [f"{r.status.upper()} {r.name}: {r.error}" for r in problems]
    return lines


def _failure_records(root: Storage) -> dict[str, str]:
    out = {}
    for rel in root.list(FAILURES_DIR):
        if not rel.endswith(".json") or rel.count("/") != 1:
            continue
        name = rel.rsplit("/", 1)[-1].removesuffix(".json")
        try:
            record = json.loads(root.read_bytes(failure_path(name)))
            out[name] = str(record.get("error", "?"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            out[name] = f"unreadable failure record {failure_path(name)}: {err}"
    return out


def _count_anchors(dataset: Storage, where: str) -> int:
    import duckdb

    samples = read_parquet_bytes(dataset.read_bytes(SAMPLES_INDEX_PATH))
    con = duckdb.connect()
    try:
        con.register("samples", samples)
        try:
            return int(con.execute(f"SELECT count(*) FROM samples WHERE ({where})").fetchone()[0])
        except duckdb.Error as err:
            raise ValueError(f"where={where!r} is not a valid predicate over {SAMPLES_INDEX_PATH}: {err}") from None
    finally:
        con.close()


def _absolute(path: str) -> bool:
    return "://" in path or path.startswith("/")
