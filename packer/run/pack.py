"""``pack``: rewrite a LeRobot v3.0 dataset into episode-aligned shards (docs/FORMAT.md).

Flow: stage the source locally if it is remote -> compute the deterministic shard plan ->
write ``meta/`` and ``pack-plan.json`` -> build this part's shards (tar + parquet, then the
receipt) in a process pool, skipping shards whose receipt is already valid -> ``finalize``
(unless ``--part`` is given: then a separate ``finalize`` runs once all parts are done).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from packer.destination import Destination
from packer.shard.members import (
    EncodeSettings,
    EpisodeVideo,
    SourceFrameDecoder,
    SourceVideoReader,
    VideoCutError,
    cut_episode,
    reencode_episode,
)
from packer.errors import FrameMismatchError, PackError
from packer.cli.progress import ProgressLog, progress_text
from packer.plan.shard_plan import plan_shards, shards_of_part
from packer.source.lerobot import LeRobotSource, SourceError
from packer.shard.tar_writer import DeterministicTarWriter
from reader.errors import FormatError
from reader.format import (
    FRAME_MISMATCH_POLICIES,
    MANIFEST_PATH,
    META_DIR,
    PLAN_PATH,
    ROW_GROUP_TARGET_BYTES,
    SHARDS_DIR,
    VIDEO_MODES,
    PackPlan,
    ShardReceipt,
    sha256_hex,
    shard_parquet_path,
    shard_receipt_path,
    shard_tar_path,
    video_member_name,
)
from reader.format.shard_parquet import footer_range, row_group_span
from reader.plan.windows import DEFAULT_TOLERANCE_S, resolve_delta_timestamps

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class PackOptions:
    """Options that shape the packed output (recorded in the manifest and the plan)."""

    video: str = "copy"
    gop: int = 2
    crf: int | None = None
    preset: str | None = None
    resize: tuple[int, int] | None = None
    shard_size_mb: float = 512
    on_frame_mismatch: str = "error"
    episodes: tuple[int, ...] | None = None
    windows: dict = field(default_factory=dict)
    tolerance_s: float = DEFAULT_TOLERANCE_S
    row_group_max_bytes: int = ROW_GROUP_TARGET_BYTES

    def __post_init__(self) -> None:
        if self.video not in VIDEO_MODES:
            raise ValueError(f"video mode {self.video!r} is not one of {VIDEO_MODES}")
        if self.on_frame_mismatch not in FRAME_MISMATCH_POLICIES:
            raise ValueError(f"on_frame_mismatch {self.on_frame_mismatch!r} is not one of {FRAME_MISMATCH_POLICIES}")
        if self.gop < 1:
            raise ValueError(f"gop must be >= 1, got {self.gop}")
        if self.shard_size_mb <= 0:
            raise ValueError(f"shard_size_mb must be positive, got {self.shard_size_mb}")
        if self.resize is not None and self.video == "copy":
            raise ValueError("--resize needs a re-encode (--video hevc or h264); copy mode keeps the source bytes")
        if self.resize is not None and (self.resize[0] % 2 or self.resize[1] % 2 or min(self.resize) <= 0):
            raise ValueError(f"--resize needs positive even sizes for yuv420p, got {self.resize}")

    def encode_settings(self) -> EncodeSettings:
        # Copy mode falls back to the hevc settings for episodes that do not start on a keyframe.
        codec = self.video if self.video != "copy" else "hevc"
        return EncodeSettings(codec=codec, gop=self.gop, crf=self.crf, preset=self.preset, resize=self.resize)

    def to_json_dict(self) -> dict:
        data = asdict(self)
        data["resize"] = list(self.resize) if self.resize else None
        data["episodes"] = list(self.episodes) if self.episodes is not None else None
        return data


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
    reencoded_episodes: list[int] = field(default_factory=list)
    dropped_episodes: list[int] = field(default_factory=list)
    padded_episodes: list[int] = field(default_factory=list)
    seconds: float = 0.0
    finalized: bool = False

    @property
    def mb_per_s(self) -> float:
        return self.bytes_in / 1e6 / self.seconds if self.seconds > 0 else 0.0


def build_plan(source: LeRobotSource, options: PackOptions, source_description: dict) -> PackPlan:
    """The deterministic shard plan for a source and options (what ``pack-plan.json`` holds).

    The description gets the source's ``fingerprint`` (``LeRobotSource.fingerprint``), so a
    destination holding a plan of another source refuses to resume into it.
    """
    available = source.episode_indices
    if options.episodes is not None:
        missing = sorted(set(options.episodes) - set(available))
        if missing:
            raise PackError(f"--episodes asks for episodes not in the source: {missing[:20]}")
        episodes = [e for e in available if e in set(options.episodes)]
    else:
        episodes = available
    if not episodes:
        raise PackError("nothing to pack: the source has no episodes")
    sizes = [source.estimated_episode_bytes(e) for e in episodes]
    shards = plan_shards(episodes, sizes, int(options.shard_size_mb * 1024 * 1024))
    description = {**source_description, "fingerprint": source.fingerprint(episodes)}
    return PackPlan(source=description, options=options.to_json_dict(), shards=shards)


def plan_sha256(plan: PackPlan) -> str:
    """The plan's identity, recorded in every receipt."""
    return plan.sha256


