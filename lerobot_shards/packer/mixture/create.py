"""``mixture create`` / ``mixture report``: describe the packed datasets under a root.

Which datasets: those given by name (``NAME=PATH``), else the lines of a sources file
(``lerobot_shards.packer.mixture.sources``), else every directory directly under ``DST`` (names starting
with ``_`` or ``.`` are skipped). Each is read through fsspec (local or ``s3://``):

* ``ok``: the pack opens as a reader opens it (manifest, ``meta/info.json``, the episodes
  index, all checked; with ``where``, the digest-checked sample index queried); it enters
  ``mixture.json`` with its manifest's digest, anchors (frames, or the rows matching
  ``where``), episodes, fps, features and video keys, and the compiled index.
* ``duplicate``: the same pack (same manifest digest) as an earlier entry, which it names;
  left out unless ``allow_duplicates``.
* ``unmixable``: a camera's frame size differs from the size most datasets share for it (a
  batch cannot hold both); the error names the ``--resize KEY=HxW`` to repack with.
* ``failed``: the SLURM array recorded ``DST/_failures/<name>.json`` (its error is shown).
* ``incomplete``: the directory exists without a manifest (a pack still running, or killed
  before it could record anything: time limit, out of memory).
* ``missing``: listed by name or sources file but nothing is there (its task never ran).
* ``invalid``: the manifest is unreadable, the where filter fails, or (``verify=True``)
  ``lerobot-shards verify`` finds a problem.

Key maps (``key_map``, a sources file's ``OLD=NEW`` fields) rename a dataset's features for the
mixture (a camera recorded under another name, or at another size under the same one): checked
against the dataset's features, applied before the checks above, and recorded in its entry so
every reader applies them. Only ``ok`` datasets enter the mixture; the others are reported,
and unless ``allow_partial`` a mixture that would leave any out is not written. Packs are opened in parallel
threads (``workers``): a mixture of thousands of packs in a bucket is mostly waiting.
"""

from __future__ import annotations

import multiprocessing
import os
import stat
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from lerobot_shards.core.address_space import usable_cores
from lerobot_shards.core.errors import LeRobotShardsError, MixtureSpecError, PredicateError
from lerobot_shards.core.format import MANIFEST_PATH, PREROLL_FORMAT_VERSION, FormatError, check_key, sha256_hex
from lerobot_shards.core.format.features import Features
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.lerobot_reading import is_fractional_fps
from lerobot_shards.core.format.limits import MAX_JSON_DEPTH, MAX_RECORD_BYTES
from lerobot_shards.core.format.mixture import (
    DEFAULT_PAD_KEYS,
    DEPTH_VERSION,
    FPS_VERSION,
    KEY_MAP_VERSION,
    MIXTURE_FILE,
    MIXTURE_VERSION,
    MixtureEntry,
    MixtureSpec,
    check_key_map,
    mixture_feature,
    partial_features,
)
from lerobot_shards.core.format.mixture_index import MIXTURE_INDEX_DIR
from lerobot_shards.core.option_fields import keyword_signature, merge_options
from lerobot_shards.core.pack.packed_index import PackedIndex, check_predicate, read_stats
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import MixtureError
from lerobot_shards.packer.mixture.compile import OpenedPack, compile_mixture
from lerobot_shards.packer.mixture.sources import read_sources
from lerobot_shards.packer.options import MixtureScan

MIXTURE_PATH = MIXTURE_FILE
FAILURES_DIR = "_failures"
_MAX_ERROR_CHARS = 2_000  # of a failure record's error, shown in the report

Status = Literal["ok", "failed", "incomplete", "missing", "invalid", "duplicate", "unmixable"]


@dataclass
class DatasetStatus:
    """One dataset's row in the report."""

    name: str
    path: str
    status: Status
    error: str = ""
    anchors: int = 0
    predicate_error: bool = False  # invalid because the where predicate does not apply to it
    left_out: str = ""  # what its pack does not hold of its source, counted (``left_out_text``); "" when all


