"""``StorageBackend``: what one storage system needs beyond fsspec (the storage seam).

``Storage`` (``lerobot_shards.core.storage.storage``) is written once against fsspec; a row of
``BACKENDS`` (``table.py``) says, for one protocol, the options its client gets from our
``RetryPolicy`` (timeouts, its own retries turned down so ours count every attempt), tuning of
the client once made, whether its paths are this machine's files, whether it takes our writes,
and what its failures mean: which of its client's exceptions are transient, which HTTP status
or service code they carry, whether they say "no credentials" or "no such bucket", and the fix
a user needs (``hint``). Each hook looks at one exception of a chain; the walking methods
(``is_transient``, ``is_not_found``, ``brief``, ...) ask the backend first, then what every
filesystem shares (``lerobot_shards.core.storage.retry``), cause by cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lerobot_shards.core.storage.retry import (
    RetryPolicy,
    causes,
    common_status,
    common_verdict,
    name_resolution_failed,
    status_verdict,
)


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

    # -- the client ---------------------------------------------------------------------------
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

    def options_problem(self, storage_options: Mapping[str, Any]) -> str | None:
        """What is wrong with the user's options for this system, said before any request (a
        client would say it later, in its own words), or None (default: nothing to check)."""
        return None

    def missing_root(self, fs: Any, root: str) -> str | None:
        """Why a root that holds nothing we asked for is missing, when the system can tell more
        than "not found" (default: None)."""
        return None

    # -- what one exception of this system's client says (hooks; defaults: nothing) ---------
    def transient(self, error: BaseException) -> bool | None:
        """This system's verdict on one exception: True transient, False permanent, None when
        its client's classes and codes do not tell (then the common rules decide)."""
        return None

    def status(self, error: BaseException) -> int | None:
        """The HTTP status this system's client puts where HTTP clients do not (default: None)."""
        return None

    def code(self, error: BaseException) -> str | None:
        """The service's own error code on one exception (``SlowDown``), for messages."""
        return None

    def no_credentials(self, error: BaseException) -> bool:
        """Whether one exception says the client found no credentials to sign with."""
        return False

    def missing_container(self, error: BaseException) -> bool:
        """Whether one exception says the bucket (container, repo) itself does not exist."""
        return False

    def hint(self, error: BaseException, url: str, storage_options: Mapping[str, Any] | None = None) -> str:
        """What the user should do about a failure of ``url``, as ``"; ..."``, or ``""``. Asked
        with the whole chain (``error`` is what the operation raised) and the storage options
        the root was opened with (advice never asks for what was already given)."""
        return ""

    # -- over a chain (not overridden: the hooks above are the seam) ------------------------
    def is_transient(self, error: BaseException) -> bool:
        """Whether retrying the operation that raised ``error`` may succeed.

        Walks the exception and its causes (s3fs raises a translated ``OSError`` whose
        ``__cause__`` is botocore's ``ClientError``) and returns the first verdict, this system's
        (``transient``, then its ``status``) before the common one: not found, access denied,
        other 4xx, a failed DNS lookup and our own ``StorageError`` are permanent; connection
        resets, timeouts, 408, 429 and 5xx are transient. Unknown errors are permanent.
        """
        if name_resolution_failed(error):
            return False
        for cause in causes(error):
            verdict = self.transient(cause)
            if verdict is None:
                status = self.status(cause)
                verdict = status_verdict(status) if status is not None else common_verdict(cause)
            if verdict is not None:
                return verdict
        return False

    def http_status(self, error: BaseException) -> int | None:
        """The first HTTP status anywhere in ``error``'s chain, if any."""
        return next((s for s in map(self._status, causes(error)) if s is not None), None)

    def _status(self, error: BaseException) -> int | None:
        status = self.status(error)
        return status if status is not None else common_status(error)

    def is_not_found(self, error: BaseException) -> bool:
        return any(isinstance(e, FileNotFoundError) or self._status(e) == 404 for e in causes(error))

    def is_access_denied(self, error: BaseException) -> bool:
        return any(isinstance(e, PermissionError) or self._status(e) == 403 for e in causes(error))

    def is_range_not_satisfiable(self, error: BaseException) -> bool:
        return any(self._status(e) == 416 for e in causes(error))

    def lacks_credentials(self, error: BaseException) -> bool:
        return any(self.no_credentials(e) for e in causes(error))

    def lacks_container(self, error: BaseException) -> bool:
        return any(self.missing_container(e) for e in causes(error))

    def brief(self, error: BaseException) -> str:
        """``Type: message [NAME code, HTTP status]``; for a message-less wrapper (fsspec's
        ``FSTimeoutError()``), its cause's. The service's code and status come from anywhere in
        the causes (s3fs turns ``SlowDown`` into ``OSError(EBUSY, "Please reduce your request
        rate.")``, which alone does not say it was throttling)."""
        text = str(error)
        cause = error.__cause__ or error.__context__
        if not text and cause is not None:
            return f"{type(error).__name__} ({self.brief(cause)})"
        code = next((c for c in map(self.code, causes(error)) if c), None)
        status = self.http_status(error)
        service = ", ".join(part for part in (f"{self.name} {code}" if code else "", f"HTTP {status}" if status else "") if part)
        return f"{type(error).__name__}: {(text or repr(error))[:300]}" + (f" [{service}]" if service else "")


def chain_text(error: BaseException) -> tuple[str, set[str]]:
    """The messages and class names of ``error`` and what it wraps directly (for hooks that
    recognise a client's failure by its words)."""
    chain = [e for e in (error, error.__cause__, error.__context__) if e is not None]
    return " ".join(str(e) for e in chain), {type(e).__name__ for e in chain}