# -- one shard -------------------------------------------------------------------------------
class _OpenVideos:
    """One open reader per camera for a shard: its episodes come in file order, so each
    camera's file is read in one pass (``SourceVideoReader`` packets for copy mode,
    ``SourceFrameDecoder`` frames for re-encodes); moving to the next file closes the last."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], SourceVideoReader | SourceFrameDecoder] = {}

    def get(self, kind: str, key: str, path: Path):
        reader = self._open.get((kind, key))
        if reader is not None and reader.path != path:
            self._open.pop((kind, key)).close()
            reader = None
        if reader is None:
            reader = self._open[(kind, key)] = (SourceVideoReader if kind == "packets" else SourceFrameDecoder)(path)
        return reader

    def close(self) -> None:
        for reader in self._open.values():
            reader.close()
        self._open.clear()


def _episode_video(
    source: LeRobotSource, episode: int, key: str, length: int, options: PackOptions, videos: _OpenVideos
) -> tuple[EpisodeVideo | None, str]:
    """Return the member video (at most ``length`` frames; None when the source window holds
    no frame) and where it came from, for error messages."""
    location = source.video_location(episode, key)
    if not location.path.is_file():
        raise SourceError(f"{location.path}: missing (video of episode {episode}, camera {key})")
    where = f"{location.path} [{location.from_timestamp:.4f}, {location.to_timestamp:.4f}) s"
    try:
        if options.video == "copy":
            reader = videos.get("packets", key, location.path)
            video, found = cut_episode(location, reader, max_frames=length)
            where = _with_truncation_hint(where, reader, found, length)
            if video is not None or found == 0:
                return video, where
            # Not starting on a keyframe (or reordered frames to trim): re-encode this episode,
            # decoding from the keyframe before it with a decoder of its own.
            video, _ = reencode_episode(location, source.fps, options.encode_settings(), max_frames=length)
        else:
            decoder = videos.get("frames", key, location.path)
            video, found = reencode_episode(location, source.fps, options.encode_settings(), decoder, max_frames=length)
            where = _with_truncation_hint(where, decoder, found, length)
    except VideoCutError as err:
        raise PackError(f"episode {episode}, camera {key}: {err}") from None
    return video, where


def _with_truncation_hint(where: str, reader: SourceVideoReader | SourceFrameDecoder, found: int, length: int) -> str:
    if found < length and reader.ended_early:
        return f"{where}; the file ends at {reader.last_seconds:.4f} s: truncated?"
    return where


def _frame_verdict(video: EpisodeVideo | None, length: int, episode: int, key: str, where: str, options: PackOptions) -> str | None:
    """Apply --on-frame-mismatch; returns 'pad' / 'drop' / None (frames match).

    'pad' keeps the episode: a shorter member is padded by the reader with its last frame, a
    longer one was trimmed to ``length`` frames already. An empty window cannot be padded.
    """
    found = video.found if video is not None else 0
    if found == length:
        return None
    if options.on_frame_mismatch == "pad" and found > 0:
        return "pad"
    if options.on_frame_mismatch == "drop-episode":
        return "drop"
    hint = "--on-frame-mismatch drop-episode" if found == 0 else "--on-frame-mismatch pad|drop-episode"
    raise FrameMismatchError(
        f"episode {episode}, camera {key}: video has {found} frames but the episode has {length} rows "
        f"({where}); use {hint} to pack anyway"
    )


def build_shard(
    source_root: str,
    shard_index: int,
    episodes: list[int],
    options: PackOptions,
    dst_url: str,
    dst_options: dict | None,
    plan_digest: str,
    follow_symlinks: bool = False,
    progress=None,
) -> dict:
    """Build one shard's tar + parquet, upload them, then write its receipt (the commit).

    ``progress`` (optional) gets ``put((1, source_bytes))`` after each episode; a
    ``multiprocessing.Manager().Queue()`` carries that out of a worker process.

    Returns:
        The receipt dict (see docs/FORMAT.md).
    """
    source = _open_source(source_root, follow_symlinks)
    destination = Destination(dst_url, dst_options)
    tables: list[pa.Table] = []
    rows: list[dict] = []
    dropped, padded, reencoded = [], [], []
    bytes_in = 0
    videos = _OpenVideos()
    with tempfile.TemporaryDirectory(prefix="lerobot-shards-") as tmp, contextlib.closing(videos):
        tar_path = Path(tmp) / "shard.tar"
        with open(tar_path, "wb") as tar_file:
            tar = DeterministicTarWriter(tar_file)
            row_cursor = 0
            for episode in episodes:
                table = source.episode_rows(episode)
                source.check_rows(episode, table)
                length = table.num_rows
                meta = source.episodes[episode]
                if length == 0:
                    # No rows, no anchors: nothing to pad. Kept only by the error policy's refusal.
                    if options.on_frame_mismatch == "error":
                        raise FrameMismatchError(
                            f"episode {episode} has no rows (length 0 in the source's episodes metadata); "
                            "use --on-frame-mismatch drop-episode (or pad) to leave it out"
                        )
                    dropped.append(episode)
                    if progress is not None:
                        progress.put((1, 0))
                    continue
                members: dict[str, EpisodeVideo] = {}
                verdicts = set()
                episode_bytes = table.nbytes
                for key in source.video_keys:
                    video, where = _episode_video(source, episode, key, length, options, videos)
                    verdicts.add(_frame_verdict(video, length, episode, key, where, options))
                    if video is not None:
                        episode_bytes += video.source_bytes
                        members[key] = video
                bytes_in += episode_bytes
                if progress is not None:
                    progress.put((1, episode_bytes))
                if "drop" in verdicts:
                    dropped.append(episode)
                    continue
                if "pad" in verdicts:
                    padded.append(episode)
                if options.video == "copy" and any(v.reencoded for v in members.values()):
                    reencoded.append(episode)
                row = {
                    "episode_index": episode,
                    "length": length,
                    "dataset_from_index": int(meta["dataset_from_index"]),
                    "dataset_to_index": int(meta["dataset_to_index"]),
                    "tasks": list(meta["tasks"]),
                    "row_start": row_cursor,
                }
                for key in source.video_keys:
                    video = members[key]
                    offset = tar.add(video_member_name(episode, key), video.data)
                    row[f"video/{key}/offset"] = offset
                    row[f"video/{key}/size"] = len(video.data)
                    row[f"video/{key}/frames"] = video.frames
                    row[f"video/{key}/codec"] = video.codec
                    row[f"video/{key}/sha256"] = sha256_hex(video.data)
                    row[f"video/{key}/reencoded"] = bool(video.reencoded and options.video == "copy")
                tables.append(table)
                rows.append(row)
                row_cursor += length
            tar_size = tar.close()
        parquet_path = Path(tmp) / "shard.parquet"
        row_groups = _write_shard_parquet(tables, parquet_path, options.row_group_max_bytes)
        footer, spans = shard_parquet_layout(parquet_path)
        for row, group in zip(rows, row_groups):
            offset, nbytes, digest = spans[group]
            row.update(row_group=group, row_group_offset=offset, row_group_bytes=nbytes, row_group_sha256=digest)
        receipt = {
            "shard": shard_index,
            "episodes": rows,
            "frames": sum(r["length"] for r in rows),
            "tar_bytes": tar_size,
            "tar_sha256": _sha256_file(tar_path),
            "parquet_bytes": parquet_path.stat().st_size,
            "parquet_sha256": _sha256_file(parquet_path),
            "parquet_footer": footer,
            "plan_sha256": plan_digest,
            "dropped": dropped,
            "padded": padded,
            "reencoded": reencoded,
            "bytes_in": bytes_in,
        }
        destination.put_file(tar_path, shard_tar_path(shard_index))
        destination.put_file(parquet_path, shard_parquet_path(shard_index))
    destination.write_bytes(shard_receipt_path(shard_index), json.dumps(receipt, indent=1, sort_keys=True).encode())
    return receipt


def _open_source(root: str, follow_symlinks: bool = False) -> LeRobotSource:
    """One parsed source per process: a pack of 1,000 shards must not re-read the episodes
    metadata 1,000 times (the profile showed it at a third of a small shard's time). Keyed by
    the metadata files' sizes and times too, so a long-lived process sees an edited source."""
    meta = Path(root) / META_DIR
    files = [meta / "info.json", meta / "tasks.parquet", *sorted((meta / "episodes").glob("chunk-*/file-*.parquet"))]
    signature = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())
    return _parsed_source(root, follow_symlinks, signature)


