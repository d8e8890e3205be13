"""``pack``: rewrite a LeRobot v3.0 dataset into episode-aligned shards (docs/FORMAT.md).

Flow: stage the source locally if it is remote -> compute the deterministic shard plan ->
claim the destination (``pack-plan.json``) and copy ``meta/`` -> build this part's shards
(tar + parquet, then the receipt) in a process pool, keeping shards whose receipt is already
valid -> ``finalize`` (unless ``part`` is given: then a separate ``finalize`` runs once all
parts are done). Every write goes through ``lerobot_shards.core.storage.Storage`` (retries, timeouts,
errors that name the object), local or in a bucket.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence, Set as AbstractSet
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from lerobot_shards.core.errors import FormatError, WindowError
from lerobot_shards.core.format import INFO_PATH, PackPlan, pad_columns
from lerobot_shards.core.option_fields import keyword_signature, merge_options, split_options
from lerobot_shards.core.storage import Storage
from lerobot_shards.core.windows import looks_like_frames, resolve_delta_timestamps, windows_beyond
from lerobot_shards.packer.errors import OptionsError, PackError, SourceError
from lerobot_shards.packer.options import PackOptions, PackRunOptions
from lerobot_shards.packer.plan.pack_plan import make_pack_plan, select_episodes
from lerobot_shards.packer.plan.shard_plan import shard_size_for, shards_of_part
from lerobot_shards.packer.run import staging
from lerobot_shards.packer.run.claim import check_destination, claim_destination, copy_meta
from lerobot_shards.packer.run.finalize import finalize
from lerobot_shards.packer.run.journal import Journal
from lerobot_shards.packer.run.lease import destination_lease
from lerobot_shards.packer.run.packed_info import packed_info
from lerobot_shards.packer.run.pool import run_jobs
from lerobot_shards.packer.run.receipts import kept_receipt
from lerobot_shards.packer.run.shards import ShardJob, pack_shard
from lerobot_shards.packer.shard.build import ShardSpec
from lerobot_shards.packer.shard.check import (
    empty_videos,
    nvdec_warnings,
    sound_episodes_advice,
    stretched_cameras,
    uncopyable_codecs,
)
from lerobot_shards.packer.source.base import Source, open_dataset_source
from lerobot_shards.packer.source.staging import describe_source, shown_name, source_arguments, stage_source, staged_names

log = logging.getLogger(__name__)

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass
class PackReport:
    """What a pack did, for the shards written now: ``bytes_in`` is the source read (the
    compressed video packets of the episodes' windows plus their rows' Arrow size),
    ``bytes_out`` the tar + parquet written; ``mb_per_s`` is ``bytes_in`` over wall time."""

    episodes: int = 0
    frames: int = 0
    shards: int = 0
    shards_written: int = 0
    shards_skipped: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    # Shards of this plan found damaged (receipt unreadable, a file missing, of another size, or
    # with --repair of another digest) and rebuilt: "shard-000001: why".
    shards_repaired: list[str] = field(default_factory=list)
    shards_rehashed: int = 0  # kept shards whose files --repair re-hashed
    reencoded_episodes: list[int] = field(default_factory=list)
    dropped_episodes: list[int] = field(default_factory=list)
    padded_episodes: list[int] = field(default_factory=list)
    # Episodes whose video held more frames than rows: the member keeps the first ``length``
    # (LeRobot never reads the rest), losslessly.
    trimmed_episodes: list[int] = field(default_factory=list)
    # Shards of the plan this run (its --part) had to pack or keep: 0 when a part got none.
    shards_planned_here: int = 0
    # Episodes that start between keyframes, cut from the keyframe before them (exact: readers
    # skip the pre-roll frames; the pack is format 4).
    preroll_episodes: list[int] = field(default_factory=list)
    # Files under the source's meta/ that LeRobot does not read: not copied into the pack.
    metadata_left_out: list[str] = field(default_factory=list)
    seconds: float = 0.0
    finalized: bool = False

    @property
    def mb_per_s(self) -> float:
        return self.bytes_in / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class PackProgress:
    """Where a running pack stands; ``pack_dataset(progress=...)`` gets one after each episode
    and each shard.

    Attributes:
        episodes_done, episodes_total: episodes of this run's shards packed so far (those of
            shards kept from an earlier run included) and in all.
        episodes_before: episodes an earlier run packed (kept shards): they cost nothing.
        bytes_in, bytes_out: source bytes read and shard bytes written by this run.
        shards_written, shards_total: shards committed by this run, and this run's shards.
        seconds: since the pack started.
    """

    episodes_done: int
    episodes_total: int
    episodes_before: int
    bytes_in: int
    bytes_out: int
    shards_written: int
    shards_total: int
    seconds: float


def _explain_full_disk(function: _F) -> _F:
    """A full disk (or quota) anywhere in a pack becomes a ``PackError`` saying where and what to
    do, instead of a bare ``OSError`` traceback."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except OSError as err:
            full = _full_disk_cause(err)
            if full is None:
                raise
            raise PackError(
                f"no space left {_full_place(err, full)}; free space there and re-run the same command: finished shards are kept"
            ) from err

    return cast(_F, wrapper)


