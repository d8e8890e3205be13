"""Staging a LeRobot v3.0 dataset from the Hugging Face Hub, hardened for large mixtures.

- A revision may be a branch, a tag or a commit SHA; it is passed to huggingface_hub as is
  (no version parsing, which breaks on SHAs).
- Whole datasets come through one ``snapshot_download``; episode subsets download
  ``meta/`` first, then only the files those episodes need, in a thread pool.
- Files already on disk are never requested again (one metadata request per file trips the
  Hub's rate limit on mixtures of hundreds of datasets).
- 429 and 5xx answers are retried with exponential backoff and jitter, a bounded number of
  times, then fail naming the file.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packer.errors import SourceError
from packer.source.lerobot import LeRobotSource

MAX_ATTEMPTS = 6


def _status(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def _with_retries(what: str, call, *, attempts: int = MAX_ATTEMPTS, base_s: float = 0.5):
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as err:  # huggingface_hub raises HfHubHTTPError subclasses and requests errors
            status = _status(err)
            transient = status == 429 or (status is not None and status >= 500) or isinstance(err, (ConnectionError, TimeoutError))
            if not transient or attempt == attempts:
                raise SourceError(f"Hub download of {what} failed after {attempt} attempt(s): {err}") from err
            time.sleep(random.uniform(0, min(30.0, base_s * 2**attempt)))
    raise AssertionError("unreachable")


def local_dir_for(repo_id: str, revision: str | None, cache_dir: Path) -> Path:
    """Where ``repo_id`` at ``revision`` is staged under ``cache_dir``."""
    safe = repo_id.replace("/", "--")
    return cache_dir / "hub" / f"{safe}@{revision or 'main'}"


def stage_hub_source(
    repo_id: str,
    *,
    revision: str | None = None,
    episodes: list[int] | None = None,
    cache_dir: Path,
    max_workers: int = 8,
) -> Path:
    """Download a dataset (or what ``episodes`` need) into a local directory; returns it."""
    from huggingface_hub import hf_hub_download, snapshot_download

    local = local_dir_for(repo_id, revision, cache_dir)
    if episodes is None:
        _with_retries(
            f"{repo_id}@{revision or 'main'}",
            lambda: snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision, local_dir=local),
        )
        return local
    if not (local / "meta" / "info.json").exists():
        _with_retries(
            f"{repo_id}@{revision or 'main'}:meta/",
            lambda: snapshot_download(
                repo_id=repo_id, repo_type="dataset", revision=revision, local_dir=local, allow_patterns=["meta/**"]
            ),
        )
    source = LeRobotSource(local)
    unknown = [e for e in episodes if e not in source.episodes]
    if unknown:
        raise SourceError(f"{repo_id}: episodes {unknown[:20]} are not in the dataset")
    missing = [rel for rel in source.needed_files(list(episodes)) if not (local / rel).exists()]

    def fetch(rel: Path) -> None:
        _with_retries(
            f"{repo_id}:{rel.as_posix()}",
            lambda: hf_hub_download(
                repo_id=repo_id, repo_type="dataset", revision=revision, filename=rel.as_posix(), local_dir=local
            ),
        )

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        list(pool.map(fetch, missing))
    return local