@functools.lru_cache(maxsize=2)
def _parsed_source(root: str, follow_symlinks: bool, signature: tuple) -> LeRobotSource:
    return LeRobotSource(root, follow_symlinks=follow_symlinks)


def _write_shard_parquet(tables: list[pa.Table], path: Path, max_bytes: int) -> list[int]:
    """Write episodes' rows with row groups of whole episodes; returns each episode's group."""
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
    with pq.ParquetWriter(path, schema, compression="zstd", write_page_index=True, write_statistics=True) as writer:
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


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def receipt_is_valid(destination: Destination, shard_index: int, digest: str, video_keys: list[str]) -> dict | None:
    """Return the shard's receipt if it belongs to this plan and its files have the sizes it
    records; None when the shard must be (re)built. A receipt of another plan, or one that
    does not parse, is never trusted."""
    rel = shard_receipt_path(shard_index)
    if not destination.exists(rel):
        return None
    try:
        receipt = ShardReceipt.from_json(destination.read_bytes(rel), shard=shard_index, video_keys=video_keys)
    except (FormatError, OSError) as err:
        log.warning("%s/%s: %s; rebuilding the shard", destination.url, rel, err)
        return None
    if receipt.plan_sha256 != digest:
        return None
    for path, size in ((shard_tar_path(shard_index), receipt.tar_bytes), (shard_parquet_path(shard_index), receipt.parquet_bytes)):
        if not destination.exists(path) or destination.size(path) != size:
            return None
    return receipt.to_dict()


