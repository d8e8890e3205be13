"""``verify``: check a packed dataset against its manifest, its indexes and (optionally) decode.

Everything the reader trusts is checked, through the same parsers the reader uses
(``lerobot_shards.core.format``): the manifest (schema and ``content_sha256``, optionally a pin), the size
and SHA-256 of every file it records (``index/``, ``meta/``, shard tars and parquets), the
episodes index against the manifest, the sample index against the episodes index (anchors,
rows and pad counts recomputed), every row group against its recorded span and digest and
its rows against the index, every tar header and member digest; with ``decode``, that every
member decodes to its recorded frame count at the manifest's frame size. Any damage that
could change what a reader yields is reported; verify itself never crashes on bad input.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from lerobot_shards.core.address_space import limit_error
from lerobot_shards.core.errors import (
    DecodeError,
    FormatError,
    NotAPackError,
    PinMismatchError,
    StorageError,
)
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    MANIFEST_PATH,
    PLAN_PATH,
    SAMPLES_INDEX_PATH,
    SHARDS_DIR,
    TASKS_PATH,
    EpisodeTable,
    Manifest,
    PackPlan,
    check_bytes,
    check_mp4,
    image_column_bytes,
    open_image,
    pad_column,
    parse_episodes_index,
    samples_index_schema,
    shard_parquet_path,
    shard_receipt_path,
    shard_tar_path,
    video_member_name,
)
from lerobot_shards.core.format.features import image_column_type_ok
from lerobot_shards.core.format.fields import check_pin
from lerobot_shards.core.format.limits import MAX_RECORD_BYTES
from lerobot_shards.core.format.mp4 import check_preroll, read_track
from lerobot_shards.core.format.parquet import iter_bounded_batches
from lerobot_shards.core.format.parquet.bounded import read_parquet_schema
from lerobot_shards.core.format.parquet.row_groups import check_row_group, decode_row_group, feature_budget, parse_footer
from lerobot_shards.core.pack.packed_index import load_tasks, read_manifest, verified_read
from lerobot_shards.core.storage import Storage
from lerobot_shards.core.windows import pad_counts, resolve_delta_timestamps
from lerobot_shards.packer.options import PackOptions

_SAMPLE_BATCH_ROWS = 1 << 18


@dataclass
class VerifyReport:
    """Problems found (empty = verified) and what was checked."""

    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    episodes_checked: int = 0
    members_decoded: int = 0
    pictures_decoded: int = 0
    manifest_sha256: str = ""
    # What the pack records about how it was made (the manifest's, else pack-plan.json's):
    # the source and the options a repairing ``pack --repair`` must be given, parsed
    # (``PackOptions.from_recorded``); ``options_error`` says why they could not be. The source
    # is untrusted text (shown quoted, never run).
    source: dict = field(default_factory=dict)
    options: PackOptions | None = None
    options_error: str | None = None
    # What failed, so the fix said fits it: "damaged" (a repair rebuilds it), "pin" (not the
    # pinned pack: no repair changes a pin), "unfinished" (no manifest yet; ``ready_to_finalize``
    # when every planned shard has its receipt), "missing", "bucket", "file", "mixture" (no
    # pack there), "storage" (the storage failed), or "" when nothing failed.
    failure: str = ""
    ready_to_finalize: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(
    dst: str,
    *,
    decode: bool = False,
    storage_options: dict | None = None,
    manifest_sha256: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
) -> VerifyReport:
    """Check a packed dataset; see the module docstring for what is checked.

    Args:
        dst: the packed root (path or fsspec URL).
        decode: also decode every member (slow: every frame of every camera).
        storage_options: fsspec options for remote roots.
        manifest_sha256: a pin (``sha256:<hex>``): the manifest must be exactly that one.
        progress: called after each shard with (shards checked, shards, episodes checked).

    Returns:
        A ``VerifyReport``; ``report.ok`` is False when anything is wrong, and
        ``report.manifest_sha256`` is the pin of the manifest found.
    """
    if manifest_sha256 is not None:
        manifest_sha256 = check_pin(manifest_sha256)  # bad input, said before anything is read
    storage = Storage(dst, storage_options)
    report = VerifyReport()
    manifest = _open_manifest(storage, manifest_sha256, report)
    if manifest is None:
        return report
    _recorded(report, manifest.source, manifest.options, where=storage.describe(MANIFEST_PATH))
    intact, absent = _files(storage, manifest, report)
    # A file whose digest differs is reported, never parsed: its bytes are not the packed ones,
    # and nothing bounds what a parser of them would allocate.
    if not intact.get(EPISODES_INDEX_PATH):
        return report
    try:
        data = verified_read(storage, manifest, EPISODES_INDEX_PATH)
        episodes = parse_episodes_index(data, manifest, where=storage.describe(EPISODES_INDEX_PATH), with_tasks=True)
    except (FormatError, StorageError) as err:
        report.problems.append(str(err))
        return report
    if intact.get(TASKS_PATH):
        _guarded(report, TASKS_PATH, lambda: _tasks_problems(storage, manifest, episodes))
    if intact.get(SAMPLES_INDEX_PATH):
        _guarded(report, SAMPLES_INDEX_PATH, lambda: _samples_index_problems(storage, manifest, episodes))
    for shard in manifest.shards:
        _shard_problems(storage, manifest, shard, episodes, absent, decode, report)
        if progress is not None:
            progress(report.shards_checked, len(manifest.shards), report.episodes_checked)
    if report.problems:
        report.failure = "damaged"
    return report


# What a manifest that cannot be read means for the report (``VerifyReport.failure``).
_OPEN_FAILURES: tuple[tuple[type[Exception], str | None], ...] = (
    (NotAPackError, None),  # its own reason: missing, unfinished, a file, a mixture...
    (PinMismatchError, "pin"),
    (StorageError, "storage"),
    (FormatError, "damaged"),
)


def _open_manifest(storage: Storage, pin: str | None, report: VerifyReport):
    """The pack's manifest (its pin recorded in ``report``), or None with the failure in
    ``report``; without a readable manifest, how the pack was made as its plan records it."""
    try:
        manifest, report.manifest_sha256 = read_manifest(storage, manifest_sha256=pin)
        return manifest
    except tuple(kind for kind, _ in _OPEN_FAILURES) as err:
        report.problems.append(str(err))
        reason = err.reason if isinstance(err, NotAPackError) else next(r for kind, r in _OPEN_FAILURES if isinstance(err, kind))
        report.failure = str(reason)
        if report.failure in ("unfinished", "damaged"):
            _recorded_by_plan(storage, report)
        return None


def _shard_problems(storage: Storage, manifest, shard, episodes, absent: set, decode: bool, report: VerifyReport) -> None:
    """One shard's parquet (row groups against the index) and tar (members), each file that is
    not there one line ("missing"), not one more per row group or member."""
    report.shards_checked += 1
    first, stop = episodes.shard_range(shard.index)
    mine = episodes[first:stop]
    report.episodes_checked += len(mine)
    if shard_parquet_path(shard.index) not in absent:
        _guarded(
            report,
            shard_parquet_path(shard.index),
            functools.partial(_shard_parquet_problems, storage, manifest, shard, mine, decode, report),
        )
    if shard_tar_path(shard.index) not in absent:
        _guarded(
            report,
            shard_tar_path(shard.index),
            functools.partial(_member_problems, storage, manifest, shard, mine, decode, report),
        )


def _recorded_by_plan(storage: Storage, report: VerifyReport) -> None:
    """Without a readable manifest, how the pack was made as ``pack-plan.json`` records it."""
    try:
        data = storage.read_prefix(PLAN_PATH, MAX_RECORD_BYTES + 1)  # from_json refuses more than the bound
        plan = PackPlan.from_json(data, where=storage.describe(PLAN_PATH))
    except (FormatError, StorageError, FileNotFoundError):
        return
    _recorded(report, plan.source, plan.options, where=storage.describe(PLAN_PATH))
    try:
        receipts = {rel for rel in storage.list(SHARDS_DIR) if rel.endswith(".json")}
    except (StorageError, OSError):
        return
    report.ready_to_finalize = all(shard_receipt_path(i) in receipts for i in range(len(plan.shards)))


def _recorded(report: VerifyReport, source: dict, options: object, *, where: str) -> None:
    """Keep how the pack says it was made, its options parsed: recorded values of the wrong
    type (a hostile or damaged record) leave ``options`` None and say why, never a crash."""
    report.source = source if isinstance(source, dict) else {}
    try:
        report.options = PackOptions.from_recorded(options, where=where)
    except FormatError as err:
        report.options, report.options_error = None, str(err)


def _reraise_limit(err: BaseException, where: str = "verify") -> None:
    """Raise a limit of this process (``ulimit -v``, ``-n``, ``-u``; ``limit_error``) instead of
    reporting ``err`` as damage: as a problem it would advise ``--repair``, which repairs nothing."""
    limited = limit_error(err, where)
    if limited is err:
        raise err
    if limited is not None:
        raise limited from err


def _guarded(report: VerifyReport, rel: str, check) -> None:
    """Run one check; damage that makes a library raise something unexpected (pyarrow on a
    mangled file) is a problem to report, never a crash of verify."""
    try:
        report.problems.extend(check())
    except Exception as err:
        _reraise_limit(err, rel)
        if not isinstance(err, FormatError | OSError):
            report.problems.append(f"{rel}: cannot be checked ({type(err).__name__}: {str(err)[:300]})")
            return
        report.problems.append(str(err) if rel in str(err) else f"{rel}: {err}")


def _files(storage: Storage, manifest: Manifest, report: VerifyReport) -> tuple[dict[str, bool], set[str]]:
    """Size and SHA-256 of every recorded file and shard file; returns ``({rel: ok}, absent)``:
    ``absent`` the files that are not there (or cannot be read at all)."""
    expected = {rel: (entry.bytes, entry.sha256) for rel, entry in manifest.files.items()}
    for shard in manifest.shards:
        expected[shard_tar_path(shard.index)] = (shard.tar_bytes, shard.tar_sha256)
        expected[shard_parquet_path(shard.index)] = (shard.parquet_bytes, shard.parquet_sha256)
    ok, absent = {}, set()
    for rel, (size, sha256) in expected.items():
        try:
            found_sha, found_size = storage.digest(rel)
        except FileNotFoundError:
            report.problems.append(f"{rel}: missing")
            ok[rel] = False
            absent.add(rel)
            continue
        except OSError as err:
            _reraise_limit(err, rel)
            report.problems.append(f"{rel}: cannot be read ({err})")
            ok[rel] = False
            absent.add(rel)
            continue
        if found_size != size:
            report.problems.append(f"{rel}: {found_size} bytes, manifest says {size}")
        elif found_sha != sha256:
            report.problems.append(f"{rel}: sha256 {found_sha[:12]}... differs from manifest {sha256[:12]}...")
        ok[rel] = found_size == size and found_sha == sha256
    return ok, absent


def _tasks_problems(storage: Storage, manifest: Manifest, episodes) -> list[str]:
    """``meta/tasks.parquet`` reads within the format's bounds, as a reader reads it."""
    load_tasks(storage, manifest)
    return []


