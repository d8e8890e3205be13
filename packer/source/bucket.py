"""Staging a LeRobot v3.0 dataset from a bucket (any fsspec URL) to local disk.

Only ``meta/`` and the data/video files the selected episodes need are copied; files already
staged with the right size are not fetched again, so re-running a pack is cheap.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import fsspec

from packer.source.lerobot import LeRobotSource, SourceError
from reader.format import safe_relative_path


def default_cache_dir() -> Path:
    return Path(os.environ.get("LEROBOT_SHARDS_CACHE", Path.home() / ".cache" / "lerobot-shards"))


def _fetch(fs, remote: str, local: Path) -> None:
    """Copy one object unless the local copy already has its size (atomic rename)."""
    try:
        size = fs.size(remote)
    except FileNotFoundError:
        raise SourceError(f"{remote}: missing in the source bucket") from None
    if local.exists() and local.stat().st_size == size:
        return
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = local.with_name(local.name + ".part")
    fs.get_file(remote, str(tmp))
    os.replace(tmp, local)


def stage_fsspec_source(
    url: str,
    *,
    storage_options: dict | None = None,
    episodes: list[int] | None = None,
    cache_dir: str | Path | None = None,
) -> Path:
    """Download what packing ``episodes`` (default: all) needs; returns the local root.

    Raises:
        SourceError: the URL holds no LeRobot dataset or a needed file is missing.
    """
    fs, root = fsspec.core.url_to_fs(url.rstrip("/"), **(storage_options or {}))
    local = Path(cache_dir or default_cache_dir()) / "sources" / hashlib.sha256(url.encode()).hexdigest()[:16]
    meta_files = [p for p in fs.find(f"{root}/meta") if not p.endswith("/")]
    if not meta_files:
        raise SourceError(f"{url}/meta: empty or missing; is {url} a LeRobot dataset root?")
    prefix = root.rstrip("/") + "/"
    for remote in meta_files:
        # Object keys are data: a key "meta/../../x" must not become a path outside `local`.
        rel = remote[len(prefix) :] if remote.startswith(prefix) else remote
        try:
            safe_relative_path(rel)
        except ValueError:
            raise SourceError(f"{url}: object key {rel[:300]!r} is not a plain relative path; refusing to stage it") from None
        _fetch(fs, remote, local / rel)
    source = LeRobotSource(local)
    wanted = episodes if episodes is not None else source.episode_indices
    wanted = [e for e in wanted if e in source.episodes]
    for rel in source.needed_files(wanted):
        _fetch(fs, f"{root}/{rel.as_posix()}", local / rel)
    return local
