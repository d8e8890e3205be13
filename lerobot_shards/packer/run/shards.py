"""One shard job as a (pool) process runs it: build in a temp directory, then commit."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.options import PackRunOptions
from lerobot_shards.packer.run.journal import Journal
from lerobot_shards.packer.run.pool import ProgressSink
from lerobot_shards.packer.run.receipts import commit_shard
from lerobot_shards.packer.run.staging import staging_dir
from lerobot_shards.packer.shard.build import EpisodeRows, ShardSpec, build_shard, encode_member, read_episode_rows, row_stamps
from lerobot_shards.packer.source.base import open_dataset_source

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardJob:
    """Everything a process needs to pack one shard (picklable, for the process pool)."""

    spec: ShardSpec
    source_root: str
    dst: str
    run: PackRunOptions
    journal: Journal
    member_workers: int = 1


def pack_shard(job: ShardJob, progress: ProgressSink | None = None) -> dict:
    """Build ``job``'s shard in a temp directory and commit it to the destination.

    ``progress`` gets ``(1, source bytes)`` after each episode.

    Returns:
        The shard's receipt (a JSON dict with ``bytes_in``).
    """
    source = open_dataset_source(job.source_root, follow_symlinks=job.run.follow_symlinks)
    storage = Storage(job.dst, job.run.storage_options, retry=job.run.retry)
    on_episode = (lambda source_bytes: progress.put((1, source_bytes))) if progress is not None else None
    members = rows = None
    if job.member_workers > 1 and job.spec.options.video != "copy":
        rows = _rows_once(source, job.spec)
        members = _encode_members_in_parallel(job, source, rows, progress)
        on_episode = None  # progress came from the members as they finished
    with staging_dir(storage.url) as tmp:
        built = build_shard(
            source,
            job.spec,
            tmp,
            on_episode=on_episode,
            member_source=(lambda e, k, n: members[(e, k)]) if members is not None else None,
            rows=rows,
        )
        commit_shard(storage, built, job.journal)
    return built.receipt


def _rows_once(source, spec) -> dict[int, EpisodeRows]:
    """Each episode's rows, read once for the shard: its cameras' jobs take their timestamps,
    ``build_shard`` the rows. An episode whose rows cannot be read is left out: the build reads
    it again and raises (or drops it) where a sequential build would."""
    rows = {}
    for episode in spec.episodes:
        try:
            rows[episode] = read_episode_rows(source, episode, spec.options.on_frame_mismatch)
        except (SourceError, FormatError):
            continue
    return rows


def _encode_members_in_parallel(job: ShardJob, source, rows: dict[int, EpisodeRows], progress: ProgressSink | None) -> dict:
    """Every member of the shard re-encoded by ``job.member_workers`` processes (episodes x
    cameras are independent): a pack of fewer shards than cores still uses the cores. An
    episode's rows are read once, here (``rows``), for all of its cameras. ``progress`` gets
    ``(1, source bytes)`` as each episode's members are all done."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from lerobot_shards.packer.run.pool import die_with_parent

    spec = job.spec
    stamps = {e: row_stamps(read.table) for e, read in rows.items() if read.table is not None}
    # An episode without rows, or dropped for rows short of its record, has no members to build.
    lengths = {e: source.episodes[e].length if e not in rows or e in stamps else 0 for e in spec.episodes}
    wanted = [(e, key) for e in spec.episodes if lengths[e] > 0 for key in source.video_keys]
    left = {e: len(source.video_keys) for e in spec.episodes if lengths[e] > 0}
    done_bytes = dict.fromkeys(left, 0)
    results = {}
    log.info("shard %d: re-encoding %d members in %d processes", spec.shard, len(wanted), job.member_workers)
    with ProcessPoolExecutor(max_workers=job.member_workers, initializer=die_with_parent) as pool:
        futures = {
            pool.submit(
                encode_member, job.source_root, job.run.follow_symlinks, spec.options, e, key, lengths[e], stamps.get(e)
            ): (e, key)
            for e, key in wanted
        }
        for future in as_completed(futures):
            episode, key = futures[future]
            results[(episode, key)] = video_where = future.result()
            done_bytes[episode] += video_where[0].source_bytes if video_where[0] is not None else 0
            left[episode] -= 1
            if progress is not None and left[episode] == 0:
                progress.put((1, done_bytes[episode]))
    if progress is not None:
        for episode in spec.episodes:
            if lengths[episode] == 0:
                progress.put((1, 0))
    return results