def _full_place(error: BaseException, full: OSError) -> str:
    """Where the full disk is: the destination object a write failed on (a ``StorageError``'s
    URL), or the temp folder shards are staged in, named by what failed."""
    temp = tempfile.gettempdir()
    failed = next((getattr(e, "url", None) for e in _chain(error) if getattr(e, "url", None)), None)
    path = str(full.filename) if full.filename else failed
    if path is not None and not str(path).startswith(os.path.join(temp, staging.PREFIX)):
        return f"on the destination, writing {path}"
    return f"in the temp folder shards are staged in ({temp}{', writing ' + str(path) if path else ''}; set TMPDIR to move it)"


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and its causes, each once."""
    out: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not e for e in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def _full_disk_cause(error: BaseException) -> OSError | None:
    """The ENOSPC/EDQUOT error behind ``error`` (itself, or what a ``StorageError`` wraps)."""
    return next((e for e in _chain(error) if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)), None)


@_explain_full_disk
@keyword_signature(PackOptions, PackRunOptions)
def pack_dataset(
    src: str | None,
    dst: str,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    options: PackOptions | None = None,
    run: PackRunOptions | None = None,
    progress: Callable[[PackProgress], None] | None = None,
    **overrides: Any,
) -> PackReport:
    """Pack a LeRobot v3.0 dataset into ``dst`` (a directory or any fsspec URL).

    ``src`` is a local root or fsspec URL; or give ``repo_id`` (+ ``revision``) for the Hub.
    ``options`` shape the pack (``PackOptions``, recorded in it); ``run`` says how this run
    reads, writes and spreads its work (``PackRunOptions``); any field of either may instead be
    given by name (``pack_dataset(src, dst, video="hevc", workers=8)``; ``help(pack_dataset)``
    lists them). With ``part=(i, n)`` only that part's shards are built and no manifest is
    written (run ``finalize`` after all parts). Re-running resumes: shards with a valid
    receipt are kept. ``progress`` is called with a ``PackProgress`` after each episode and
    shard.

    What this machine writes is recorded in the pack journal (``journal``: a directory,
    default ``$LEROBOT_SHARDS_JOURNAL`` or ``~/.cache/lerobot-shards/journal``): a resume
    keeps only shards the journal records, and ``finalize`` publishes only their digests.
    ``trust_destination`` also adopts shards another machine wrote, after re-hashing their
    files (for a destination only you can write; docs/SECURITY.md).

    Returns:
        A ``PackReport``.

    Raises:
        OptionsError: a bad option value (names it and what is allowed).
        ArgumentError: a keyword that is no option (names the closest one).
        SourceError: bad source (missing files, unsupported version, ...).
        PackError: frame mismatches, corrupt video, a destination holding another plan;
            names the episode, file or shard.
        StorageError: the destination failed beyond the retry policy (finished shards are
            kept: re-running resumes).
    """
    started = time.perf_counter()
    shaping, running = split_options((PackOptions, PackRunOptions), overrides, caller="pack_dataset")
    options = merge_options(PackOptions, options, shaping, caller="pack_dataset")
    run = merge_options(PackRunOptions, run, running, caller="pack_dataset")
    storage = Storage(dst, run.storage_options, retry=run.retry)
    storage.check_writable()  # before the source is staged or read
    local_root = _stage(src, repo_id, revision, options, run)
    with staged_names(local_root, shown_name(src, repo_id=repo_id, revision=revision)):
        return _pack_staged(local_root, storage, src, dst, repo_id, revision, options, run, started=started, progress=progress)


def _pack_staged(
    local_root: Path,
    storage: Storage,
    src: str | None,
    dst: str,
    repo_id: str | None,
    revision: str | None,
    options: PackOptions,
    run: PackRunOptions,
    *,
    started: float,
    progress: Callable[[PackProgress], None] | None,
) -> PackReport:
    """Open the staged source, plan it, and pack the plan under the destination's lease."""
    source = open_dataset_source(local_root, follow_symlinks=run.follow_symlinks)
    options = source_windows(source, options, run)
    check_destination(storage, source.root)
    plan, sizes = _plan_pack(
        source,
        options,
        description=describe_source(src, repo_id=repo_id, revision=revision, description=source.description()),
        in_frames=set(run.window_frames),
        check_command=["lerobot-shards", "check", *source_arguments(src, repo_id=repo_id, revision=revision)],
        pack_command=["lerobot-shards", "pack", *source_arguments(src, repo_id=repo_id, revision=revision), dst],
        given_options=[
            flag
            for flag, given in (("--src-storage-options", run.src_storage_options), ("--storage-options", run.storage_options))
            if given
        ],
    )
    with destination_lease(storage, run.part):  # one running pack per part of a destination
        return _pack_claimed(storage, plan, sizes, source, options, run, dst=dst, started=started, progress=progress)


