"""Staging a dataset from a bucket (any fsspec URL) to local disk, in whichever source format
it is (``packer.source.base.format_of_listing`` tells from its ``meta/`` listing).

Only the metadata files the format reads and the data/video files the selected episodes need
(the format says which) are copied, through the
one storage layer (``lerobot_shards.core.storage.Storage``: retries with backoff, timeouts, errors
that name the object); files already staged with the right size are not fetched again, so
re-running a pack is cheap.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from lerobot_shards.core.errors import ObjectNotFoundError
from lerobot_shards.core.format import META_DIR, source_relative_path
from lerobot_shards.core.storage import RetryPolicy, Storage
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.base import format_of_listing


def staging_dir(url: str, cache_dir: Path) -> Path:
    """Where the files of the source at ``url`` are staged under ``cache_dir``."""
    return cache_dir / "sources" / hashlib.sha256(url.encode()).hexdigest()[:16]


def _fetch(storage: Storage, rel: str, local: Path) -> None:
    """Copy one object unless the local copy already has its size."""
    try:
        size = storage.size(rel)
    except ObjectNotFoundError:
        raise SourceError(f"{storage.object_url(rel)}: missing in the source bucket") from None
    if local.exists() and local.stat().st_size == size:
        return
    storage.download(rel, local)


def stage_bucket_source(
    url: str,
    *,
    cache_dir: Path,
    storage_options: dict | None = None,
    retry: RetryPolicy | None = None,
    episodes: list[int] | None = None,
) -> Path:
    """Download what packing ``episodes`` (default: all) needs; returns the local root.

    Raises:
        SourceError: the URL holds no LeRobot dataset, an object key is not a plain relative
            path, or a needed file is missing.
        StorageError: the bucket failed beyond the retry policy.
    """
    storage = Storage(url.rstrip("/"), storage_options, retry=retry or RetryPolicy())
    local = staging_dir(url, cache_dir)
    meta_files = storage.list(META_DIR)
    if not meta_files:
        raise SourceError(f"{storage.object_url(META_DIR)}: empty or missing; is {url} a LeRobot dataset root?")
    source_format = format_of_listing(meta_files)
    for rel in meta_files:
        # Object keys are data: a key "meta/../../x" must not become a path outside `local`.
        try:
            source_relative_path(rel)
        except ValueError:
            raise SourceError(f"{url}: object key {rel[:300]!r} is not a plain relative path; refusing to stage it") from None
        if source_format.metadata_bound(rel) is None:
            continue  # not a file the format reads: a pack leaves it out, so it is not fetched
        _fetch(storage, rel, local / rel)
    source = source_format.open(local)  # the format says which files its episodes need
    wanted = episodes if episodes is not None else source.episode_indices
    wanted = [e for e in wanted if e in source.episodes]
    for rel in source.needed_files(wanted):
        _fetch(storage, rel.as_posix(), local / rel)
    return local
