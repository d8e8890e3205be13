"""Building one shard: its tar of per-episode mp4 members, its parquet of rows, its receipt.

Everything happens in a local working directory: no storage, no processes. ``run/`` uploads
what this builds and commits it with the receipt (docs/FORMAT.md, "shard receipt").
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from lerobot_shards.core.errors import BoundExceededError, FormatError
from lerobot_shards.core.format import (
    PREROLL_FIELD,
    VIDEO_MEMBER_FIELDS,
    sha256_file,
    sha256_hex,
    video_column,
    video_member_name,
)
from lerobot_shards.core.format.lerobot_reading import lerobot_frame_positions
from lerobot_shards.packer.errors import MissingRowsError, PackError, SourceError, VideoCutError
from lerobot_shards.packer.options import PackOptions
from lerobot_shards.packer.shard.frame_policy import (
    empty_episode_verdict,
    frame_verdict,
    missing_rows_verdict,
    row_frames_verdict,
)
from lerobot_shards.packer.shard.members import EncodeSettings, EpisodeVideo, cut_episode, reencode_episode
from lerobot_shards.packer.shard.parquet import shard_parquet_layout, write_shard_parquet
from lerobot_shards.packer.shard.tar_writer import DeterministicTarWriter
from lerobot_shards.packer.source.base import Source
from lerobot_shards.packer.source.samples import SourceSampleReader, UnsupportedTiming
from lerobot_shards.packer.source.video import SourceFrameDecoder, SourceVideoReader, VideoLocation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardSpec:
    """One shard of a pack plan: its number, its episodes (ascending) and what shapes it."""

    shard: int
    episodes: tuple[int, ...]
    options: PackOptions
    plan_sha256: str


@dataclass(frozen=True)
class BuiltShard:
    """A shard built in a working directory: its two files and its receipt (a
    ``lerobot_shards.core.format.ShardReceipt`` as a JSON dict, with ``bytes_in``: the source bytes read)."""

    tar_path: Path
    parquet_path: Path
    receipt: dict


def encode_settings(options: PackOptions, key: str, *, depth: bool = False) -> EncodeSettings:
    """The re-encode settings of a pack's camera ``key``. Copy mode re-encodes only episodes that
    cannot be cut out of the source, with the hevc settings; a depth camera is cut in every
    mode and re-encoded losslessly where it cannot be (``EncodeSettings.depth``)."""
    codec = options.video if options.video != "copy" else "hevc"
    return EncodeSettings(
        codec=codec, gop=options.gop, crf=options.crf, preset=options.preset, resize=options.resize_for(key), depth=depth
    )


class _Digests:
    """SHA-256 of byte strings on one thread beside the caller (hashlib releases the GIL)."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="lerobot-shards-digest", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            data, done, result = job
            try:
                result.append(sha256_hex(data))
            except BaseException as err:
                result.append(err)
            done.set()

    def submit(self, data: bytes) -> Callable[[], str]:
        """Hash ``data``; returns a callable that waits for its hex digest (and re-raises what
        hashing raised)."""
        done, result = threading.Event(), []
        self._jobs.put((data, done, result))

        def wait() -> str:
            done.wait()
            if isinstance(result[0], BaseException):
                raise result[0]
            return result[0]

        return wait

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()


def _packet_reader(
    path: Path, max_samples: int | None = None, max_sample_bytes: int | None = None
) -> SourceSampleReader | SourceVideoReader:
    """Copy mode's reader of a source file: by byte ranges where its boxes and timing allow
    (no demuxer, no muxer; ``max_samples``: what the file's episodes can use;
    ``max_sample_bytes``: what one of its frames may claim), else the demuxer.

    Raises:
        SourceError: the file's tables claim more than a bound allows (samples beyond what its
            episodes can use, a sample beyond a raw frame's multiple: named, not a
            ``MemoryError``); the demuxer would expand them too.
    """
    try:
        return SourceSampleReader(path, max_samples=max_samples, max_sample_bytes=max_sample_bytes)
    except BoundExceededError as err:  # FFmpeg's demuxer would expand the same claims
        raise SourceError(str(err)) from None
    except (UnsupportedTiming, FormatError):
        return SourceVideoReader(path)


