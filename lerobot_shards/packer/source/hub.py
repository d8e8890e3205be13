"""Staging a dataset from the Hugging Face Hub (in whichever source format its `meta/` listing says:
``packer.source.base.format_of_listing``), hardened for large mixtures.

What a mixture of hundreds of Hub datasets trips over is the request count (the Hub allows
about 3,000 requests per 5 minutes): ``snapshot_download`` sends a metadata ``HEAD`` per file
before each ``GET``, and ``hf_hub_download`` with a branch revision sends one per file even
for files already on disk. So staging talks to the Hub through ``huggingface_hub``'s own
client (endpoint, token, headers, ``HF_ENDPOINT``) but plans the requests itself:

- the revision (branch, tag or commit SHA, passed as is) is resolved to a commit once; a SHA
  needs no request;
- the commit's file listing is fetched once (``list_repo_tree``, paginated) and cached on
  disk by commit, beside the staged tree (a repo can ship any path inside it), every entry
  checked on each read as a fresh one is, so a re-run of a SHA, or of a branch that did not
  move, lists nothing;
- each file the pack needs and the disk lacks is fetched with one ``GET``, streamed to a
  temporary file, checked against the listing's size and digest (git blob id, or the LFS
  sha256), then moved into place; files already on disk with the listed size are not
  requested again;
- 408, 429 and 5xx answers and connection errors are retried as every storage operation is
  (``lerobot_shards.core.storage.retry``: one classification, exponential backoff with jitter, ``Retry-After``
  honoured), with the Hub's own bounds (``HUB_RETRY``), then fail naming the file.

Staged files live under ``<cache>/hub/<org>--<name>@<commit>``, so a branch that moves gets
a new directory instead of mixing two commits; every write is checked to resolve inside it.
The listing cache and partial downloads live beside it (``...@<commit>.listing.json``,
``...@<commit>.partial/``): nothing the stager relies on is a path a repo file can have.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lerobot_shards.core.format import source_relative_path
from lerobot_shards.core.storage import HUB, RetryPolicy, name_resolution_failed, retry_after_s
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.base import format_of_listing

# The Hub's rate limit is minutes long (about 3,000 requests per 5 minutes): more attempts and
# longer waits than a bucket's policy, the Hub row's classification (HUB) and the same backoff.
HUB_RETRY = RetryPolicy(max_attempts=8, base_s=1.0, cap_s=60.0)
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class HubFile:
    """One file of a commit's listing: its size and what its bytes must hash to."""

    size: int
    blob_id: str
    lfs_sha256: str | None


def _with_retries(what: str, call, *, retry: RetryPolicy = HUB_RETRY):
    """``call()``, retried while what it raises is transient to the Hub's storage row
    (``lerobot_shards.core.storage.backends.hub``: 408, 429, 5xx, httpx's connection errors), after the wait the Hub asked for (``Retry-After``) or the
    policy's backoff; then a ``SourceError`` naming ``what``."""
    rng = random.Random()
    for attempt in range(1, retry.max_attempts + 1):
        try:
            return call()
        except SourceError:
            raise
        except Exception as err:  # huggingface_hub raises HfHubHTTPError subclasses and httpx/requests errors
            if name_resolution_failed(err):
                raise SourceError(
                    f"Hub download of {what}: cannot look up the Hub's host ({err}); this machine has no "
                    "network or DNS: check the connection (HF_ENDPOINT), or pack from a local copy"
                ) from err
            if not HUB.is_transient(err) or attempt == retry.max_attempts:
                raise SourceError(f"Hub download of {what} failed after {attempt} attempt(s): {err}") from err
            wait = retry_after_s(err, cap_s=retry.cap_s)
            time.sleep(wait if wait is not None else retry.delay_s(attempt, rng))
    raise AssertionError("unreachable")


def local_dir_for(repo_id: str, commit: str, cache_dir: Path) -> Path:
    """Where ``repo_id`` at ``commit`` is staged under ``cache_dir``."""
    return cache_dir / "hub" / f"{repo_id.replace('/', '--')}@{commit}"


def _resolve(api, repo_id: str, revision: str | None) -> str:
    """The commit SHA of ``revision`` (a SHA resolves to itself, without a request)."""
    if revision is not None and _COMMIT.fullmatch(revision):
        return revision
    info = _with_retries(
        f"{repo_id}@{revision or 'main'}", lambda: api.repo_info(repo_id, repo_type="dataset", revision=revision)
    )
    if not isinstance(info.sha, str) or not _COMMIT.fullmatch(info.sha):
        raise SourceError(f"{repo_id}@{revision or 'main'}: the Hub answered commit {str(info.sha)[:60]!r}")
    return info.sha