def _pack_claimed(
    storage: Storage,
    plan: PackPlan,
    sizes: list[int],
    source: Source,
    options: PackOptions,
    run: PackRunOptions,
    *,
    dst: str,
    started: float,
    progress: Callable[[PackProgress], None] | None,
) -> PackReport:
    """The rest of ``pack_dataset`` once its lease is held: claim, build the shards, finalize."""
    journal = _claim(storage, plan, source, options, run)
    shard_ids = list(range(len(plan.shards))) if run.part is None else shards_of_part(len(plan.shards), *run.part)
    report = PackReport(shards=len(shard_ids), metadata_left_out=list(source.unknown_metadata_files()))
    _warn_metadata_left_out(source.root, report.metadata_left_out)
    todo = _shards_to_build(storage, shard_ids, plan, source, journal, run, report)
    tracker = _Progress(report, plan, shard_ids, todo, started, progress)
    jobs = _shard_jobs(plan, todo, options, run, source_root=str(source.root), dst=dst, journal=journal, sizes=sizes)
    if progress is not None and not jobs:
        progress(tracker.snapshot())  # nothing to pack: still say where the pack stands
    run_jobs(
        pack_shard,
        jobs,
        workers=run.workers,
        on_result=tracker.on_result,
        on_progress=tracker.on_progress if progress is not None else None,
    )
    if run.part is None:
        finalize(dst, run=run)
        report.finalized = True
    report.seconds = time.perf_counter() - started
    return report


# -- the steps of pack_dataset, in order ---------------------------------------------------------


def _stage(src: str | None, repo_id: str | None, revision: str | None, options: PackOptions, run: PackRunOptions) -> Path:
    """Stage the source (a bucket or the Hub: only what the selected episodes need); a local
    root is itself. Returns the local root."""
    return stage_source(
        src,
        repo_id=repo_id,
        revision=revision,
        episodes=list(options.episodes) if options.episodes is not None else None,
        storage_options=run.src_storage_options,
        retry=run.retry,
        cache_dir=run.cache_dir,
    )