@dataclass
class MixtureReport:
    """What ``create_mixture`` found, and the spec it wrote (None when nothing was complete)."""

    rows: list[DatasetStatus] = field(default_factory=list)
    spec: MixtureSpec | None = None
    written_to: str | None = None
    pin: str | None = None  # sha256 of the mixture.json written (what MixtureDataset(..., manifest_sha256=) pins)
    # Features only some datasets have: filled with zeros and a mask elsewhere, or left out of
    # every sample (not numeric, or shapes differ); {key: names of the datasets that have it}.
    filled_features: dict[str, list[str]] = field(default_factory=dict)
    dropped_features: dict[str, list[str]] = field(default_factory=dict)

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


@keyword_signature(MixtureScan)
def scan_datasets(dst: str, *, scan: MixtureScan | None = None, **options: Any) -> tuple[MixtureReport, list[MixtureEntry]]:
    """Inspect the datasets (see the module docstring) without writing anything.

    ``scan`` (or its fields by name, ``MixtureScan``): which datasets and how they are read;
    ``recorded_key_map`` there judges a mixture as its readers read it (``mixture report``).
    Packs are opened in ``workers`` threads per process (for a bucket; local packs one thread),
    in ``processes`` processes (``None``: one per usable core when there are hundreds of packs).
    Costs O(packs) requests and O(episodes) vectorized work.

    Returns:
        ``(report, entries)``: a row per dataset (plus failure records of datasets not
        otherwise listed) and the entries of the ``ok`` ones, in order.

    Raises:
        MixtureError: both ``names`` and ``sources_file`` given.
        SourcesError: a malformed sources file.
        PredicateError: ``where`` is not valid SQL (checked before any dataset is read).
        ArgumentError: an unknown option (names the closest).
    """
    report, opened = _scan(dst, merge_options(MixtureScan, scan, options, caller="scan_datasets"))
    return report, [entry for entry, _ in opened]


def _scan(dst: str, scan: MixtureScan):
    """The datasets listed, opened and judged: ``(report, [(entry, pack), ...] of the ok ones)``."""
    if scan.where is not None:
        check_predicate(scan.where)  # a syntax error is every dataset's: said once, before any is read
    if scan.names and scan.sources_file:
        raise MixtureError("give dataset names (NAME=PATH) or a sources file, not both")
    root = Storage(dst, scan.storage_options)
    listed, key_maps = _listed(root, scan)
    failures = _failure_records(root)
    job = _ScanJob(root.url, scan.storage_options, scan.where, scan.verify, failures, max(1, scan.workers))
    results = _open_packs(job, list(listed.items()), scan.processes)
    _refuse_misapplied_predicate(results)
    report = MixtureReport(rows=[row for row, _, _ in results])
    opened = _judged(results, key_maps, scan.allow_duplicates)
    unmixable = unmixable_cameras([entry for entry, _ in opened])
    if unmixable:
        rows = {row.name: row for row in report.rows}
        for name, error in unmixable.items():
            rows[name].status, rows[name].error = "unmixable", error
        opened = [(entry, pack) for entry, pack in opened if entry.name not in unmixable]
    for name, error in failures.items():
        if name not in listed:
            report.rows.append(DatasetStatus(name=name, path=name, status="failed", error=error))
    return report, opened


def _listed(root: Storage, scan: MixtureScan) -> tuple[dict[str, str], dict[str, dict[str, str | None]]]:
    """The datasets listed (``{name: path}``: by name, a sources file, or every folder under
    DST) and each one's key map: a mixture file's recorded ones, a sources file's over them,
    the caller's over both.

    Raises:
        MixtureError: nothing to list, or a key map of a dataset not listed.
    """
    key_maps: dict[str, dict[str, str | None]] = {}
    if scan.names:
        listed = dict(scan.names)
    elif scan.sources_file:
        sources = read_sources(scan.sources_file)
        listed = {s.name: s.name for s in sources}
        key_maps = {s.name: dict(s.key_map) for s in sources if s.key_map}
    else:
        listed = {n: n for n in root.list_dirs() if not n.startswith(("_", "."))}
        if not listed:
            why = root.missing_root() or (
                "no such folder" if root.is_local and not os.path.isdir(root.root) else "no dataset folder in it"
            )
            raise MixtureError(
                f"{root.url}: {why}; give the folder that holds the packed datasets (one folder each), or --name NAME=PATH"
            )
    for name, mapping in (scan.recorded_key_map or {}).items():  # what the mixture file records, for its listed datasets
        if name in listed:
            key_maps[name] = {**mapping, **key_maps.get(name, {})}
    for name, mapping in (scan.key_map or {}).items():  # the command line's over the sources file's
        key_maps[name] = {**key_maps.get(name, {}), **mapping}
    unknown = sorted(set(key_maps) - set(listed))
    if unknown:
        raise MixtureError(f"key maps name dataset(s) {unknown[:20]} that are not listed; the datasets are {sorted(listed)[:20]}")
    return listed, key_maps