def listing_cache_for(local: Path) -> Path:
    """Where a staged commit's listing is cached: beside the staged tree, never inside it (a
    repo may ship any path inside it; a staged directory's name ends in the commit's 40 hex
    digits, so no other staged directory can be named like this file)."""
    return local.with_name(local.name + ".listing.json")


def _partial_dir(local: Path) -> Path:
    """Where downloads are written before they are checked: beside the staged tree too."""
    return local.with_name(local.name + ".partial")


_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _checked(repo_id: str, commit: str, path: object, size: object, blob_id: object, lfs_sha256: object) -> HubFile:
    """One listing entry, checked the same way whether it comes from the server or the cache.

    Raises:
        SourceError: a path that could leave the staged tree, or a size or digest that is not one.
    """
    if not isinstance(path, str):
        raise SourceError(f"{repo_id}@{commit}: refusing a listed path of type {type(path).__name__}")
    try:
        source_relative_path(path)
    except ValueError as err:
        raise SourceError(f"{repo_id}@{commit}: refusing listed file {path[:200]!r} ({err})") from None
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise SourceError(f"{repo_id}@{commit}:{path[:200]}: listed size {size!r} is not a byte count")
    if not isinstance(blob_id, str) or not _HEX40.fullmatch(blob_id):
        raise SourceError(f"{repo_id}@{commit}:{path[:200]}: listed blob id {str(blob_id)[:80]!r} is not a git SHA-1")
    if lfs_sha256 is not None and (not isinstance(lfs_sha256, str) or not _HEX64.fullmatch(lfs_sha256)):
        raise SourceError(f"{repo_id}@{commit}:{path[:200]}: listed LFS digest {str(lfs_sha256)[:80]!r} is not a SHA-256")
    return HubFile(size, blob_id, lfs_sha256)


def _listing(api, repo_id: str, commit: str, local: Path) -> dict[str, HubFile]:
    """The commit's files, from the on-disk cache (every entry checked again) or one
    paginated listing."""
    cache = listing_cache_for(local)
    if cache.is_file():
        try:
            cached = json.loads(cache.read_text())
            return {
                path: _checked(repo_id, commit, path, e.get("size"), e.get("blob_id"), e.get("lfs_sha256"))
                for path, e in cached.items()
            }
        except (ValueError, TypeError, AttributeError, SourceError):
            pass  # a damaged or altered cache is listed again
    from huggingface_hub.hf_api import RepoFile

    entries = _with_retries(
        f"{repo_id}@{commit} (file listing)",
        lambda: list(api.list_repo_tree(repo_id, repo_type="dataset", revision=commit, recursive=True)),
    )
    files = {}
    for entry in entries:
        if isinstance(entry, RepoFile):
            files[entry.path] = _checked(
                repo_id, commit, entry.path, entry.size, entry.blob_id, entry.lfs.sha256 if entry.lfs is not None else None
            )
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps({p: f.__dict__ for p, f in files.items()}))
    os.replace(tmp, cache)
    return files


def _inside(local: Path, rel: str) -> Path:
    """``local / rel``, refused unless it resolves (symbolic links followed) inside ``local``."""
    root = os.path.realpath(local)
    target = os.path.realpath(local / rel)
    if not target.startswith(root + os.sep):
        raise SourceError(f"{local}: refusing to write {rel[:200]!r}, which resolves to {target[:200]} outside the staged tree")
    return Path(target)


@contextlib.contextmanager
def _get(url: str):
    """One streamed GET through huggingface_hub's session (its headers, token, proxies):
    yields the body in chunks; raises the client's HTTP errors (with ``response``)."""
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    # Any: a requests session before huggingface_hub 1.0, an httpx client after; each branch uses its own API.
    session: Any = get_session()
    stream = getattr(session, "stream", None)
    if stream is not None:  # huggingface_hub >= 1.0: httpx
        with stream("GET", url, headers=build_hf_headers(), follow_redirects=True, timeout=60) as response:
            hf_raise_for_status(response)
            yield response.iter_bytes(1 << 20)
    else:  # requests
        with session.get(url, headers=build_hf_headers(), stream=True, timeout=60) as response:
            hf_raise_for_status(response)
            yield response.iter_content(1 << 20)


