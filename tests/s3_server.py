"""A real S3 endpoint for tests: ``moto_server`` on 127.0.0.1, one per test session.

Import both fixtures into a test module (pytest finds fixtures by name)::

    from tests.s3_server import s3_server, s3_bucket  # noqa: F401

    def test_something(s3_bucket):
        url, options = s3_bucket                   # "s3://test-1a2b...", s3fs options
        Storage(f"{url}/ds", options).write_bytes("x.bin", b"...")

``s3_server`` (session) has ``endpoint_url`` and ``storage_options`` (a dict for s3fs; call it,
``s3_server.storage_options(other_url, read_timeout=1)``, for a copy pointing at another
endpoint such as a fault proxy, with extra botocore ``config_kwargs``). Under pytest-xdist
each worker starts its own server on its own port. Nothing leaves 127.0.0.1: credentials are
dummies, the EC2 metadata service and AWS config files are disabled for this process and
the server.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.loopback import free_port

# Nothing may reach a real AWS endpoint, read a developer's AWS config, or ask for instance
# credentials. us-east-1: bucket creation needs no LocationConstraint there (do not pass a
# region in client_kwargs: moto then rejects bucket creation).
DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
# Unset for the session: they could name a profile or redirect endpoints.
UNSET_ENV = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")
_START_ATTEMPTS = 5
_START_TIMEOUT_S = 30.0


class StorageOptions(dict):
    """s3fs options for the test server; calling it gives a variant (another endpoint, config)."""

    def __call__(self, endpoint_url: str | None = None, **config_kwargs) -> dict:
        """A copy pointing at ``endpoint_url`` (default: the server) with ``config_kwargs`` merged
        into botocore's config (e.g. ``read_timeout=1``, ``retries={...}``)."""
        options = {**self, "client_kwargs": {**self["client_kwargs"]}, "config_kwargs": {**self["config_kwargs"]}}
        if endpoint_url is not None:
            options["client_kwargs"]["endpoint_url"] = endpoint_url
        options["config_kwargs"].update(config_kwargs)
        return options


@dataclass(frozen=True)
class S3Server:
    endpoint_url: str
    storage_options: StorageOptions
    log_path: Path

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def make_storage_options(endpoint_url: str) -> StorageOptions:
    """Options for s3fs against ``endpoint_url``: dummy keys, short timeouts.

    No ``retries`` in ``config_kwargs``: ``lerobot_shards.core.storage.Storage`` turns botocore's retries off
    and counts attempts itself; other users of these options get botocore's defaults.
    """
    return StorageOptions(
        key="testing",
        secret="testing",
        client_kwargs={"endpoint_url": endpoint_url},
        config_kwargs={"connect_timeout": 2, "read_timeout": 3},
        skip_instance_cache=True,
    )


def _start_moto(log_path: Path) -> tuple[subprocess.Popen, str]:
    """Start moto_server on a free port; returns (process, endpoint URL) once it answers.

    The port is free when chosen but another xdist worker may take it first: moto then fails
    to bind, and only our own process's "Running on" line proves the port is ours.
    """
    for _ in range(_START_ATTEMPTS):
        port = free_port()
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-u", "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**{k: v for k, v in os.environ.items() if k not in UNSET_ENV}, **DUMMY_ENV},
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + _START_TIMEOUT_S
        bound = re.compile(rf"Running on {re.escape(url)}\b".encode())
        while process.poll() is None and time.monotonic() < deadline:
            if bound.search(log_path.read_bytes()) and _answers(url):
                return process, url
            time.sleep(0.05)
        _stop(process)
    raise RuntimeError(
        f"moto_server did not start after {_START_ATTEMPTS} attempts; log {log_path}:\n"
        f"{log_path.read_text(errors='replace')[-2000:]}"
    )


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
    except urllib.error.HTTPError:
        return True  # an HTTP answer of any status: the server is up
    except OSError:
        return False
    return True


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def running_s3_server(log_dir: Path) -> Iterator[S3Server]:
    """moto_server on 127.0.0.1 until the block ends, with this process's AWS environment set
    to dummies (restored after): for tests (``s3_server``) and benchmarks alike."""
    saved = {key: os.environ.get(key) for key in (*DUMMY_ENV, *UNSET_ENV)}
    for key in UNSET_ENV:
        os.environ.pop(key, None)
    os.environ.update(DUMMY_ENV)
    log_path = Path(log_dir) / "moto_server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process, url = _start_moto(log_path)
    try:
        yield S3Server(url, make_storage_options(url), log_path)
    finally:
        _stop(process)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def make_bucket(server: S3Server) -> tuple[str, dict]:
    """A fresh, uniquely named bucket on ``server``: ``("s3://<name>", storage_options)``."""
    import s3fs

    name = f"test-{uuid.uuid4().hex[:16]}"
    options = server.storage_options()
    s3fs.S3FileSystem(**options).mkdir(name)
    return f"s3://{name}", options


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """moto_server on 127.0.0.1 for this session (this xdist worker); stopped at the end."""
    with running_s3_server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[tuple[str, dict]]:
    """A fresh, uniquely named bucket: yields ``("s3://<name>", storage_options)``; emptied after."""
    import s3fs

    name = f"test-{uuid.uuid4().hex[:16]}"
    options = s3_server.storage_options()
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir(name)
    yield f"s3://{name}", options
    try:  # moto keeps objects in memory: free them (best effort; a failed test may hold handles)
        fs.rm(name, recursive=True)
    except Exception:
        pass
