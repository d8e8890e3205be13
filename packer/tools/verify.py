"""``verify``: check a packed dataset against its manifest, its indexes and (optionally) decode.

Everything the reader trusts is checked, through the same parsers the reader uses
(``reader.format``): the manifest (schema and ``content_sha256``, optionally a pin), the size
and SHA-256 of every file it records (``index/``, ``meta/``, shard tars and parquets), the
episodes index against the manifest, the sample index against the episodes index (anchors,
rows and pad counts recomputed), every row group against its recorded span and digest and
its rows against the index, every tar header and member digest; with ``decode``, that every
member decodes to its recorded frame count at the manifest's frame size. Any damage that
could change what a reader yields is reported; verify itself never crashes on bad input.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from reader.errors import FormatError, StorageError
from reader.fetch.packed_index import read_manifest
from reader.format import (
    EPISODES_INDEX_PATH,
    SAMPLES_INDEX_PATH,
    Manifest,
    check_bytes,
    pad_column,
    parse_episodes_index,
    samples_index_schema,
    shard_parquet_path,
    shard_tar_path,
    video_member_name,
)
from reader.format.arrow_io import read_parquet_bytes
from reader.format.shard_parquet import check_row_group, decode_row_group, parse_footer
from reader.plan.windows import pad_counts, resolve_delta_timestamps
from reader.storage import Storage


@dataclass
class VerifyReport:
    """Problems found (empty = verified) and what was checked."""

    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    episodes_checked: int = 0
    members_decoded: int = 0
    manifest_sha256: str = ""

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
    storage = Storage(dst, storage_options)
    report = VerifyReport()
    try:
        manifest, report.manifest_sha256 = read_manifest(storage, manifest_sha256=manifest_sha256)
    except (FormatError, StorageError) as err:
        report.problems.append(str(err))
        return report
    _files(storage, manifest, report)
    try:
        episodes = parse_episodes_index(storage.read_bytes(EPISODES_INDEX_PATH), manifest, where=storage.describe(EPISODES_INDEX_PATH))
    except (FormatError, StorageError) as err:
        report.problems.append(str(err))
        return report
    _guarded(report, SAMPLES_INDEX_PATH, lambda: _samples_index_problems(storage, manifest, episodes))
    for shard in manifest.shards:
        report.shards_checked += 1
        mine = [e for e in episodes if e.shard == shard.index]
        report.episodes_checked += len(mine)
        _guarded(report, shard_parquet_path(shard.index), lambda: _shard_parquet_problems(storage, manifest, shard, mine))
        _guarded(report, shard_tar_path(shard.index), lambda: _member_problems(storage, manifest, shard, mine, decode, report))
        if progress is not None:
            progress(report.shards_checked, len(manifest.shards), report.episodes_checked)
    return report


def _guarded(report: VerifyReport, rel: str, check) -> None:
    """Run one check; damage that makes a library raise something unexpected (pyarrow on a
    mangled file) is a problem to report, never a crash of verify."""
    try:
        report.problems.extend(check())
    except (FormatError, OSError) as err:
        report.problems.append(f"{rel}: {err}")
    except Exception as err:  # noqa: BLE001 - any failure to check a file is a finding about it
        report.problems.append(f"{rel}: cannot be checked ({type(err).__name__}: {str(err)[:300]})")


def _files(storage: Storage, manifest: Manifest, report: VerifyReport) -> dict[str, bool]:
    """Size and SHA-256 of every recorded file and shard file; returns {rel: ok}."""
    expected = {rel: (entry.bytes, entry.sha256) for rel, entry in manifest.files.items()}
    for shard in manifest.shards:
        expected[shard_tar_path(shard.index)] = (shard.tar_bytes, shard.tar_sha256)
        expected[shard_parquet_path(shard.index)] = (shard.parquet_bytes, shard.parquet_sha256)
    ok = {}
    for rel, (size, sha256) in expected.items():
        try:
            found_sha, found_size = storage.digest(rel)
        except FileNotFoundError:
            report.problems.append(f"{rel}: missing")
            ok[rel] = False
            continue
        except OSError as err:
            report.problems.append(f"{rel}: cannot be read ({err})")
            ok[rel] = False
            continue
        if found_size != size:
            report.problems.append(f"{rel}: {found_size} bytes, manifest says {size}")
        elif found_sha != sha256:
            report.problems.append(f"{rel}: sha256 {found_sha[:12]}... differs from manifest {sha256[:12]}...")
        ok[rel] = found_size == size and found_sha == sha256
    return ok


def _samples_index_problems(storage: Storage, manifest: Manifest, episodes) -> list[str]:
    """The sample index: its schema, one anchor per frame of each episode at the right shard
    rows, and pad counts equal to a recomputation from the manifest's windows."""
    where = storage.describe(SAMPLES_INDEX_PATH)
    try:
        table = read_parquet_bytes(storage.read_bytes(SAMPLES_INDEX_PATH))
    except (pa.ArrowException, OSError) as err:
        return [f"{where}: unreadable ({err})"]
    expected = samples_index_schema(manifest.windows)
    if not table.schema.remove_metadata().equals(expected):
        return [f"{where}: columns {table.schema.names} differ from the format's {expected.names}"]
    if table.num_rows != manifest.totals["frames"]:
        return [f"{where}: {table.num_rows} anchors, manifest says {manifest.totals['frames']} frames"]
    columns = {name: table[name].to_numpy() for name in table.column_names}
    length = np.zeros(table.num_rows, dtype=np.int64)
    problems: list[str] = []
    start = 0
    for entry in sorted(episodes, key=lambda e: e.dataset_from_index):  # anchors are sorted by global index
        stop = start + entry.length
        frames = np.arange(entry.length)
        rows = slice(start, stop)
        if not (
            np.array_equal(columns["episode_index"][rows], np.full(entry.length, entry.episode_index))
            and np.array_equal(columns["frame_index"][rows], frames)
            and np.array_equal(columns["index"][rows], entry.dataset_from_index + frames)
            and np.all(columns["shard"][rows] == entry.shard)
            and np.array_equal(columns["row"][rows], entry.row_start + frames)
        ):
            problems.append(f"{where}: episode {entry.episode_index}: anchors do not match frames 0..{entry.length - 1} "
                            f"at rows {entry.row_start}.. of shard {entry.shard}")
        length[rows] = entry.length
        start = stop
    windows = {name: resolve_delta_timestamps(w, manifest.fps, tolerance_s=manifest.tolerance_s) for name, w in manifest.windows.items()}
    for name, offsets in windows.items():
        for key, key_offsets in offsets.items():
            before, after = pad_counts(columns["frame_index"], length, key_offsets)
            for side, values in (("before", before), ("after", after)):
                column = pad_column(name, key, side)
                if not np.array_equal(columns[column], values):
                    problems.append(f"{where}: column {column} disagrees with window {name!r} at {int(np.sum(columns[column] != values))} anchors")
    return problems


