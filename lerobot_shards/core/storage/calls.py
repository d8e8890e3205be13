"""One storage call under the retry policy: attempts, backoff, and the mapping of a failure to
our exceptions (missing, refused, permanent, out of attempts), in the words of the root's backend.

Kept apart from ``Storage`` so the rules a failure goes through read in one place: a resource
limit is said at once, a permanent failure raises at once, a transient one is retried with the
backoff the server asks for (``Retry-After``) or the policy's jitter, until ``max_attempts``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from lerobot_shards.core.errors import AccessDeniedError, ObjectNotFoundError, ResourceLimitError, StorageError
from lerobot_shards.core.storage.retry import RetryPolicy, limit_kind, resource_limit, retry_after_s

T = TypeVar("T")


def call_with_retries(
    function: Callable[[], T],
    *,
    url: str,
    operation: str,
    backend: Any,
    retry: RetryPolicy,
    storage_options: dict,
    rng: random.Random,
    count: Callable[..., None],
) -> T:
    """``function()``, retried under ``retry``; every attempt is counted through ``count``
    (``requests``, ``seconds``, ``retries``).

    Raises:
        ResourceLimitError: the process hit a limit (memory, open files): never retried.
        ObjectNotFoundError, AccessDeniedError, StorageError: a permanent failure, at once.
        StorageError: transient failures beyond ``retry.max_attempts``; the message names the
            last error and its fix, the error itself is kept as ``last_error``.
    """
    attempts = 0
    while True:
        attempts += 1
        started = time.perf_counter()
        try:
            result = function()
        except Exception as err:  # classified below; nothing is swallowed
            count(requests=1, seconds=time.perf_counter() - started)
            if isinstance(err, (StorageError, ResourceLimitError)):
                raise
            limit = resource_limit(err)
            if limit is not None:
                raise ResourceLimitError(
                    f"{url}: {operation}: {limit}", limit=limit_kind(err), where=f"{url}: {operation}"
                ) from err
            permanent = permanent_error(
                err, url=url, operation=operation, attempts=attempts, backend=backend, storage_options=storage_options
            )
            if permanent is not None:
                raise permanent from err
            if attempts >= retry.max_attempts:
                raise _out_of_attempts(err, url, operation, attempts, backend, storage_options) from None
            count(retries=1)
            asked = retry_after_s(err, cap_s=retry.cap_s)  # a server that says how long to wait is believed
            time.sleep(asked if asked is not None else retry.delay_s(attempts, rng))
            continue
        count(requests=1, seconds=time.perf_counter() - started)
        return result


def _out_of_attempts(
    err: Exception, url: str, operation: str, attempts: int, backend: Any, storage_options: dict
) -> StorageError:
    failure = StorageError(
        f"{url}: {operation} failed after {attempts} attempts; last error: "
        f"{backend.brief(err)}{backend.hint(err, url, storage_options)}",
        url=url,
        operation=operation,
        attempts=attempts,
    )
    # The message names the last error and the fix; its 150-line chain of client frames stays
    # on the exception, not on the screen.
    failure.last_error = err
    return failure


def permanent_error(
    err: Exception, *, url: str, operation: str, attempts: int, backend: Any, storage_options: dict
) -> StorageError | None:
    """Our exception for a failure no retry cures (in the words of the backend: not found, no
    credentials, access denied, other permanent errors), or None for a transient one."""
    hint = backend.hint(err, url, storage_options)
    where = {"url": url, "operation": operation, "attempts": attempts}
    if backend.is_not_found(err):
        missing = ObjectNotFoundError(f"{url}: not found ({operation}){hint}", **where)
        missing.missing_bucket = backend.lacks_container(err)
        return missing
    if backend.lacks_credentials(err):
        # Said first: the operation and its byte range are not what the user must fix.
        return AccessDeniedError(f"{url}: no credentials ({operation}){hint.removeprefix('; no credentials')}", **where)
    if backend.is_access_denied(err):
        return AccessDeniedError(f"{url}: access denied ({operation}): {backend.brief(err)}{hint}", **where)
    if not backend.is_transient(err):
        return StorageError(f"{url}: {operation} failed: {backend.brief(err)}{hint}", **where)
    return None
