"""S3 and what speaks its API (MinIO, R2, moto) through s3fs, aiobotocore and botocore.

What only S3 knows: botocore's timeouts and retries (turned down so ours count every attempt),
s3fs's own retry loop, the error codes S3 throttles with, botocore's connection error classes,
s3fs's translation of codes into errnos, and the fixes every first bucket run needs
(credentials, an endpoint outside AWS, a bucket to create).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lerobot_shards.core.storage.backends.base import StorageBackend, chain_text
from lerobot_shards.core.storage.retry import RetryPolicy

# botocore's connection failures, matched by name anywhere in the MRO (nothing is imported):
# HTTPClientError covers EndpointConnectionError, ConnectionClosedError, ReadTimeoutError and
# ConnectTimeoutError; ResponseParserError is what throttling with a garbled body turns into.
_TRANSIENT_CLASS_NAMES = frozenset(
    {
        "HTTPClientError",
        "EndpointConnectionError",
        "ConnectionClosedError",
        "ReadTimeoutError",
        "ConnectTimeoutError",
        "IncompleteReadError",
        "ResponseStreamingError",
        "ResponseParserError",
    }
)
_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "RequestTimeout",  # S3 answers an idle upload with 400 RequestTimeout
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "OperationAborted",
    }
)
# s3fs translates SlowDown, ServiceUnavailable and OperationAborted into EBUSY, InternalError
# into EREMOTEIO (the ClientError that says so is the OSError's cause, when it kept one).
_TRANSIENT_ERRNOS = frozenset({errno.EBUSY, errno.EREMOTEIO})
_CANNOT_CONNECT = frozenset({"EndpointConnectionError", "ClientConnectorError", "ConnectTimeoutError"})


@dataclass(frozen=True)
class S3Backend(StorageBackend):
    """S3 through s3fs and botocore."""

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

    def options_problem(self, storage_options: Mapping[str, Any]) -> str | None:
        """An ``endpoint_url`` without a scheme (``127.0.0.1:9``): botocore says only "Invalid
        endpoint"; the fix is ``http://`` (or ``https://``) before it."""
        endpoint = storage_options.get("endpoint_url") or (storage_options.get("client_kwargs") or {}).get("endpoint_url")
        if isinstance(endpoint, str) and "://" not in endpoint:
            return f"endpoint_url {endpoint!r} has no scheme: give 'http://{endpoint}' (or 'https://{endpoint}')"
        return None

    def tune(self, fs: Any, *, internal_retries: bool) -> None:
        # s3fs's own loop (5 tries by default) would hide attempts from ours. Without ours,
        # botocore retries requests and s3fs gets one more try for a body cut mid-read
        # (botocore returns before the body is read), instead of multiplying 5 x attempts.
        fs.retries = 2 if internal_retries else 1

    def transient(self, error: BaseException) -> bool | None:
        if self.code(error) in _TRANSIENT_CODES:
            return True
        if any(cls.__name__ in _TRANSIENT_CLASS_NAMES for cls in type(error).__mro__):
            return True
        if isinstance(error, OSError) and error.errno in _TRANSIENT_ERRNOS:
            return True
        return None

    def status(self, error: BaseException) -> int | None:
        """botocore's ``ClientError.response["ResponseMetadata"]["HTTPStatusCode"]``."""
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return status if isinstance(status, int) and 100 <= status <= 599 else None
        return None

    def code(self, error: BaseException) -> str | None:
        """botocore's ``ClientError.response["Error"]["Code"]``."""
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            return str(code) if code else None
        return None

    def no_credentials(self, error: BaseException) -> bool:
        """botocore's ``NoCredentialsError``."""
        text, names = chain_text(error)
        return "NoCredentialsError" in names or "Unable to locate credentials" in text

    def missing_container(self, error: BaseException) -> bool:
        text, _ = chain_text(error)
        return self.code(error) == "NoSuchBucket" or "NoSuchBucket" in text or "bucket does not exist" in text.lower()

    def hint(self, error: BaseException, url: str, storage_options: Mapping[str, Any] | None = None) -> str:
        """What to do about the three errors every first bucket run meets, or ""."""
        text, names = chain_text(error)
        if self.lacks_credentials(error):
            return (
                "; no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or pass "
                '--storage-options \'{"key": "...", "secret": "..."}\''
            )
        if names & _CANNOT_CONNECT or "Could not connect to the endpoint" in text:
            endpoint = (storage_options or {}).get("endpoint_url") or (storage_options or {}).get("client_kwargs", {}).get(
                "endpoint_url"
            )
            given = "storage_options" if endpoint else ("AWS_ENDPOINT_URL" if os.environ.get("AWS_ENDPOINT_URL") else None)
            if given:
                endpoint = endpoint or os.environ["AWS_ENDPOINT_URL"]
                return (
                    f"; cannot connect to {endpoint} (the endpoint_url from {given}): is the server running there, "
                    "and are its host and port right?"
                )
            return (
                "; cannot connect: for a bucket outside AWS (MinIO, R2, a local S3) pass "
                'storage_options={"endpoint_url": "http://host:port"} (CLI: --storage-options) or set AWS_ENDPOINT_URL'
            )
        if self.lacks_container(error):
            bucket = url.split("://", 1)[-1].split("/", 1)[0]
            return f"; the bucket {bucket} does not exist: create it first (e.g. `aws s3 mb s3://{bucket}`)"
        return ""