# -- the whole pack --------------------------------------------------------------------------
def copy_meta(source: LeRobotSource, destination: Destination) -> None:
    """Copy the source's meta/ verbatim (skipping files already there with the same size).

    Only regular files under the root are copied: a symbolic link (unless the source was
    opened with ``follow_symlinks``) raises ``SourceError`` instead of publishing whatever
    it points to.
    """
    meta_root = source.root / META_DIR
    for path in sorted(p for p in meta_root.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(source.root).as_posix()
        local = source.file(rel, what="metadata")
        if destination.exists(rel) and destination.size(rel) == local.stat().st_size:
            continue
        destination.write_bytes(rel, local.read_bytes())


def _explain_full_disk(function):
    """A full disk (or quota) anywhere in a pack becomes a ``PackError`` saying where and what to
    do, instead of a bare ``OSError`` traceback."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except OSError as err:
            if err.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            where = f" writing {err.filename}" if err.filename else ""
            raise PackError(
                f"no space left on device{where} (staging shards in {tempfile.gettempdir()}); free space and "
                "re-run the same command: finished shards are kept"
            ) from err

    return wrapper


@_explain_full_disk
def pack_dataset(
    src: str | None,
    dst: str,
    *,
    video: str = "copy",
    episodes: list[int] | None = None,
    windows: dict | None = None,
    shard_size_mb: float = 512,
    gop: int = 2,
    crf: int | None = None,
    preset: str | None = None,
    resize: tuple[int, int] | None = None,
    on_frame_mismatch: str = "error",
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    workers: int = 1,
    part: tuple[int, int] | None = None,
    repo_id: str | None = None,
    revision: str | None = None,
    storage_options: dict | None = None,
    src_storage_options: dict | None = None,
    cache_dir: str | None = None,
    row_group_max_bytes: int = ROW_GROUP_TARGET_BYTES,
    progress: bool | str = False,
    follow_symlinks: bool = False,
) -> PackReport:
    """Pack a LeRobot v3.0 dataset into ``dst``.

    ``src`` is a local root or fsspec URL; or give ``repo_id`` (+ ``revision``) for the Hub.
    With ``part=(i, n)`` only that part's shards are built and no manifest is written (run
    ``finalize`` after all parts). Re-running resumes: shards with a valid receipt are kept.

    Returns:
        A ``PackReport``.

    Raises:
        SourceError: bad source (missing files, unsupported version, ...).
        PackError: bad options, frame mismatches, corrupt video; names the episode.
    """
    started = time.perf_counter()
    options = PackOptions(
        video=video,
        gop=gop,
        crf=crf,
        preset=preset,
        resize=tuple(resize) if resize else None,
        shard_size_mb=shard_size_mb,
        on_frame_mismatch=on_frame_mismatch,
        episodes=tuple(sorted(set(episodes))) if episodes is not None else None,
        windows=dict(windows or {}),
        tolerance_s=tolerance_s,
        row_group_max_bytes=row_group_max_bytes,
    )
    local_root, description = stage_source(src, repo_id=repo_id, revision=revision, episodes=episodes,
                                           storage_options=src_storage_options, cache_dir=cache_dir)
    source = LeRobotSource(local_root, follow_symlinks=follow_symlinks)
    destination = Destination(dst, storage_options)
    _check_destination(destination, source.root)
    _check_windows(options, source.fps, list(source.features))
    # Planning probes every needed file (parquet footer, video header): a bad source fails
    # here, naming the file and episode, before anything is written.
    plan = build_plan(source, options, description)
    planned = [e for shard in plan.shards for e in shard]
    drift = source.schema_drift(planned)
    if drift:
        log.warning(
            "%s: the data parquet columns differ from meta/info.json features (only in info.json: %s; "
            "only in the parquet: %s); packing what the parquet holds",
            local_root, drift.only_in_info, drift.only_in_parquet,
        )
        _check_windows(options, source.fps, source.video_keys + drift.columns, missing=drift.only_in_info)
    source.check_tasks()
    digest = plan_sha256(plan)
    _claim_destination(destination, plan)
    removed = destination.remove_stale_temp_files()
    if removed:
        log.warning("%s: removed %d temporary file(s) left by an interrupted run", destination.url, removed)
    copy_meta(source, destination)

    shard_ids = list(range(len(plan.shards)))
    if part is not None:
        shard_ids = shards_of_part(len(plan.shards), part[0], part[1])
    report = PackReport(shards=len(shard_ids))
    todo = []
    for shard in shard_ids:
        receipt = receipt_is_valid(destination, shard, digest, source.video_keys)
        if receipt is not None:
            report.shards_skipped += 1
            _account(report, receipt, written=False)
        else:
            todo.append(shard)

    planned_episodes = sum(len(plan.shards[s]) for s in shard_ids)
    bar = _progress_bar(progress, total=planned_episodes, done=planned_episodes - sum(len(plan.shards[s]) for s in todo))
    args = [(str(local_root), s, plan.shards[s], options, dst, storage_options, digest, follow_symlinks) for s in todo]
    try:
        if workers <= 1 or len(todo) <= 1:
            for arg in args:
                _account(report, build_shard(*arg, progress=bar), written=True)
                bar.shard_done(report)
        else:
            _build_in_pool(args, workers, report, bar)
    finally:
        bar.close()
    if part is None:
        from packer.run.finalize import finalize

        finalize(dst, storage_options=storage_options)
        report.finalized = True
    report.seconds = time.perf_counter() - started
    return report


def _check_destination(destination: Destination, source_root: Path) -> None:
    """A local destination must be a directory (or not exist yet) outside the source: a
    destination inside the source would be packed into itself on the next run."""
    if not destination.is_local:
        return
    target = Path(destination.root).resolve()
    if target.exists() and not target.is_dir():
        raise PackError(f"{target}: the destination exists and is not a directory")
    if target == source_root or source_root in target.parents:
        raise PackError(f"{target}: the destination is inside the source {source_root}; choose a directory outside it")


def _check_windows(options: PackOptions, fps: int, known_keys: list[str], missing: list[str] = ()) -> None:
    for name, window in options.windows.items():
        absent = [k for k in window if k in missing]
        if absent:
            raise PackError(f"--window {name}: {absent} declared in meta/info.json but missing from the data parquet")
        try:
            resolve_delta_timestamps(window, fps, tolerance_s=options.tolerance_s, known_keys=known_keys)
        except ValueError as err:
            raise PackError(f"--window {name}: {err}") from None


def _claim_destination(destination: Destination, plan: PackPlan) -> None:
    """Write ``pack-plan.json``, or check that the one there is the same plan (a resume or
    another ``--part``). A different plan is replaced only while nothing of it was packed
    (for example after a run that stopped on a frame mismatch and is re-run with
    ``--on-frame-mismatch pad``); otherwise packing refuses to mix two plans and names what
    differs (the source's fingerprint, an option, the shard assignment)."""
    if destination.exists(PLAN_PATH):
        try:
            existing = PackPlan.from_json(destination.read_bytes(PLAN_PATH), where=f"{destination.url}/{PLAN_PATH}")
        except FormatError as err:
            existing, unreadable = None, str(err)
        if existing is not None and existing.sha256 == plan.sha256:
            return
        receipts = [n for n in destination.list(SHARDS_DIR) if n.endswith(".json")]
        if receipts or destination.exists(MANIFEST_PATH):
            differs = _plan_differences(existing, plan) if existing is not None else unreadable
            raise PackError(
                f"{destination.url} holds {len(receipts)} packed shard(s) of another plan ({differs}); "
                "pack into an empty destination, or delete this one first"
            )
        log.warning("%s/%s: replacing a plan for different source/options (none of its shards was packed)",
                    destination.url, PLAN_PATH)
    destination.write_bytes(PLAN_PATH, json.dumps(plan.to_dict(), indent=1, sort_keys=True).encode())


def _plan_differences(old: PackPlan, new: PackPlan) -> str:
    """What differs between two plans, in words: 'source fingerprint', 'option video: copy -> hevc'."""
    found = []
    for key in sorted(set(old.source) | set(new.source)):
        if old.source.get(key) != new.source.get(key):
            found.append(f"source {key}: {str(old.source.get(key))[:80]} -> {str(new.source.get(key))[:80]}")
    for key in sorted(set(old.options) | set(new.options)):
        if old.options.get(key) != new.options.get(key):
            found.append(f"option {key}: {str(old.options.get(key))[:80]} -> {str(new.options.get(key))[:80]}")
    if old.shards != new.shards:
        found.append(f"shard assignment ({len(old.shards)} -> {len(new.shards)} shards)")
    return "; ".join(found) or "the plans differ"


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux ``PR_SET_PDEATHSIG``).

    Run as a pool initializer: a SIGKILLed pack cannot clean up after itself, and workers
    would otherwise run on, orphaned, holding CPU and half-written files.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _build_in_pool(args: list[tuple], workers: int, report: PackReport, bar) -> None:
    """Build shards in a process pool; the first failure cancels the shards not started.

    Workers die with this process (``die_with_parent``): a SIGKILLed pack leaves no orphans.
    """
    manager = None
    if bar.enabled:
        from multiprocessing.managers import SyncManager

        manager = SyncManager()
        manager.start(die_with_parent)
    queue = manager.Queue() if manager is not None else None
    try:
        with ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent) as pool:
            pending = {pool.submit(build_shard, *arg, progress=queue) for arg in args}
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    bar.drain(queue)
                    for future in done:
                        _account(report, future.result(), written=True)
                        bar.shard_done(report)
            except BaseException:
                for future in pending:
                    future.cancel()
                raise
    finally:
        if manager is not None:
            manager.shutdown()