def source_windows(source: Source, options: PackOptions, run: PackRunOptions) -> PackOptions:
    """The options with the windows given in frames made seconds at the source's fps, every
    window checked against its fps and features (``pack`` and ``check`` alike).

    Raises:
        OptionsError: a window that does not resolve, names no feature, or is given twice.
    """
    if run.window_frames:
        clash = sorted(set(run.window_frames) & set(options.windows))
        if clash:
            raise OptionsError(f"windows {clash} given both in seconds and in frames", option="windows")
        in_seconds = {
            name: {key: [offset / source.fps for offset in offsets] for key, offsets in window.items()}
            for name, window in run.window_frames.items()
        }
        options = replace(options, windows={**options.windows, **in_seconds})
    _check_windows(options, source.fps, list(source.features), in_frames=set(run.window_frames))
    return options


def _plan_pack(
    source: Source,
    options: PackOptions,
    *,
    description: dict,
    in_frames: AbstractSet[str] = frozenset(),
    check_command: Sequence[str] = ("lerobot-shards", "check", "SRC"),
    pack_command: Sequence[str] = ("lerobot-shards", "pack", "SRC", "DST"),
    given_options: Sequence[str] = (),
) -> tuple[PackPlan, list[int]]:
    """Check the windows and the source, and plan the shards. Planning probes every needed file
    (parquet footer, video header): a bad source fails here, naming the file and episode,
    before anything is written. Returns the plan and each planned episode's estimated bytes."""
    _check_windows(options, source.fps, list(source.features))
    stretched = stretched_cameras(source, options)
    if stretched:
        raise OptionsError(stretched, option="resize")
    for said in nvdec_warnings(
        source, options, command=check_command
    ):  # as check says it: before packing, not only by info after
        log.warning("%s", said)
    planned = select_episodes(source.episode_indices, options.episodes)
    empty = empty_videos(source, planned)
    if empty:  # before any file is opened: the episodes that pack are named, with the command
        note = f" with your {' and '.join(given_options)}" if given_options else ""
        raise SourceError(sound_episodes_advice(empty, planned, pack_command, options, note=note))
    sizes = [source.estimated_episode_bytes(e) for e in planned]
    left_out = source.left_out()  # recorded (only when there is some: other plans keep their bytes)
    recorded = {**description, "fingerprint": source.fingerprint(planned), **({"left_out": left_out} if left_out else {})}
    plan = make_pack_plan(planned, sizes, options, recorded)
    longest = max((source.episodes[e].length for e in planned), default=0)
    _warn_windows_beyond(options, source.fps, longest, in_frames=in_frames)
    drift = source.schema_drift(planned)
    if drift:
        log.warning(
            "%s: the data parquet columns differ from meta/info.json features (only in info.json: %s; "
            "only in the parquet: %s); packing what the parquet holds",
            source.root,
            drift.only_in_info,
            drift.only_in_parquet,
        )
        _check_windows(options, source.fps, source.video_keys + drift.columns, missing=drift.only_in_info)
    uncopyable = uncopyable_codecs(source, options, planned)
    if uncopyable:
        raise SourceError(uncopyable)
    source.check_tasks()
    for note in source.reading_notes():
        log.warning("%s", note)
    return plan, sizes


def _claim(storage: Storage, plan: PackPlan, source: Source, options: PackOptions, run: PackRunOptions) -> Journal:
    """Claim the destination for ``plan`` (or find it already holds it), clear temporary files
    an interrupted run left, copy ``meta/`` (``info.json`` as the pack's own: ``packed_info``)
    and record it in this machine's journal."""
    claim_destination(storage, plan)
    removed = storage.remove_stale_temp_files()
    if removed:
        log.warning("%s: removed %d temporary file(s) left by an interrupted run", storage.url, removed)
    swept = staging.sweep(storage.url)  # what a killed run of this pack staged in the temp folder
    if swept:
        log.warning("removed %d staging folder(s) a killed run of %s left in %s", len(swept), storage.url, swept[0].parent)
    journal = Journal(storage.url, run.journal)
    journal.record_meta(
        plan.sha256,
        copy_meta(source, storage, rewrite={INFO_PATH: lambda _: packed_info(source.lerobot_info(), source.features, options)}),
    )
    return journal


