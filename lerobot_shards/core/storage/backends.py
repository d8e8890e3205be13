"""What differs between storage systems, one row per fsspec protocol (the storage seam).

``Storage`` is written once against fsspec; what a storage system needs beyond that lives
here: the options its client gets from our ``RetryPolicy`` (timeouts, its own retries turned
down so ours count every attempt), tuning of the client once made, and whether its paths are
this machine's files (atomic temp-file writes and renames, stale temp files to sweep) or
objects replaced whole by one PUT, and whether it takes our writes at all (on the Hub every
write is a commit). A new system (``gs``, ``hf``, ...) is a ``StorageBackend``
subclass and a row of ``BACKENDS``; a protocol without a row gets ``GENERIC`` (fsspec's
defaults, remote objects). Which failures are transient is decided by name across every layer
(``lerobot_shards.core.storage.retry``), so it needs no row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lerobot_shards.core.storage.retry import RetryPolicy


@dataclass(frozen=True)
class StorageBackend:
    """A storage system as ``Storage`` uses it.

    Attributes:
        name: what the messages call it.
        local: paths are this machine's files (atomic writes through temp files and renames).
        writes_refused: why packs are not written here (None: they are); ``Storage`` refuses
            every write with it before a byte is sent.
    """

    name: str
    local: bool = False
    writes_refused: str | None = None

    def filesystem_options(self, storage_options: dict, retry: RetryPolicy, *, internal_retries: bool) -> dict:
        """The fsspec options for this system's client, from the user's and our retry policy.
        ``internal_retries``: whether the client may retry on its own (calls made on ``fs``
        directly) or must try once (calls under our retry loop)."""
        options = dict(storage_options)
        if not self.local:
            # Not fsspec's instance cache: our clients (lerobot_shards.core.storage.clients) are shared only
            # among our roots, never with other code, and never across a fork.
            options["skip_instance_cache"] = True
        return options

    def tune(self, fs: Any, *, internal_retries: bool) -> None:
        """Adjust a client just made (default: nothing)."""

    def missing_root(self, fs: Any, root: str) -> str | None:
        """Why a root that holds nothing we asked for is missing, when the system can tell more
        than "not found" (default: None)."""
        return None


@dataclass(frozen=True)
class HubBackend(StorageBackend):
    """Hugging Face Hub dataset repos through ``huggingface_hub``'s ``HfFileSystem``."""

    def missing_root(self, fs: Any, root: str) -> str | None:
        """The repo or revision that is not there (``datasets/ORG/NAME[@REV]/...``), or None."""
        parts = root.split("/")
        if len(parts) < 3:
            return None
        repo, _, revision = "/".join(parts[:3]).partition("@")
        try:
            if not fs.exists(repo):
                return (
                    f"no dataset repo {'/'.join(parts[1:3]).partition('@')[0]!r} on {getattr(fs, 'endpoint', 'the Hub')} "
                    "(or a private one: give a token, storage_options={'token': ...} or HF_TOKEN)"
                )
            if revision and not fs.exists("/".join(parts[:3])):
                return f"no revision {revision!r} in {'/'.join(parts[1:3]).partition('@')[0]!r}"
        except Exception:
            return None
        return None


@dataclass(frozen=True)
class S3Backend(StorageBackend):
    """S3 and what speaks its API (MinIO, R2, moto) through s3fs and botocore."""

    def filesystem_options(self, storage_options: dict, retry: RetryPolicy, *, internal_retries: bool) -> dict:
        options = super().filesystem_options(storage_options, retry, internal_retries=internal_retries)
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("connect_timeout", retry.connect_timeout_s)
        config.setdefault("read_timeout", retry.read_timeout_s)
        if internal_retries:
            config.setdefault("retries", {"mode": "standard", "total_max_attempts": retry.max_attempts})
        else:
            config.setdefault("retries", {"total_max_attempts": 1})
        options["config_kwargs"] = config
        return options

    def tune(self, fs: Any, *, internal_retries: bool) -> None:
        # s3fs's own loop (5 tries by default) would hide attempts from ours. Without ours,
        # botocore retries requests and s3fs gets one more try for a body cut mid-read
        # (botocore returns before the body is read), instead of multiplying 5 x attempts.
        fs.retries = 2 if internal_retries else 1


LOCAL = StorageBackend("local files", local=True)
S3 = S3Backend("S3")
GENERIC = StorageBackend("fsspec")
# hf://datasets/ORG/NAME[@REV]/...: huggingface_hub's HfFileSystem (ranged GETs of resolve URLs;
# its options: endpoint, token). Packs are read from it; a pack's hundreds of files written one
# by one would be hundreds of commits, against a Hub that limits commits per hour.
HUB = HubBackend(
    "the Hugging Face Hub",
    writes_refused=(
        "every write to the Hub is a commit, so a pack is not written there file by file: pack to a local folder "
        "(or a bucket), then upload it whole, e.g. `hf upload-large-folder ORG/NAME --repo-type dataset PACK_DIR`"
    ),
)

BACKENDS: dict[str, StorageBackend] = {
    "file": LOCAL,
    "local": LOCAL,
    "s3": S3,
    "s3a": S3,
    "hf": HUB,
}


def backend_for(protocol: str) -> StorageBackend:
    """The row for ``protocol`` (``GENERIC`` when it has none)."""
    return BACKENDS.get(protocol, GENERIC)