def _samples_index_problems(storage: Storage, manifest: Manifest, episodes: EpisodeTable) -> list[str]:
    """The sample index: its schema, one anchor per frame of each episode at the right shard
    rows, and pad counts equal to a recomputation from the manifest's windows. Read in
    batches (a row per frame), never whole, after its row count matches the manifest's."""
    where = storage.describe(SAMPLES_INDEX_PATH)
    data = verified_read(storage, manifest, SAMPLES_INDEX_PATH)
    expected = samples_index_schema(manifest.windows)
    schema = read_parquet_schema(data, where=where)
    if not schema.remove_metadata().equals(expected):
        return [f"{where}: columns {schema.names[:20]} differ from the format's {expected.names}"]
    ordered = episodes.take(np.argsort(episodes.dataset_from_index, kind="stable"))  # anchors are sorted by global index
    length = ordered.length
    starts = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
    per_episode = {
        "episode_index": ordered.episode_index,
        "index": ordered.dataset_from_index,
        "shard": ordered.shard,
        "row": ordered.row_start,
    }
    windows = {
        name: resolve_delta_timestamps(w, manifest.fps, tolerance_s=manifest.tolerance_s) for name, w in manifest.windows.items()
    }
    wrong_episodes: set[int] = set()
    wrong_pads: dict[str, int] = {}
    first = 0
    try:
        frames = manifest.totals["frames"]
        batches = iter_bounded_batches(
            data, where=where, rows=frames, rows_expected=f"the manifest says {frames} frames", batch_rows=_SAMPLE_BATCH_ROWS
        )
    except FormatError as err:
        return [str(err)]
    for batch in batches:
        rows = np.arange(first, first + batch.num_rows, dtype=np.int64)
        first += batch.num_rows
        position = np.searchsorted(starts, rows, side="right") - 1
        frame = rows - starts[position]
        column = {name: batch.column(name).to_numpy(zero_copy_only=False) for name in batch.schema.names}
        bad = (column["episode_index"] != per_episode["episode_index"][position]) | (column["frame_index"] != frame)
        bad |= column["index"] != per_episode["index"][position] + frame
        bad |= column["shard"] != per_episode["shard"][position]
        bad |= column["row"] != per_episode["row"][position] + frame
        wrong_episodes.update(int(p) for p in np.unique(position[bad])[:20])
        for name, offsets in windows.items():
            for key, key_offsets in offsets.items():
                before, after = pad_counts(column["frame_index"], length[position], key_offsets)
                for side, values in (("before", before), ("after", after)):
                    pad = pad_column(name, key, side)
                    wrong_pads[pad] = wrong_pads.get(pad, 0) + int(np.sum(column[pad] != values))
    problems = [
        f"{where}: episode {ordered[p].episode_index}: anchors do not match frames 0..{ordered[p].length - 1} "
        f"at rows {ordered[p].row_start}.. of shard {ordered[p].shard}"
        for p in sorted(wrong_episodes)[:20]
    ]
    problems += [
        f"{where}: column {pad} disagrees with its window at {count} anchors" for pad, count in wrong_pads.items() if count
    ]
    return problems