def _warn_metadata_left_out(root: object, left_out: list[str]) -> None:
    if left_out:
        log.warning(
            "%s: left out of the pack, files under meta/ that LeRobot does not read: %s",
            root,
            ", ".join(left_out[:20]) + (f" and {len(left_out) - 20} more" if len(left_out) > 20 else ""),
        )


def _shards_to_build(
    storage: Storage,
    shard_ids: list[int],
    plan: PackPlan,
    source: Source,
    journal: Journal,
    run: PackRunOptions,
    report: PackReport,
) -> list[int]:
    """The shards of ``shard_ids`` without a receipt this run may keep (a re-run resumes; with
    ``repair`` kept shards are re-hashed and damaged ones rebuilt); kept shards are counted
    into ``report``."""
    todo: list[int] = []
    unvouched: list[str] = []
    for shard in shard_ids:
        receipt = kept_receipt(
            storage,
            shard,
            plan,
            source.video_keys,
            journal,
            trust_destination=run.trust_destination,
            repair=run.repair,
            damaged=report.shards_repaired,
            unvouched=unvouched,
        )
        if receipt is not None:
            report.shards_skipped += 1
            report.shards_rehashed += run.repair
            _account(report, receipt.to_dict(), written=False)
        else:
            todo.append(shard)
    if unvouched:  # once for the run, not once per shard (a copied pack has all of them)
        log.warning(
            "%s: %d shard receipt(s) (%s%s) are not in this machine's pack journal (%s): written by another run or "
            "machine; rebuilding them (--trust-destination adopts them after re-hashing their files)",
            storage.url,
            len(unvouched),
            ", ".join(unvouched[:3]),
            f" and {len(unvouched) - 3} more" if len(unvouched) > 3 else "",
            journal.dir,
        )
    report.shards_planned_here = len(shard_ids)
    return todo


class _Progress:
    """Where a pack stands, for ``progress``: kept shards' episodes count as done before the run."""

    def __init__(
        self,
        report: PackReport,
        plan: PackPlan,
        shard_ids: list[int],
        todo: list[int],
        started: float,
        progress: Callable[[PackProgress], None] | None,
    ):
        self.report, self.started, self.progress = report, started, progress
        self.shards_total = len(shard_ids)
        self.total = sum(len(plan.shards[s]) for s in shard_ids)
        self.before = self.total - sum(len(plan.shards[s]) for s in todo)
        self.done, self.read = self.before, 0

    def snapshot(self) -> PackProgress:
        return PackProgress(
            episodes_done=self.done,
            episodes_total=self.total,
            episodes_before=self.before,
            bytes_in=self.read,
            bytes_out=self.report.bytes_out,
            shards_written=self.report.shards_written,
            shards_total=self.shards_total,
            seconds=time.perf_counter() - self.started,
        )

    def on_progress(self, item: tuple[int, int]) -> None:
        """A job's (episodes, bytes read) since its last report."""
        self.done += item[0]
        self.read += item[1]
        if self.progress is not None:
            self.progress(self.snapshot())

    def on_result(self, receipt: dict) -> None:
        """A shard finished: its receipt counted into the report."""
        _account(self.report, receipt, written=True)
        if self.progress is not None:
            self.progress(self.snapshot())