def _download(repo_id: str, commit: str, rel: str, expected: HubFile, local: Path) -> bool:
    """Fetch ``rel`` with one GET unless it is on disk with the listed size; returns whether a
    request was made.

    Raises:
        SourceError: the file does not match the listing (size or digest), or the Hub failed
            beyond the retries.
    """
    local.mkdir(parents=True, exist_ok=True)
    target = _inside(local, rel)
    if target.is_file() and target.stat().st_size == expected.size:
        return False
    from huggingface_hub import hf_hub_url

    url = hf_hub_url(repo_id, rel, repo_type="dataset", revision=commit)
    target.parent.mkdir(parents=True, exist_ok=True)
    target = _inside(local, rel)  # again: the folders made on the way may not be links
    scratch = _partial_dir(local)  # outside the staged tree (and so outside meta/, copied verbatim)
    scratch.mkdir(parents=True, exist_ok=True)

    def fetch() -> None:
        digest = hashlib.sha256() if expected.lfs_sha256 else hashlib.sha1(b"blob %d\0" % expected.size)
        size = 0
        fd, tmp = tempfile.mkstemp(prefix="download-", dir=scratch)
        try:
            with os.fdopen(fd, "wb") as out, _get(url) as chunks:
                for chunk in chunks:
                    size += len(chunk)
                    if size > expected.size:
                        break
                    digest.update(chunk)
                    out.write(chunk)
            found = digest.hexdigest()
            if size != expected.size or found != (expected.lfs_sha256 or expected.blob_id):
                raise SourceError(
                    f"{repo_id}@{commit}:{rel}: the download does not match the listing "
                    f"({size} bytes, listed {expected.size}; digest {found[:12]}, listed "
                    f"{(expected.lfs_sha256 or expected.blob_id)[:12]})"
                )
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    _with_retries(f"{repo_id}@{commit}:{rel}", fetch)
    return True


def stage_hub_source(
    repo_id: str,
    *,
    revision: str | None = None,
    episodes: list[int] | None = None,
    cache_dir: Path,
    max_workers: int = 8,
) -> Path:
    """Download a dataset (or ``meta/`` and what ``episodes`` need) into a local directory.

    Returns:
        The directory (``local_dir_for(repo_id, commit, cache_dir)``).

    Raises:
        SourceError: unknown repo, revision or episodes; a file that does not match the
            listing; the Hub failing beyond the retries (names the file).
    """
    from huggingface_hub import HfApi

    api = HfApi()
    commit = _resolve(api, repo_id, revision)
    local = local_dir_for(repo_id, commit, cache_dir)
    listing = _listing(api, repo_id, commit, local)
    # Only the metadata files the dataset's format reads: a pack leaves any other out, so it is not fetched.
    source_format = format_of_listing([rel for rel in listing if rel.startswith("meta/")])
    meta = [rel for rel in listing if rel.startswith("meta/") and source_format.metadata_bound(rel) is not None]
    if "meta/info.json" not in listing:
        raise SourceError(f"{repo_id}@{revision or 'main'}: no meta/info.json in the repo (not a LeRobot dataset?)")
    if episodes is None:
        wanted = sorted(rel for rel in listing if not rel.startswith("meta/") or rel in meta)
    else:
        _fetch_all(repo_id, commit, meta, listing, local, max_workers)
        source = source_format.open(local)  # the format says which files its episodes need
        unknown = [e for e in episodes if e not in source.episodes]
        if unknown:
            raise SourceError(f"{repo_id}: episodes {unknown[:20]} are not in the dataset")
        wanted = [rel.as_posix() for rel in source.needed_files(list(episodes))]
        absent = [rel for rel in wanted if rel not in listing]
        if absent:
            raise SourceError(f"{repo_id}@{commit}: files the episodes need are not in the repo: {absent[:10]}")
    _fetch_all(repo_id, commit, wanted, listing, local, max_workers)
    # The partial-download folder stays (empty): another stager of this commit (a SLURM array
    # on one cache) may be about to write into it.
    return local


def _fetch_all(repo_id: str, commit: str, files: list[str], listing: dict[str, HubFile], local: Path, max_workers: int) -> int:
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        return sum(pool.map(lambda rel: _download(repo_id, commit, rel, listing[rel], local), files))
