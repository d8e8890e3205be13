"""One shard job as a (pool) process runs it: build in a temp directory, then commit."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from packer.run.journal import Journal
from packer.run.pool import ProgressSink
from packer.run.receipts import commit_shard
from packer.shard.build import ShardSpec, build_shard
from packer.source.lerobot import open_source
from reader.storage import RetryPolicy, Storage


@dataclass(frozen=True)
class ShardJob:
    """Everything a process needs to pack one shard (picklable, for the process pool)."""

    spec: ShardSpec
    source_root: str
    follow_symlinks: bool
    dst: str
    storage_options: dict | None
    journal: Journal
    retry: RetryPolicy = RetryPolicy()


def pack_shard(job: ShardJob, progress: ProgressSink | None = None) -> dict:
    """Build ``job``'s shard in a temp directory and commit it to the destination.

    ``progress`` gets ``(1, source bytes)`` after each episode.

    Returns:
        The shard's receipt (a JSON dict with ``bytes_in``).
    """
    source = open_source(job.source_root, follow_symlinks=job.follow_symlinks)
    storage = Storage(job.dst, job.storage_options, retry=job.retry)
    on_episode = (lambda source_bytes: progress.put((1, source_bytes))) if progress is not None else None
    with tempfile.TemporaryDirectory(prefix="lerobot-shards-") as tmp:
        built = build_shard(source, job.spec, Path(tmp), on_episode=on_episode)
        commit_shard(storage, built, job.journal)
    return built.receipt
