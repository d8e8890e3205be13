"""One row per fsspec protocol: the storage systems ``Storage`` knows more about than fsspec.

A new system (``az://``, ``gs://`` with its own errors and hints) is a module beside this one
(a ``StorageBackend`` subclass, ``base.py`` says what it may say) and a row here. A protocol
without a row gets ``GENERIC``: fsspec's defaults, remote objects, the common failure rules
(``lerobot_shards.core.storage.retry``).
"""

from __future__ import annotations

from lerobot_shards.core.storage.backends.base import StorageBackend
from lerobot_shards.core.storage.backends.hub import HubBackend
from lerobot_shards.core.storage.backends.s3 import S3Backend

LOCAL = StorageBackend("local files", local=True)
GENERIC = StorageBackend("fsspec")
S3 = S3Backend("S3")
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


def storage_protocol(url: str) -> str | None:
    """The protocol of ``url`` (``s3`` of ``s3://b/x``) when it names a storage system this
    table or fsspec's registry knows, else None (a local path, an unknown scheme)."""
    import fsspec

    scheme, sep, _ = url.partition("://")
    if not sep or not scheme:
        return None
    return scheme if scheme in BACKENDS or scheme in fsspec.available_protocols() else None