def _account(report: PackReport, receipt: dict, *, written: bool) -> None:
    report.episodes += len(receipt["episodes"])
    report.frames += receipt["frames"]
    report.dropped_episodes += receipt["dropped"]
    report.padded_episodes += receipt["padded"]
    report.reencoded_episodes += receipt["reencoded"]
    if written:
        report.shards_written += 1
        report.bytes_in += receipt.get("bytes_in", 0)
        report.bytes_out += receipt["tar_bytes"] + receipt["parquet_bytes"]


class _NoProgress:
    enabled = False

    def put(self, item: tuple[int, int]) -> None:
        pass

    def drain(self, queue) -> None:
        pass

    def shard_done(self, report: PackReport) -> None:
        pass

    def close(self) -> None:
        pass


class _RichProgress:
    """Episodes done (of this run's shards, resumed ones included), source MB read, MB
    written and MB/s; advanced per episode, from worker processes through a queue."""

    enabled = True

    def __init__(self, total_episodes: int, done_episodes: int):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.started = time.perf_counter()
        self.bytes_in = 0
        self.progress = Progress(
            TextColumn("[bold]packing"), BarColumn(), MofNCompleteColumn(), TextColumn("episodes"),
            TextColumn("{task.fields[mb_in]:.1f} MB in, {task.fields[mb_out]:.1f} MB out, {task.fields[rate]:.1f} MB/s"),
            TimeElapsedColumn(),
        )
        self.task = self.progress.add_task("pack", total=total_episodes, completed=done_episodes, mb_in=0.0, mb_out=0.0, rate=0.0)
        self.progress.start()

    def put(self, item: tuple[int, int]) -> None:
        episodes, bytes_in = item
        self.bytes_in += bytes_in
        seconds = max(time.perf_counter() - self.started, 1e-9)
        self.progress.update(self.task, advance=episodes, mb_in=self.bytes_in / 1e6, rate=self.bytes_in / 1e6 / seconds)

    def drain(self, queue) -> None:
        while queue is not None and not queue.empty():
            self.put(queue.get())

    def shard_done(self, report: PackReport) -> None:
        self.progress.update(self.task, mb_out=report.bytes_out / 1e6)

    def close(self) -> None:
        self.progress.stop()


