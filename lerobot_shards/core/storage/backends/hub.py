"""Hugging Face Hub dataset repos (``hf://datasets/ORG/NAME[@REV]/...``) through
``huggingface_hub``'s ``HfFileSystem``: ranged GETs of resolve URLs; its options are
``endpoint`` and ``token``. Packs are read from it, never written file by file (every write is
a commit, and the Hub limits commits per hour). Its client is httpx (``httpx2`` in
huggingface_hub 2.x) or, before 1.0, requests: their connection failures are transient; an SSL
or proxy failure is not cured by a retry. The Hub source (``packer/source/hub.py``) classifies
its API calls with this row too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lerobot_shards.core.storage.backends.base import StorageBackend

# By (top-level module, class), so a generic name (a ConnectionError, a ReadError) from
# elsewhere (botocore, tarfile) is not taken for one. requests' SSLError and ProxyError (and
# botocore's errors built on them) are subclasses of its ConnectionError, and stay permanent.
_TRANSIENT_CLIENT_CLASSES = frozenset(
    {
        (module, name)
        for module in ("httpx", "httpx2")
        for name in ("ConnectError", "ReadError", "WriteError", "RemoteProtocolError", "TimeoutException")
    }
    | {("requests", "ConnectionError"), ("requests", "ChunkedEncodingError"), ("requests", "Timeout")}
)
_NEVER_TRANSIENT_CLASS_NAMES = frozenset({"SSLError", "ProxyError", "ProxyConnectionError"})
_TOKEN = "give a token: storage_options={'token': ...} (CLI: --storage-options) or HF_TOKEN"


@dataclass(frozen=True)
class HubBackend(StorageBackend):
    """The Hub's dataset repos."""

    def transient(self, error: BaseException) -> bool | None:
        mro = type(error).__mro__
        if any((cls.__module__.split(".")[0], cls.__name__) in _TRANSIENT_CLIENT_CLASSES for cls in mro):
            return not any(cls.__name__ in _NEVER_TRANSIENT_CLASS_NAMES for cls in mro)
        return None

    def hint(self, error: BaseException, url: str, storage_options: Mapping[str, Any] | None = None) -> str:
        if self.http_status(error) == 401:
            return f"; the Hub asks who you are (a private or gated repo): {_TOKEN}"
        return ""

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
                    f"(or a private one: {_TOKEN})"
                )
            if revision and not fs.exists("/".join(parts[:3])):
                return f"no revision {revision!r} in {'/'.join(parts[1:3]).partition('@')[0]!r}"
        except Exception:
            return None
        return None