def _shard_parquet_problems(
    storage: Storage, manifest: Manifest, shard, episodes, decode: bool, report: VerifyReport
) -> list[str]:
    """Footer and row groups parse and check as a reader checks them; rows match the index;
    columns whose type the format fixes have it; with ``decode``, every picture of an image
    feature decodes to its feature's shape."""
    rel = shard_parquet_path(shard.index)
    where = storage.describe(rel)
    try:
        footer = shard.parquet_footer
        metadata = parse_footer(
            storage.read_range(rel, footer.offset, footer.bytes), size=footer.bytes, sha256=footer.sha256, where=where
        )
    except (FormatError, OSError) as err:
        _reraise_limit(err, where)
        return [str(err)]
    problems = []
    groups: dict[int, list] = {}
    for entry in episodes:
        groups.setdefault(entry.row_group.index, []).append(entry)
    for group, members in groups.items():
        ref = members[0].row_group
        try:
            for entry in members:
                check_row_group(
                    metadata,
                    group,
                    offset=ref.offset,
                    nbytes=ref.bytes,
                    first_row=entry.row_start,
                    rows=entry.length,
                    group_rows=sum(e.length for e in members),
                    where=where,
                )
            data = storage.read_range(rel, ref.offset, ref.bytes)
            table = decode_row_group(
                metadata,
                group,
                data,
                offset=ref.offset,
                sha256=ref.sha256,
                file_size=shard.parquet_bytes,
                single_episode=len(members) == 1,
                values_per_row=feature_budget(manifest.features),
                where=where,
            )
        except (FormatError, OSError) as err:
            _reraise_limit(err, where)
            problems.append(str(err))
            continue
        group_start = sum(metadata.row_group(g).num_rows for g in range(group))
        for entry in members:
            rows = table.slice(entry.row_start - group_start, entry.length)
            frames = np.arange(entry.length)
            if not (
                np.array_equal(rows["episode_index"].to_numpy(), np.full(entry.length, entry.episode_index))
                and np.array_equal(rows["frame_index"].to_numpy(), frames)
                and np.array_equal(rows["index"].to_numpy(), entry.dataset_from_index + frames)
            ):
                problems.append(f"{where}: rows of episode {entry.episode_index} in row group {group} do not match the index")
            elif decode:
                problems += _picture_problems(rows, manifest, entry.episode_index, where, report)
    return problems