def progress_line(done: int, total: int, bytes_in: int, seconds: float, *, started_done: int = 0) -> str:
    """``12/40 episodes (30%), 30.1 MB in, 5.2 MB/s, ETA 0:01:20``: the rate and ETA from the
    episodes done in this run (resumed ones cost nothing)."""
    return progress_text(done, total, "episodes", _bytes_note(bytes_in, seconds, done - started_done), seconds,
                         started_done=started_done)


def _bytes_note(bytes_in: int, seconds: float, ran: int) -> str:
    rate = f", {bytes_in / 1e6 / seconds:.1f} MB/s" if seconds > 0 and ran > 0 else ""
    return f"{bytes_in / 1e6:.1f} MB in{rate}"


class _LogProgress(_RichProgress):
    """For output that is not a terminal (a SLURM log, a pipe): ``ProgressLog`` lines with the
    source bytes read (``LEROBOT_SHARDS_PROGRESS_S``, default every 30 s, and at the end)."""

    def __init__(self, total_episodes: int, done_episodes: int):
        self.total, self.done, self.started_done, self.bytes_in = total_episodes, done_episodes, done_episodes, 0
        self.log = ProgressLog("pack", unit="episodes", started_done=done_episodes)

    def _update(self) -> None:
        seconds = time.perf_counter() - self.log.started
        self.log.update(self.done, self.total, note=_bytes_note(self.bytes_in, seconds, self.done - self.started_done))

    def put(self, item: tuple[int, int]) -> None:
        episodes, bytes_in = item
        self.done += episodes
        self.bytes_in += bytes_in
        self._update()

    def shard_done(self, report: PackReport) -> None:
        pass

    def close(self) -> None:
        if self.log.state is None:  # nothing packed in this run: still say where it stands
            self._update()
        self.log.close()