def _refuse_misapplied_predicate(results: list) -> None:
    """A predicate that fits no dataset (a misspelt column) is one error, not one row per pack.

    Raises:
        PredicateError: every dataset opened and none took the predicate.
    """
    misapplied = [row for row, _, _ in results if row.predicate_error]
    if misapplied and not any(entry is not None for _, entry, _ in results):
        raise PredicateError(
            f"{len(misapplied)} dataset(s) opened and the where predicate applies to none of them; "
            f"{misapplied[0].name}: {misapplied[0].error.removeprefix('PredicateError: ')}"
        )


def _judged(results: list, key_maps: dict[str, dict[str, str | None]], allow_duplicates: bool) -> list:
    """The opened datasets that enter the mixture, their key maps applied: one whose key map
    does not fit its features is ``invalid``, the same pack twice ``duplicate`` (unless allowed)."""
    opened = []
    first_of: dict[str, str] = {}
    for row, entry, pack in results:
        if entry is None:
            continue
        if row.name in key_maps:
            try:
                entry = replace(entry, key_map=check_key_map(key_maps[row.name], entry.features, where=f"key map of {row.name}"))
            except MixtureSpecError as err:
                row.status, row.error = "invalid", str(err)
                continue
        earlier = first_of.setdefault(entry.manifest_sha256, entry.name)
        if earlier != entry.name and not allow_duplicates:
            row.status, row.error = (
                "duplicate",
                (
                    f"the same pack as {earlier!r} (manifest {entry.manifest_sha256}); list it once, or keep both with "
                    "--allow-duplicates (allow_duplicates=True) to draw its samples twice as often"
                ),
            )
            continue
        opened.append((entry, pack))
    return opened


# Packs per process below which scanning stays in this process (a process costs ~0.1 s to start).
_PACKS_PER_PROCESS = 128
_CHUNK_PACKS = 64


@dataclass(frozen=True)
class _ScanJob:
    """What opening one listed pack needs (picklable: scan processes get it whole)."""

    root: str
    storage_options: dict | None
    where: str | None
    verify: bool
    failures: dict[str, str]
    threads: int


