"""Where a source comes from: a local root, a bucket (any fsspec URL) or the Hugging Face Hub.

``stage_source`` returns a local root holding what a pack needs (remote sources are copied
into a cache directory, only the files the selected episodes read); ``describe_source`` is
how the pack plan and the manifest name the source.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from lerobot_shards.core.errors import LeRobotShardsError
from lerobot_shards.core.storage import RetryPolicy
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.bucket import stage_bucket_source
from lerobot_shards.packer.source.hub import stage_hub_source


def default_cache_dir() -> Path:
    """``$LEROBOT_SHARDS_CACHE``, else ``~/.cache/lerobot-shards``."""
    return Path(os.environ.get("LEROBOT_SHARDS_CACHE", Path.home() / ".cache" / "lerobot-shards"))


def is_remote(src: str) -> bool:
    """Whether ``src`` is a URL other than ``file://`` (a bucket, ``hf://``, ...)."""
    return "://" in src and not src.startswith("file://")


def stage_source(
    src: str | None,
    *,
    repo_id: str | None = None,
    revision: str | None = None,
    episodes: list[int] | None = None,
    storage_options: dict | None = None,
    retry: RetryPolicy | None = None,
    cache_dir: str | Path | None = None,
) -> Path:
    """A local root holding what packing ``episodes`` (default: all) of the source needs.

    Give ``src`` (a local path, ``file://`` or any fsspec URL) or ``repo_id`` (+ ``revision``:
    a branch, tag or commit SHA) for the Hub. ``retry`` bounds every read of a bucket source
    (default: ``RetryPolicy()``); the Hub keeps its own (``HUB_RETRY``: its rate window).

    Raises:
        SourceError: neither given, a local path that does not exist, or what staging raises.
    """
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    if repo_id is not None:
        return stage_hub_source(repo_id, revision=revision, episodes=episodes, cache_dir=cache)
    if src is None:
        raise SourceError("give a source: a path or URL, or a Hub repo_id")
    if is_remote(src):
        return stage_bucket_source(src, storage_options=storage_options, retry=retry, episodes=episodes, cache_dir=cache)
    local = Path(src.removeprefix("file://"))
    if not local.exists():
        raise SourceError(f"{local}: source does not exist")
    return local


def shown_name(src: str | None, *, repo_id: str | None, revision: str | None) -> str:
    """The source as the user named it: a bucket's URL, ``hf://datasets/ORG/NAME[@REV]``, or the
    local path as given."""
    if repo_id is not None:
        return f"hf://datasets/{repo_id}" + (f"@{revision}" if revision else "")
    return src or "SRC"


@contextlib.contextmanager
def staged_names(local_root: Path, shown: str) -> Iterator[None]:
    """While the block runs, messages name the source as the user gave it, not the staging
    cache that holds a bucket's or the Hub's files (``~/.cache/lerobot-shards/sources/<hash>``):
    our errors raised in the block and our log lines (also those of packing workers forked in
    it) have the local root replaced by ``shown``. Nothing changes for a local source."""
    local = str(local_root)
    if local == shown or local == os.path.abspath(shown.removeprefix("file://")):
        yield
        return
    previous = logging.getLogRecordFactory()

    def named(*args, **kwargs) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.name.startswith("lerobot_shards"):
            text = record.getMessage()
            if local in text:
                record.msg, record.args = text.replace(local, shown), ()
        return record

    logging.setLogRecordFactory(named)
    try:
        yield
    except LeRobotShardsError as err:
        err.args = tuple(a.replace(local, shown) if isinstance(a, str) else a for a in err.args)
        raise
    finally:
        logging.setLogRecordFactory(previous)


def source_arguments(src: str | None, *, repo_id: str | None, revision: str | None) -> list[str]:
    """How a command line names this source, as the user gave it (``SRC``, or ``--repo-id
    ORG/NAME [--revision REV]``): the words advice puts after ``lerobot-shards check``."""
    if repo_id is not None:
        return ["--repo-id", repo_id, *(["--revision", revision] if revision else [])]
    return [src or "SRC"]


def describe_source(src: str | None, *, repo_id: str | None, revision: str | None, description: dict) -> dict:
    """How the plan and manifest name a source: ``repo_id`` + ``revision`` for the Hub, the URL
    of a bucket, or a local root's directory name (no host paths: manifests stay
    byte-identical across machines), then what the format says of it (``Source.description``:
    its ``codebase_version``)."""
    if repo_id is not None:
        return {"repo_id": repo_id, "revision": revision, **description}
    assert src is not None
    uri = src if is_remote(src) else os.path.basename(os.path.abspath(src.removeprefix("file://")))
    return {"uri": uri, **description}