def _shard_jobs(
    plan: PackPlan,
    todo: list[int],
    options: PackOptions,
    run: PackRunOptions,
    *,
    source_root: str,
    dst: str,
    journal: Journal,
    sizes: list[int],
) -> list[ShardJob]:
    """One job per shard to build. With more workers than shards, a re-encode spreads each
    shard's members over the spare cores (byte-identical to a sequential build at camera sizes;
    DESIGN_NOTES 16 says where not); copy mode
    cannot, and says what shard size would use them."""
    jobs = [
        ShardJob(
            spec=ShardSpec(shard=s, episodes=tuple(plan.shards[s]), options=options, plan_sha256=plan.sha256),
            source_root=source_root,
            dst=dst,
            run=run,
            journal=journal,
        )
        for s in todo
    ]
    workers = run.workers
    if workers > 1 and len(jobs) < workers and jobs:
        if options.video != "copy":
            jobs = [replace(job, member_workers=max(1, workers // len(jobs))) for job in jobs]
        else:
            wanted = min(workers, len(sizes))
            suggested = shard_size_for(sizes, wanted) if wanted > len(jobs) else None
            fix = (
                f"pack with --shard-size-mb {suggested:g} ({wanted} shards or more) to use them"
                if suggested is not None
                else f"a shard holds whole episodes, so --workers {len(jobs)} is as fast"
            )
            log.warning(
                "--workers %d, but only %d shard(s) to build: each shard is packed by one process, so %d core(s) stay idle; %s",
                workers,
                len(jobs),
                workers - len(jobs),
                fix,
            )
    return jobs


def _check_windows(
    options: PackOptions,
    fps: float,
    known_keys: list[str],
    missing: Sequence[str] = (),
    *,
    in_frames: AbstractSet[str] = frozenset(),
) -> None:
    """Every window must resolve at the source's fps over keys the data holds.

    Raises:
        OptionsError: names the window and what is wrong, and the flag it came from
            (``option`` is ``window_frames`` for the windows given in frames, else ``windows``).
    """
    try:  # before any shard: finalize wrote the samples index only after every shard was packed
        pad_columns(options.windows, fold_case=True)
    except FormatError as err:
        raise OptionsError(str(err), option="window_frames" if set(options.windows) <= set(in_frames) else "windows") from None
    for name, window in options.windows.items():
        option = "window_frames" if name in in_frames else "windows"
        absent = [k for k in window if k in missing]
        if absent:
            raise OptionsError(
                f"window {name!r}: {absent} declared in meta/info.json but missing from the data parquet", option=option
            )
        try:
            resolve_delta_timestamps(window, fps, tolerance_s=options.tolerance_s, known_keys=known_keys)
        except (WindowError, ValueError) as err:
            hint = ""
            if "not multiples of 1/fps" in str(err) and option == "windows":  # then every delta is a number
                frames = {k: [round(float(d) * fps) for d in v] for k, v in window.items()}
                hint = f"; or give it in frames: --window-frames {name}='{json.dumps(frames, separators=(',', ':'))}'"
            raise OptionsError(f"window {name!r}: {err}{hint}", option=option) from None


def _warn_windows_beyond(options: PackOptions, fps: float, longest: int, *, in_frames: AbstractSet[str]) -> None:
    """Say (a warning, not an error: LeRobot pads such windows too) which precomputed windows
    no episode holds whole: their ``chunk_*_pad`` columns then count padding on every anchor.
    A window in seconds whose deltas are all whole numbers was likely meant in frames: said."""
    for name, window in options.windows.items():
        offsets = resolve_delta_timestamps(window, fps, tolerance_s=options.tolerance_s)
        sentences = windows_beyond(offsets, longest, fps)
        if sentences and name not in in_frames and all(looks_like_frames(v) for v in window.values()):
            frames = json.dumps({k: [int(d) for d in v] for k, v in window.items()}, separators=(",", ":"))
            sentences[-1] += f"; did you mean frames? --window-frames {name}='{frames}'"
        for sentence in sentences:
            log.warning("window %r: %s", name, sentence)


def _account(report: PackReport, receipt: dict, *, written: bool) -> None:
    report.episodes += len(receipt["episodes"])
    report.frames += receipt["frames"]
    report.dropped_episodes += receipt["dropped"]
    report.padded_episodes += receipt["padded"]
    report.trimmed_episodes += receipt.get("trimmed", [])
    report.preroll_episodes += [row["episode_index"] for row in receipt["episodes"] if any(k.endswith("/preroll") for k in row)]
    report.reencoded_episodes += receipt["reencoded"]
    if written:
        report.shards_written += 1
        report.bytes_in += receipt.get("bytes_in", 0)
        report.bytes_out += receipt["tar_bytes"] + receipt["parquet_bytes"]