def _open_packs(job: _ScanJob, items: list[tuple[str, str]], processes: int | None) -> list[tuple]:
    """``_open_pack`` of every item, in order: in threads (a bucket is mostly waiting), and in
    processes when there are many packs (checking a pack's index is Python that holds the GIL:
    3,240 packs took 11 s in one thread and 16 s in 8 threads of one process on 2 cores).
    ``processes=None``: one per usable core, at most one per ``_PACKS_PER_PROCESS`` packs."""
    if processes is None:
        processes = min(usable_cores(), len(items) // _PACKS_PER_PROCESS)
    processes = max(1, min(processes, len(items)))
    if processes == 1:
        return _open_chunk(job, items)
    # Chunks of a few dozen packs: results come back (pickled) while other chunks are opened.
    size = max(1, min(_CHUNK_PACKS, -(-len(items) // processes)))
    chunks = [items[i : i + size] for i in range(0, len(items), size)]
    # fork, as DataLoader workers: spawn and forkserver re-run the caller's main module, which
    # breaks any script that calls this without an ``if __name__ == "__main__"`` guard. Children
    # make their own storage clients (fsspec and ``Storage`` are fork-aware).
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=processes, mp_context=context) as pool:
        return [result for chunk in pool.map(_open_chunk, [job] * len(chunks), chunks) for result in chunk]


def _open_chunk(job: _ScanJob, items: list[tuple[str, str]]) -> list[tuple]:
    threads = 1 if Storage(job.root, job.storage_options).is_local else job.threads  # local reads do not wait
    if threads == 1:
        return [_open_pack(job, item) for item in items]
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mixture-scan") as pool:
        return list(pool.map(lambda item: _open_pack(job, item), items))


def _open_pack(job: _ScanJob, item: tuple[str, str]) -> tuple[DatasetStatus, MixtureEntry | None, OpenedPack | None]:
    """One listed pack opened as a reader opens it: its report row, and its entry and opened
    pack when it is ``ok`` (see the module docstring)."""
    name, path = item
    storage = Storage(path if _absolute(path) else f"{job.root}/{path}", job.storage_options)
    row = DatasetStatus(name=name, path=path, status="ok")
    try:
        check_key(name, what="dataset name")
    except FormatError as err:
        # mixture.json may only hold names every reader accepts: refuse it here, not at train time.
        row.status, row.error = "invalid", f"{err}; rename the directory (or give NAME=PATH)"
        return row, None, None
    if not storage.exists(MANIFEST_PATH):
        if name in job.failures:
            row.status, row.error = "failed", job.failures[name]
        elif storage.exists(""):
            row.status, row.error = "incomplete", "no manifest.json: the pack did not finish (still running, or killed)"
        else:
            row.status, row.error = "missing", f"nothing at {storage.url}: its pack never ran"
        return row, None, None
    try:
        index = PackedIndex(storage, where=job.where)
        tasks = index.tasks
        stats = read_stats(storage, index.manifest)
        if job.verify:
            from lerobot_shards.packer.verify_pack import verify as verify_dataset

            problems = verify_dataset(storage.url, storage_options=job.storage_options).problems
            if problems:
                raise FormatError(f"verify found {len(problems)} problem(s), first: {problems[0]}")
    except PredicateError as err:
        row.status, row.error, row.predicate_error = "invalid", f"{type(err).__name__}: {err}", True
        return row, None, None
    except (LeRobotShardsError, ValueError, KeyError) as err:
        row.status, row.error = "invalid", f"{type(err).__name__}: {err}"
        return row, None, None
    manifest = index.manifest
    anchors = int(index.anchor_counts.sum())
    row.anchors, row.left_out = anchors, left_out_text(manifest)
    entry = MixtureEntry(
        name=name,
        path=path,
        anchors=anchors,
        episodes=int(manifest.totals["episodes"]),
        fps=manifest.fps,
        features=Features({k: mixture_feature(f) for k, f in manifest.features.items()}),
        video_keys=tuple(manifest.video_keys),
        weight=float(anchors),
        where=job.where,
        manifest_sha256=index.manifest_sha256,
        tolerance_s=float(manifest.tolerance_s),
    )
    return row, entry, OpenedPack(name=name, storage=storage, index=index, tasks=tasks, where=job.where, stats=stats)


def left_out_text(manifest: Any) -> str:
    """What a pack does not hold of its source, or holds otherwise, with counts, for a corpus
    report (a log of hundreds of tasks is not read): rows and files no episode listed
    (``source.left_out``), episodes dropped by the frame policy, padded, re-encoded in copy mode,
    and data columns the features declare but the data lacks (``extra.schema_drift``)."""
    counted = manifest.source.get("left_out") or {}  # parsed: LEFT_OUT_KINDS, whole numbers
    extra = manifest.extra
    parts = [f"{n} {what} not packed" for what, n in sorted(counted.items()) if n]
    for key, what in (("dropped_episodes", "dropped"), ("padded_episodes", "padded")):
        if extra.get(key):
            parts.append(f"{len(extra[key])} episodes {what}")
    if extra.get("reencoded_episodes") and manifest.options.get("video") == "copy":
        parts.append(f"{len(extra['reencoded_episodes'])} episodes re-encoded")
    drift = extra.get("schema_drift") or {}
    if drift.get("only_in_info"):
        parts.append(f"{len(drift['only_in_info'])} declared features absent from the data")
    return "; ".join(parts)


def unmixable_cameras(entries: list[MixtureEntry]) -> dict[str, str]:
    """Datasets whose camera frames differ in size from most datasets' for the same key: a
    batch cannot hold both, so ``MixtureDataset`` would refuse the mixture. The size most
    datasets share wins; each other dataset gets an error naming the fix.

    Returns:
        ``{dataset name: error}`` (empty when every camera agrees).
    """
    sizes: dict[str, dict[tuple[int | None, ...], list[str]]] = {}
    for entry in entries:
        for key, feature in entry.mapped_features().items():  # as a reader of the mixture names them
            if feature.dtype in ("video", "image"):  # pictures batch with the cameras too
                sizes.setdefault(key, {}).setdefault(tuple(feature.shape), []).append(entry.name)
    errors: dict[str, str] = {}
    for key, by_shape in sizes.items():
        if len(by_shape) < 2:
            continue
        common = max(by_shape, key=lambda shape: len(by_shape[shape]))  # ties: the first seen
        height, width = common[0], common[1]
        for shape, names in by_shape.items():
            if shape == common:
                continue
            for name in names:
                errors.setdefault(
                    name,
                    (
                        f"camera {key!r} is {shape[0]}x{shape[1]} here and {height}x{width} in {len(by_shape[common])} other "
                        f"dataset(s), so they cannot share a batch; map it to a camera of its own (`--key-map "
                        f"{name}:{key}={key}_{shape[0]}x{shape[1]}`, or OLD= to leave it out) or repack it with "
                        f"`--video hevc --resize {key}={height}x{width}`"
                    ),
                )
    return errors


@keyword_signature(MixtureScan)
def create_mixture(dst: str, *, scan: MixtureScan | None = None, allow_partial: bool = False, **options: Any) -> MixtureReport:
    """Write ``DST/mixture.json`` (``default_weights: "anchors"``) and its compiled index
    (``DST/_mixture/``) for the complete datasets.

    ``scan`` (or its fields by name, ``MixtureScan``): which datasets and how they are read.
    ``names`` maps dataset names to paths (relative to ``dst``, or absolute/URLs); paths are
    recorded as given, so relative ones resolve against the mixture file. ``key_map``:
    ``{dataset name: {source key: mixture key, or None to leave it out}}``, over a sources
    file's; recorded per entry (``mixture.json`` version 3). ``workers`` and ``processes``: see
    ``scan_datasets``.

    Returns:
        The ``MixtureReport`` (``report.failures`` lists the datasets left out, which only
        ``allow_partial`` allows).

    Raises:
        MixtureError: no dataset is complete, datasets would be left out without
            ``allow_partial`` (``err.report`` lists them; nothing is written), or bad arguments
            (a key map of a dataset not listed).
        MixtureSpecError: more episodes or members than a mixture may hold (nothing is written).
        SourcesError: a malformed sources file.
        PredicateError: ``where`` is not valid SQL (checked before any dataset is read).
        ArgumentError: an unknown option (names the closest).

    A refusal writes nothing and touches nothing: the compiled files have names of their own
    (their digest), ``mixture.json`` is replaced (atomically) only once they are written, and
    the error says that the existing ``mixture.json`` is unchanged and what it holds. After a
    success, compiled files neither this mixture.json nor the one it replaced names are removed
    (the replaced one's stay for a trainer that opened it a moment ago).
    """
    scan = merge_options(MixtureScan, scan, options, caller="create_mixture")
    root = Storage(dst, scan.storage_options)
    existing = _existing_mixture(root)
    try:
        report = _create(dst, scan, allow_partial)
    except (MixtureError, MixtureSpecError) as err:
        if existing is None:
            raise
        note = f"; the existing {MIXTURE_PATH} is unchanged ({existing.said})"
        raise type(err)(str(err) + note, *([err.report] if isinstance(err, MixtureError) else [])) from None
    if report.spec is not None and report.spec.index is not None:
        keep = {f.path for f in report.spec.index.values()} | (existing.compiled if existing is not None else set())
        _remove_unnamed_compiled(root, keep)
    return report


@dataclass(frozen=True)
class _Existing:
    """What a ``mixture.json`` already in the folder holds, as far as it can be read safely."""

    said: str  # "it lists 3 datasets (a, b, c), pin sha256:...", or why it cannot be said
    compiled: frozenset[str] = frozenset()  # the compiled files it names


def _existing_mixture(root: Storage) -> _Existing | None:
    """The folder's ``mixture.json`` as it is now, read without following a link or opening
    anything but a regular file (a link to a private file, ``/dev/zero``, a FIFO), or None."""
    path = os.path.join(root.root, MIXTURE_PATH)  # used when the root is local
    try:
        if root.is_local:
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                return None
            if not stat.S_ISREG(info.st_mode):
                return _Existing(f"it is {'a link' if stat.S_ISLNK(info.st_mode) else 'not a regular file'}, not read")
            size = info.st_size
        else:
            if not root.exists(MIXTURE_PATH):
                return None
            size = root.size(MIXTURE_PATH)
        if size > MAX_RECORD_BYTES:
            return _Existing(f"{size:,} bytes, more than a mixture.json may hold; not read")
        if root.is_local:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as handle:
                data = handle.read(size + 1)
        else:
            data = root.read_bytes(MIXTURE_PATH)
        spec = MixtureSpec.from_json(data, where=root.describe(MIXTURE_PATH))
    except (LeRobotShardsError, OSError) as err:
        return _Existing(f"it cannot be read as a mixture: {str(err)[:200]}")
    names = [d.name for d in spec.datasets]
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    compiled = frozenset(f.path for f in spec.index.values()) if spec.index else frozenset()
    return _Existing(f"it lists {plural_datasets(len(names))} ({listed}), pin sha256:{sha256_hex(data)}", compiled)


def _remove_unnamed_compiled(root: Storage, keep: set[str] | frozenset[str]) -> None:
    """Remove the files under ``_mixture/`` that none of ``keep`` names (older generations)."""
    try:
        for rel in root.list(MIXTURE_INDEX_DIR):
            if rel not in keep and "/" in rel and not rel.rsplit("/", 1)[1].startswith("."):
                root.remove(rel, missing_ok=True)
    except (LeRobotShardsError, OSError):
        pass  # the new mixture is written; an old file left is only space


def _create(dst: str, scan: MixtureScan, allow_partial: bool) -> MixtureReport:
    if not scan.names and not scan.sources_file and Storage(dst, scan.storage_options).exists(MANIFEST_PATH):
        parent = dst.rstrip("/").rsplit("/", 1)[0] if "/" in dst.rstrip("/") else "."
        raise MixtureError(
            f"{dst} is a packed dataset, not a folder of packs: a mixture lists the packs in a folder "
            f"(`lerobot-shards mixture create {parent}`), or name this one with a sources file; "
            f"{MIXTURE_PATH} not written"
        )
    report, opened = _scan(dst, scan)
    if not opened:
        looked = f"{len(report.rows)} dataset(s)" if report.rows else "no dataset directories"
        raise MixtureError(f"no complete packed dataset under {dst} ({looked} found); mixture.json not written", report)
    if not report.ok and not allow_partial:
        left = [f"{r.name} ({r.status})" for r in report.rows if r.status != "ok"]
        named = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        statuses = {r.status for r in report.rows if r.status != "ok"}
        if statuses == {"duplicate"}:  # nothing is wrong with them: leaving them out is not the fix
            fix = "list each pack once, or keep them with --allow-duplicates (allow_duplicates=True)"
        else:
            fix = "fix them and re-run, or allow a partial mixture (--allow-partial, allow_partial=True)" + (
                "; a pack listed twice is kept with --allow-duplicates" if "duplicate" in statuses else ""
            )
        raise MixtureError(
            f"{plural_datasets(len(left))} would be left out of the mixture: {named}; mixture.json not written: {fix}",
            report,
        )
    entries = tuple(entry for entry, _ in opened)
    # The oldest version that carries what the entries hold, so older readers read what they can.
    if any(is_fractional_fps(e.fps) for e in entries):
        version = FPS_VERSION  # carries everything version 4 does
    elif any(e.features.depth_keys for e in entries) or any(
        pack.index.manifest.format_version >= PREROLL_FORMAT_VERSION for _, pack in opened
    ):
        version = DEPTH_VERSION  # = PREROLL_VERSION: depth quantizers and members' pre-roll
    elif any(e.key_map for e in entries):
        version = KEY_MAP_VERSION
    else:
        version = MIXTURE_VERSION
    # Beyond the format's mixture bounds (episodes, members): refused by name before anything is written.
    MixtureSpec(datasets=entries, default_weights="anchors", version=version)
    _describe_partial_features(report, list(entries))
    root = Storage(dst, scan.storage_options)
    index = compile_mixture(root, [pack for _, pack in opened])
    report.spec = MixtureSpec(datasets=entries, default_weights="anchors", version=version, index=index)
    # mixture.json last: it is the commit point that names the compiled files and their digests.
    data = report.spec.to_json().encode()
    root.write_bytes(MIXTURE_PATH, data)
    report.written_to = f"{root.url}/{MIXTURE_PATH}"
    report.pin = "sha256:" + sha256_hex(data)
    return report


def _describe_partial_features(report: MixtureReport, entries: list[MixtureEntry]) -> None:
    """Name the features only some datasets have, as a reader of the mixture will treat them
    (``lerobot_shards.core.format.mixture.partial_features``: cameras and padded vectors have their own rules)."""
    named = [(entry.name, entry.mapped_features()) for entry in entries]
    cameras = {k for _, features in named for k, f in features.items() if f.dtype in ("video", "image")}
    filled, dropped = partial_features(named, exclude=cameras | set(DEFAULT_PAD_KEYS))
    having = {key: [name for name, features in named if key in features] for key in (*filled, *dropped)}
    report.filled_features = {key: having[key] for key in filled}
    report.dropped_features = {key: having[key] for key in dropped}


def format_report(report: MixtureReport) -> list[str]:
    """The report as text lines: one per dataset left out, ``STATUS name: error``, then the
    features only some datasets have (filled, or left out of every sample)."""
    lines = []
    problems = [r for r in report.rows if r.status != "ok"]
    if problems:
        lines = [f"{len(problems)} dataset(s) not in the mixture:"]
        lines += [f"{r.status.upper()} {r.name}: {r.error}" for r in problems]
    for key, names in report.filled_features.items():
        lines.append(f"FEATURE {key}: only in {', '.join(names)}; other datasets' samples get zeros and {key}_mask = False")
    for key, names in report.dropped_features.items():
        lines.append(
            f"FEATURE {key}: only in {', '.join(names)} and not numeric of one shape: left out of every sample "
            "(MixtureDataset warns; drop or rename it with key_map)"
        )
    return lines


def plural_datasets(count: int) -> str:
    return f"{count} dataset" + ("" if count == 1 else "s")


def _failure_records(root: Storage) -> dict[str, str]:
    """``{dataset name: error}`` of the failure records an array task wrote (as untrusted as any
    file in the bucket: bounded, and anything but ``{"error": ...}`` is reported as unreadable)."""
    out = {}
    for rel in root.list(FAILURES_DIR):
        if not rel.endswith(".json") or rel.count("/") != 1:
            continue
        name = rel.rsplit("/", 1)[-1].removesuffix(".json")
        where = root.describe(rel)
        try:
            if root.size(rel) > MAX_RECORD_BYTES:
                raise FormatError(f"{where}: more than {MAX_RECORD_BYTES} bytes")
            record = load_json(root.read_bytes(rel), where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH)
            if not isinstance(record, dict):
                raise FormatError(f"{where}: a {type(record).__name__}, not an object with an 'error'")
            out[name] = str(record.get("error", "?"))[:_MAX_ERROR_CHARS]
        except FormatError as err:
            out[name] = f"unreadable failure record: {err}"
    return out


def _absolute(path: str) -> bool:
    return "://" in path or path.startswith("/")