def _progress_bar(mode: bool | str, *, total: int, done: int):
    """``True``/``"bar"``: a rich bar (a terminal); ``"log"``: periodic lines; else none."""
    if mode is True or mode == "bar":
        return _RichProgress(total, done)
    if mode == "log":
        return _LogProgress(total, done)
    return _NoProgress()


def stage_source(
    src: str | None,
    *,
    repo_id: str | None,
    revision: str | None,
    episodes: list[int] | None,
    storage_options: dict | None,
    cache_dir: str | None,
) -> tuple[Path, dict]:
    """Return a local root holding what the pack needs, and a description for the manifest."""
    if repo_id is not None:
        from packer.source.hub import stage_hub_source

        root = stage_hub_source(repo_id, revision=revision, episodes=episodes, cache_dir=cache_dir)
        return root, {"repo_id": repo_id, "revision": revision, "codebase_version": _version_of(root)}
    if src is None:
        raise PackError("give SRC (a path or URL) or --repo-id")
    if "://" in src and not src.startswith("file://"):
        from packer.source.bucket import stage_fsspec_source

        root = stage_fsspec_source(src, storage_options=storage_options, episodes=episodes, cache_dir=cache_dir)
        return root, {"uri": src, "codebase_version": _version_of(root)}
    local = Path(src.removeprefix("file://"))
    if not local.exists():
        raise SourceError(f"{local}: source does not exist")
    return local, {"uri": os.path.basename(os.path.abspath(local)), "codebase_version": _version_of(local)}


def _version_of(root: Path) -> str | None:
    try:
        return json.loads((Path(root) / "meta" / "info.json").read_text()).get("codebase_version")
    except (OSError, json.JSONDecodeError):
        return None