def _shard_parquet_problems(storage: Storage, manifest: Manifest, shard, episodes) -> list[str]:
    """Footer and row groups parse and check as a reader checks them; rows match the index."""
    rel = shard_parquet_path(shard.index)
    where = storage.describe(rel)
    try:
        footer = shard.parquet_footer
        metadata = parse_footer(storage.read_range(rel, footer.offset, footer.bytes), size=footer.bytes, sha256=footer.sha256, where=where)
    except (FormatError, OSError) as err:
        return [str(err)]
    problems = []
    groups: dict[int, list] = {}
    for entry in episodes:
        groups.setdefault(entry.row_group.index, []).append(entry)
    for group, members in groups.items():
        ref = members[0].row_group
        try:
            for entry in members:
                check_row_group(metadata, group, offset=ref.offset, nbytes=ref.bytes, first_row=entry.row_start, rows=entry.length,
                                group_rows=sum(e.length for e in members), single_episode=len(members) == 1, where=where)
            data = storage.read_range(rel, ref.offset, ref.bytes)
            table = decode_row_group(metadata, group, data, offset=ref.offset, sha256=ref.sha256, file_size=shard.parquet_bytes, where=where)
        except (FormatError, OSError) as err:
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
            except FormatError as err:
                problems.append(str(err))
                continue
            if decode:
                problem = _decode_problem(data, member.frames, manifest.features[key]["shape"], where)
                report.members_decoded += 1
                if problem:
                    problems.append(problem)
    return problems


def _decode_problem(data: bytes, frames: int, shape: list[int], where: str) -> str | None:
    import av  # only verify --decode needs a decoder

    height, width = shape[0], shape[1]
    try:
        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            if (stream.codec_context.height, stream.codec_context.width) != (height, width):
                return f"{where}: frames are {stream.codec_context.height}x{stream.codec_context.width}, the manifest says {height}x{width}"
            count = 0
            for frame in container.decode(stream):
                if (frame.height, frame.width) != (height, width):
                    return f"{where}: frame {count} is {frame.height}x{frame.width}, the manifest says {height}x{width}"
                count += 1
    except (av.error.FFmpegError, IndexError) as err:
        return f"{where}: does not decode ({err})"
    if count != frames:
        return f"{where}: decodes to {count} frames, index says {frames}"
    return None