def _picture_problems(rows, manifest: Manifest, episode: int, where: str, report: VerifyReport) -> list[str]:
    """Every picture of the episode's image features decodes to its feature's shape (the
    reader's own check, ``open_image``), counted in ``report.pictures_decoded``."""
    problems = []
    for key in manifest.features.image_keys:
        camera = manifest.features[key].camera
        if key not in rows.column_names or camera is None:
            continue
        if not image_column_type_ok(rows[key].type):
            problems.append(f"{where}: image feature {key!r} is stored as {str(rows[key].type)[:120]}")
            continue
        for frame, cell in enumerate(rows[key].to_pylist()):
            try:
                open_image(image_column_bytes(cell), camera=camera, where=f"{where} episode {episode} image {key} frame {frame}")
            except (FormatError, DecodeError) as err:
                problems.append(str(err))
                break  # one bad picture names the episode's feature; the rest would repeat it
            report.pictures_decoded += 1
    return problems


def _member_problems(storage: Storage, manifest: Manifest, shard, episodes, decode: bool, report: VerifyReport) -> list[str]:
    """Tar headers name the right member, member bytes match their digests, and (``decode``)
    every member decodes to its recorded frames at the manifest's frame size."""
    rel = shard_tar_path(shard.index)
    problems = []
    for entry in episodes:
        for key, member in entry.cameras.items():
            where = f"{rel} episode {entry.episode_index} camera {key}"
            try:
                blob = storage.read_range(rel, member.offset - 512, member.size + 512)
            except OSError as err:
                _reraise_limit(err, where)
                problems.append(f"{where}: cannot be read ({err})")
                continue
            header, data = blob[:512], blob[512:]
            name = header[:100].rstrip(b"\0").decode(errors="replace")
            expected_name = video_member_name(entry.episode_index, key)
            # Long names live in a pax header before this one; the ustar name is truncated.
            if len(expected_name.encode()) <= 100 and name != expected_name:
                problems.append(f"{where}: tar header names {name!r}, expected {expected_name!r}")
            try:
                check_bytes(data, size=member.size, sha256=member.sha256, where=where)
                if member.preroll:  # boxes only: a pre-roll moved across a keyframe shifts every row
                    check_preroll(
                        read_track(data, where=where, frames=member.samples).layout.keyframes, member.preroll, where=where
                    )
            except FormatError as err:
                problems.append(str(err))
                continue
            if decode:
                camera = manifest.features[key].camera
                assert camera is not None  # a video feature is a camera (parse_feature)
                problem = _decode_problem(data, member.samples, camera.size, where)
                report.members_decoded += 1
                if problem:
                    problems.append(problem)
    return problems


def _decode_problem(data: bytes, frames: int, size: tuple[int, int], where: str) -> str | None:
    import av  # only verify --decode needs a decoder
    from av.error import FFmpegError

    height, width = size
    try:  # boxes and sample tables first: FFmpeg sizes its index by what they claim
        check_mp4(data, where=where, frames=frames, height=height, width=width)
    except FormatError as err:
        return str(err)
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            stream = container.streams.video[0]
            if (stream.codec_context.height, stream.codec_context.width) != (height, width):
                return f"{where}: frames are {stream.codec_context.height}x{stream.codec_context.width}, the manifest says {height}x{width}"
            count = 0
            for frame in container.decode(stream):
                if (frame.height, frame.width) != (height, width):
                    return f"{where}: frame {count} is {frame.height}x{frame.width}, the manifest says {height}x{width}"
                count += 1
    except (FFmpegError, IndexError) as err:
        # The decoder could not start its threads or allocate under a limit (ulimit -v, -u):
        # not a damaged member, and --repair would be wrong advice.
        _reraise_limit(err, f"{where}: decoding")
        return f"{where}: does not decode ({err})"
    if count != frames:
        return f"{where}: decodes to {count} frames, index says {frames}"
    return None
