"""``verify``: check a packed dataset against its manifest, its indexes and (optionally) decode."""

from __future__ import annotations

import hashlib
import io
import zlib
from dataclasses import dataclass, field

import numpy as np
import pyarrow.parquet as pq

from packer.destination import Destination
from reader.format import (
    EPISODES_INDEX_PATH,
    MANIFEST_PATH,
    SAMPLES_INDEX_PATH,
    FormatError,
    Manifest,
    shard_parquet_path,
    shard_tar_path,
    video_column,
    video_member_name,
)


@dataclass
class VerifyReport:
    """Problems found (empty = verified) and what was checked."""

    problems: list[str] = field(default_factory=list)
    shards_checked: int = 0
    episodes_checked: int = 0
    members_decoded: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _sha256(destination: Destination, rel: str) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    with destination.open(rel) as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _index_problems(episodes: list[dict], samples, manifest: Manifest) -> list[str]:
    """The two indexes and the manifest agree: per shard the episode and frame counts, per
    episode its anchors (frames 0..length-1 at rows row_start.. of its shard parquet)."""
    problems = []
    for shard in manifest.shards:
        mine = [e for e in episodes if e["shard"] == shard.index]
        frames = sum(e["length"] for e in mine)
        if (len(mine), frames) != (shard.num_episodes, shard.frames):
            problems.append(
                f"{EPISODES_INDEX_PATH}: shard {shard.name} has {len(mine)} episodes / {frames} frames, "
                f"manifest says {shard.num_episodes} / {shard.frames}"
            )
    columns = {name: samples[name].to_numpy() for name in samples.column_names}
    order = np.argsort(columns["episode_index"], kind="stable")
    episode_of, starts = np.unique(columns["episode_index"][order], return_index=True)
    bounds = dict(zip(episode_of.tolist(), zip(starts.tolist(), [*starts[1:].tolist(), len(order)])))
    for episode in episodes:
        where = f"{SAMPLES_INDEX_PATH}: episode {episode['episode_index']}"
        start, stop = bounds.get(episode["episode_index"], (0, 0))
        rows = order[start:stop]
        length = episode["length"]
        expected_rows = np.arange(episode["row_start"], episode["row_start"] + length)
        if len(rows) != length:
            problems.append(f"{where}: {len(rows)} anchors, episodes index says length {length}")
        elif not (
            np.array_equal(np.sort(columns["frame_index"][rows]), np.arange(length))
            and np.all(columns["shard"][rows] == episode["shard"])
            and np.array_equal(np.sort(columns["row"][rows]), expected_rows)
        ):
            problems.append(f"{where}: anchors do not cover frames 0..{length - 1} at rows {episode['row_start']}.. of shard {episode['shard']}")
    return problems


def verify(dst: str, *, decode: bool = False, storage_options: dict | None = None) -> VerifyReport:
    """Check sizes, sha256, index consistency, member CRCs and tar headers; with ``decode``,
    that every member decodes to its recorded frame count.

    Returns:
        A ``VerifyReport``; ``report.ok`` is False when anything is wrong.
    """
    destination = Destination(dst, storage_options)
    report = VerifyReport()
    if not destination.exists(MANIFEST_PATH):
        report.problems.append(f"{destination.url}: no {MANIFEST_PATH} (pack incomplete or not a packed dataset)")
        return report
    try:
        manifest = Manifest.from_json(destination.read_bytes(MANIFEST_PATH))
    except FormatError as err:
        report.problems.append(str(err))
        return report

    for shard in manifest.shards:
        report.shards_checked += 1
        for rel, expected_size, expected_sha in (
            (shard_tar_path(shard.index), shard.tar_bytes, shard.tar_sha256),
            (shard_parquet_path(shard.index), shard.parquet_bytes, shard.parquet_sha256),
        ):
            if not destination.exists(rel):
                report.problems.append(f"{rel}: missing")
                continue
            sha, size = _sha256(destination, rel)
            if size != expected_size:
                report.problems.append(f"{rel}: {size} bytes, manifest says {expected_size}")
            elif sha != expected_sha:
                report.problems.append(f"{rel}: sha256 {sha[:12]}… differs from manifest {expected_sha[:12]}…")

    try:
        with destination.open(EPISODES_INDEX_PATH) as handle:
            episodes = pq.read_table(handle).to_pylist()
        with destination.open(SAMPLES_INDEX_PATH) as handle:
            samples = pq.read_table(handle, columns=["index", "episode_index", "frame_index", "shard", "row"])
    except (OSError, ValueError) as err:  # missing, or not parquet (pyarrow raises ArrowInvalid)
        report.problems.append(f"index unreadable: {err}")
        return report
    if len(episodes) != manifest.totals["episodes"]:
        report.problems.append(f"{EPISODES_INDEX_PATH}: {len(episodes)} episodes, manifest says {manifest.totals['episodes']}")
    if samples.num_rows != manifest.totals["frames"]:
        report.problems.append(f"{SAMPLES_INDEX_PATH}: {samples.num_rows} anchors, manifest says {manifest.totals['frames']} frames")
    report.problems.extend(_index_problems(episodes, samples, manifest))
    shard_sizes = {s.index: s.tar_bytes for s in manifest.shards}

    import av  # only verify needs a decoder

    handles: dict[int, object] = {}
    try:
        for episode in episodes:
            report.episodes_checked += 1
            shard = episode["shard"]
            if shard not in shard_sizes:
                report.problems.append(f"episode {episode['episode_index']}: shard {shard} not in manifest")
                continue
            for key in manifest.video_keys:
                offset, size = episode[video_column(key, "offset")], episode[video_column(key, "size")]
                where = f"{shard_tar_path(shard)} episode {episode['episode_index']} camera {key}"
                if offset < 512 or offset + size > shard_sizes[shard]:
                    report.problems.append(f"{where}: member range [{offset}, {offset + size}) outside the tar")
                    continue
                if shard not in handles:
                    handles[shard] = destination.open(shard_tar_path(shard))
                handle = handles[shard]
                handle.seek(offset - 512)
                header = handle.read(512)
                name = header[:100].rstrip(b"\0").decode(errors="replace")
                expected_name = video_member_name(episode["episode_index"], key)
                # Long names live in a pax header before this one; the ustar name is truncated.
                if len(expected_name.encode()) <= 100 and name != expected_name:
                    report.problems.append(f"{where}: tar header names {name!r}, expected {expected_name!r}")
                data = handle.read(size)
                if zlib.crc32(data) != episode[video_column(key, "crc32")]:
                    report.problems.append(f"{where}: member bytes do not match their crc32")
                    continue
                if decode:
                    try:
                        with av.open(io.BytesIO(data)) as container:
                            frames = sum(1 for _ in container.decode(video=0))
                    except av.error.FFmpegError as err:
                        report.problems.append(f"{where}: does not decode ({err})")
                        continue
                    report.members_decoded += 1
                    if frames != episode[video_column(key, "frames")]:
                        report.problems.append(f"{where}: decodes to {frames} frames, index says {episode[video_column(key, 'frames')]}")
    finally:
        for handle in handles.values():
            handle.close()
    return report