class OpenVideos:
    """One open reader per camera for a shard: its episodes come in file order, so each
    camera's file is read in one pass (``SourceVideoReader`` packets for copy mode,
    ``SourceFrameDecoder`` frames for re-encodes); moving to the next file closes the last."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], SourceSampleReader | SourceVideoReader | SourceFrameDecoder] = {}

    def _reused(self, kind: str, key: str, path: Path):
        reader = self._open.get((kind, key))
        if reader is not None and reader.path != path:
            self._open.pop((kind, key)).close()
            return None
        return reader

    def packets(
        self, key: str, path: Path, *, max_samples: int | None = None, max_sample_bytes: int | None = None
    ) -> SourceSampleReader | SourceVideoReader:
        """The packet reader of camera ``key`` over ``path`` (copy mode), opened once per file."""
        reader = self._reused("packets", key, path)
        if not isinstance(reader, SourceSampleReader | SourceVideoReader):
            reader = self._open[("packets", key)] = _packet_reader(path, max_samples, max_sample_bytes)
        return reader

    def frames(self, key: str, path: Path) -> SourceFrameDecoder:
        """The frame decoder of camera ``key`` over ``path`` (re-encodes), opened once per file."""
        reader = self._reused("frames", key, path)
        if not isinstance(reader, SourceFrameDecoder):
            reader = self._open[("frames", key)] = SourceFrameDecoder(path)
        return reader

    def close(self) -> None:
        for reader in self._open.values():
            reader.close()
        self._open.clear()


def _episode_video(
    source: Source,
    episode: int,
    key: str,
    length: int,
    options: PackOptions,
    videos: OpenVideos,
    stamps: np.ndarray | None = None,
) -> tuple[EpisodeVideo | None, str]:
    """Return the member video (at most ``length`` frames; None when the source window holds
    no frame) and where it came from, for error messages.

    ``stamps`` (the rows' timestamps, ``row_stamps``) place each row's frame as LeRobot does
    (``row_positions``): where that is not the window's frame of the row's place, the member
    is re-encoded with each row's frame in row order, in every mode (``EpisodeVideo.rows``).

    Raises:
        FrameMismatchError: rows without a frame within ``tolerance_s`` under ``error``.
    """
    location = source.video_location(episode, key)
    if not location.path.is_file():
        raise SourceError(f"{location.path}: missing (video of episode {episode}, camera {key})")
    where = f"{location.path} [{location.from_timestamp:.4f}, {location.to_timestamp:.4f}) s"
    depth = key in source.depth
    try:
        reader = videos.packets(
            key, location.path, max_samples=source.max_video_samples(episode, key), max_sample_bytes=source.max_sample_bytes(key)
        )
        positions, frames = row_positions(location, stamps, reader, options.tolerance_s)
        rows = row_frames_verdict(
            positions, frames, options.on_frame_mismatch, episode=episode, key=key, tolerance_s=options.tolerance_s
        )
        if rows == "reorder":
            assert positions is not None
            settings = encode_settings(options, key, depth=depth)  # copy mode re-encodes with the hevc settings
            video, _ = reencode_episode(location, source.fps, settings, positions=positions)
            if video is not None:
                video = replace(video, found=length, rows=rows)  # every row has its frame: nothing trimmed or padded
            return video, where
        # Depth maps are never re-encoded lossily: cut like copy mode whatever --video says.
        if options.video == "copy" or depth:
            video, found = cut_episode(location, reader, max_frames=length)
            where = _with_truncation_hint(where, reader, found, length)
            if video is None and found:
                # Not starting on a keyframe (or reordered frames to trim): re-encode this episode,
                # decoding from the keyframe before it with a decoder of its own.
                video, _ = reencode_episode(location, source.fps, encode_settings(options, key, depth=depth), max_frames=length)
        else:
            decoder = videos.frames(key, location.path)
            video, found = reencode_episode(location, source.fps, encode_settings(options, key), decoder, max_frames=length)
            where = _with_truncation_hint(where, decoder, found, length)
    except VideoCutError as err:
        raise PackError(f"episode {episode}, camera {key}: {err}") from None
    return (replace(video, rows=rows) if video is not None and rows else video), where


def _with_truncation_hint(
    where: str, reader: SourceSampleReader | SourceVideoReader | SourceFrameDecoder, found: int, length: int
) -> str:
    if found < length and reader.ended_early:
        return f"{where}; the file ends at {reader.last_seconds:.4f} s: truncated?"
    return where


MemberSource = Callable[[int, str, int], "tuple[EpisodeVideo | None, str]"]


def encode_member(
    source_root: str,
    follow_symlinks: bool,
    options: PackOptions,
    episode: int,
    key: str,
    length: int,
    stamps: np.ndarray | None = None,
) -> tuple[EpisodeVideo | None, str]:
    """One episode's member of camera ``key``, built on its own (a process of a pool): what
    ``build_shard`` builds in sequence, with a reader of its own that starts at the keyframe
    before the episode. ``stamps``: the episode's row timestamps (``row_stamps``), read once by
    the caller for all of its cameras. Decoding is deterministic and every member gets a fresh
    encoder, so the bytes equal the sequential build's."""
    from lerobot_shards.packer.source.base import open_dataset_source

    source = open_dataset_source(source_root, follow_symlinks=follow_symlinks)
    with contextlib.closing(OpenVideos()) as videos:
        return _episode_video(source, episode, key, length, options, videos, stamps)


@dataclass(frozen=True)
class EpisodeRows:
    """An episode's rows as packing takes them: ``table`` (None: dropped, its rows fell short and
    ``--on-frame-mismatch`` drops it), ``filled`` (rows filled in, ``pad``), and ``missing``,
    the rows' shortfall when there is one."""

    table: pa.Table | None
    filled: bool = False
    missing: MissingRowsError | None = None


def read_episode_rows(source: Source, episode: int, on_frame_mismatch: str) -> EpisodeRows:
    """The episode's rows, or its verdict when they fall short of its record (``pad``: filled
    from the row before each; ``drop``: none).

    Raises:
        FrameMismatchError: rows fall short and ``on_frame_mismatch`` is ``error``.
        SourceError, FormatError: the rows cannot be read (names the file and episode).
    """
    try:
        return EpisodeRows(source.episode_rows(episode))
    except MissingRowsError as err:
        if missing_rows_verdict(err, on_frame_mismatch) == "drop":
            return EpisodeRows(None, missing=err)
        return EpisodeRows(source.episode_rows(episode, fill_missing=True), filled=True, missing=err)


def row_stamps(rows: pa.Table) -> np.ndarray | None:
    """The rows' ``timestamp`` as LeRobot adds it to ``from_timestamp``: each a float32 value
    (its declared type) taken as a Python float; None without the column."""
    if "timestamp" not in rows.column_names:
        return None
    return np.asarray(rows["timestamp"].cast(pa.float32()).to_numpy(zero_copy_only=False), dtype=np.float64)


def row_positions(
    location: VideoLocation, stamps: np.ndarray | None, reader: SourceSampleReader | SourceVideoReader, tolerance_s: float
) -> tuple[list[int] | None, int]:
    """Per row, the window frame LeRobot reads (``lerobot_frame_positions``), from the file's
    sample tables, and the frames the window holds; ``(None, 0)`` where the tables are not read
    (a file the byte-range reader does not take: B-frames, edit lists) or the rows have no
    timestamps: row ``j`` then gets frame ``j``."""
    if stamps is None or not isinstance(reader, SourceSampleReader):
        return None, 0
    window = reader.window(location.from_timestamp, location.to_timestamp)
    times = reader.seconds[window.start : window.stop]
    return lerobot_frame_positions(location.from_timestamp + stamps, times, tolerance_s).tolist(), len(times)


def build_shard(
    source: Source,
    spec: ShardSpec,
    workdir: Path,
    *,
    on_episode: Callable[[int], None] | None = None,
    member_source: MemberSource | None = None,
    rows: Mapping[int, EpisodeRows] | None = None,
) -> BuiltShard:
    """Build ``spec``'s shard from ``source`` into ``workdir`` (``shard.tar``, ``shard.parquet``).

    ``on_episode(source_bytes)`` is called after each episode (for progress). ``member_source``,
    when given, supplies each ``(episode, camera, length)``'s member (built ahead, e.g. in
    parallel with ``encode_member``) instead of building it here; ``rows``, the episodes'
    rows already read for it (``read_episode_rows``).

    Returns:
        The ``BuiltShard``; nothing is written outside ``workdir``.

    Raises:
        SourceError: a missing or unreadable source file (names the file and episode).
        PackError: a video that cannot be cut or re-encoded (names the episode and camera).
        FrameMismatchError: frames and rows disagree and ``on_frame_mismatch`` refuses it.
    """
    options = spec.options
    tally = _Tally()
    tables: list[pa.Table] = []
    index_rows: list[dict] = []
    tar_path = Path(workdir) / "shard.tar"
    # Each member is hashed for the index while the tar writer hashes the archive: hashlib
    # releases the GIL, so the two digests of the same bytes run on two cores.
    with open(tar_path, "wb") as tar_file, contextlib.closing(OpenVideos()) as videos, contextlib.closing(_Digests()) as digests:
        tar = DeterministicTarWriter(tar_file)
        row_cursor = 0
        for episode in spec.episodes:
            read = rows.get(episode) if rows is not None else None
            read = read if read is not None else read_episode_rows(source, episode, options.on_frame_mismatch)
            built = _pack_episode(source, episode, read, options, videos, member_source, tally)
            if on_episode is not None:
                on_episode(built.source_bytes)
            if built.table is None:
                continue
            row = {**built.row, "row_start": row_cursor}
            for key in source.video_keys:
                video = built.members[key]
                digest = digests.submit(video.data)
                offset = tar.add(video_member_name(episode, key), video.data)
                row.update(_member_columns(key, video, offset=offset, sha256=digest()))
            tables.append(built.table)
            index_rows.append(row)
            row_cursor += built.table.num_rows
        tar_size = tar.close()
        tar_sha256 = tar.sha256()
    return _seal(spec, workdir, tables, index_rows, tar_path=tar_path, tar_size=tar_size, tar_sha256=tar_sha256, tally=tally)


@dataclass
class _Tally:
    """What a shard's build did to its episodes (its receipt's lists) and the source bytes read."""

    dropped: list[int] = field(default_factory=list)
    padded: list[int] = field(default_factory=list)
    trimmed: list[int] = field(default_factory=list)
    reencoded: list[int] = field(default_factory=list)
    bytes_in: int = 0


@dataclass(frozen=True)
class _PackedEpisode:
    """One episode as the shard takes it: its rows (None: dropped), its index row before the
    row start and members, its members, and the source bytes read for it."""

    table: pa.Table | None
    row: dict = field(default_factory=dict)
    members: dict = field(default_factory=dict)
    source_bytes: int = 0


def _pack_episode(
    source: Source,
    episode: int,
    read: EpisodeRows,
    options: PackOptions,
    videos: OpenVideos,
    member_source: MemberSource | None,
    tally: _Tally,
) -> _PackedEpisode:
    """An episode's rows and members, and what the frame policy made of them (``tally``)."""
    if read.table is None:
        log.warning("episode %d: %s; dropped (--on-frame-mismatch %s)", episode, read.missing, options.on_frame_mismatch)
        tally.dropped.append(episode)
        return _PackedEpisode(None)
    table = read.table
    source.check_rows(episode, table)
    length = table.num_rows
    if length == 0:
        empty_episode_verdict(options.on_frame_mismatch, episode=episode)
        log.warning("episode %d: no rows (length 0); dropped (--on-frame-mismatch %s)", episode, options.on_frame_mismatch)
        tally.dropped.append(episode)
        return _PackedEpisode(None)
    members, verdicts, video_bytes = _episode_members(source, episode, length, options, videos, member_source, row_stamps(table))
    episode_bytes = table.nbytes + video_bytes
    tally.bytes_in += episode_bytes
    if "drop" in verdicts:
        tally.dropped.append(episode)
        return _PackedEpisode(None, source_bytes=episode_bytes)
    if "pad" in verdicts or read.filled:
        tally.padded.append(episode)
    if "trim" in verdicts:
        tally.trimmed.append(episode)
    # "Re-encoded" has one meaning: the packer encoded the video (every episode with
    # --video hevc|h264; in copy mode those the source could not be cut for).
    if any(v.reencoded for v in members.values()):
        tally.reencoded.append(episode)
    record = source.episodes[episode]
    row = {
        "episode_index": episode,
        "length": length,
        "dataset_from_index": record.dataset_from_index,
        "dataset_to_index": record.dataset_to_index,
        "tasks": source.episode_tasks(episode, table),
    }
    return _PackedEpisode(table, row, members, episode_bytes)


def _episode_members(
    source: Source,
    episode: int,
    length: int,
    options,
    videos: OpenVideos,
    member_source: MemberSource | None,
    stamps: np.ndarray | None = None,
) -> tuple[dict[str, EpisodeVideo], set, int]:
    """Each camera's member of one episode (built here, or by ``member_source``), the frame
    verdicts (``None``, ``"pad"``, ``"drop"``, ``"trim"``) and the source video bytes read.

    Raises:
        FrameMismatchError: frames and rows disagree and ``on_frame_mismatch`` refuses it.
    """
    members: dict[str, EpisodeVideo] = {}
    verdicts = set()
    read = 0
    for key in source.video_keys:
        video, where = (
            member_source(episode, key, length)
            if member_source is not None
            else _episode_video(source, episode, key, length, options, videos, stamps)
        )
        found = video.found if video is not None else 0
        verdicts.add(frame_verdict(found, length, options.on_frame_mismatch, episode=episode, key=key, where=where))
        if video is not None and video.rows in ("pad", "drop"):
            verdicts.add(video.rows)
        if video is not None:
            read += video.source_bytes
            members[key] = video
    return members, verdicts, read


def _member_columns(key: str, video: EpisodeVideo, *, offset: int, sha256: str) -> dict:
    """One camera's member fields of an episode's index row, named by the format (``video_column``)."""
    values = {
        "offset": offset,
        "size": len(video.data),
        "frames": video.frames,
        "codec": video.codec,
        "sha256": sha256,
        "reencoded": bool(video.reencoded),
    }
    columns = {video_column(key, field): values[field] for field in VIDEO_MEMBER_FIELDS}
    if video.preroll:  # only then (format 4): packs without pre-roll keep their bytes
        columns[video_column(key, PREROLL_FIELD)] = video.preroll
    return columns


def _seal(
    spec: ShardSpec,
    workdir: Path,
    tables: list[pa.Table],
    rows: list[dict],
    *,
    tar_path: Path,
    tar_size: int,
    tar_sha256: str,
    tally: _Tally,
) -> BuiltShard:
    """Write the shard's parquet (row groups that never split an episode), point each episode's
    row at its group, and make the receipt. Returns the ``BuiltShard``."""
    parquet_path = Path(workdir) / "shard.parquet"
    row_groups = write_shard_parquet(tables, parquet_path, spec.options.row_group_max_bytes, spec.options.parquet_profile())
    footer, spans = shard_parquet_layout(parquet_path)
    for row, group in zip(rows, row_groups):
        offset, nbytes, digest = spans[group]
        row.update(row_group=group, row_group_offset=offset, row_group_bytes=nbytes, row_group_sha256=digest)
    parquet_sha256, parquet_bytes = sha256_file(parquet_path)
    receipt = {
        "shard": spec.shard,
        "episodes": rows,
        "frames": sum(r["length"] for r in rows),
        "tar_bytes": tar_size,
        "tar_sha256": tar_sha256,
        "parquet_bytes": parquet_bytes,
        "parquet_sha256": parquet_sha256,
        "parquet_footer": footer,
        "plan_sha256": spec.plan_sha256,
        "dropped": tally.dropped,
        "padded": tally.padded,
        "reencoded": tally.reencoded,
        "bytes_in": tally.bytes_in,
    }
    if tally.trimmed:  # only then: receipts of packs without a longer video keep their bytes
        receipt["trimmed"] = tally.trimmed
    return BuiltShard(tar_path=tar_path, parquet_path=parquet_path, receipt=receipt)
