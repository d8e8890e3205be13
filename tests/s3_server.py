"""A real S3 endpoint for tests: moto_server on 127.0.0.1, one per test session (per xdist worker).

Import with ``from tests.s3_server import s3_server, s3_bucket  # noqa: F401``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass

import pytest

from tests.loopback import free_port

# Nothing may reach a real AWS endpoint or the instance metadata service.
DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Endpoint:
    endpoint_url: str

    def storage_options(self, endpoint_url: str | None = None, **config) -> dict:
        """s3fs options; no region in client_kwargs (moto then rejects bucket creation)."""
        return {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint_url or self.endpoint_url},
            "config_kwargs": {"connect_timeout": 2, "read_timeout": 3, "retries": {"max_attempts": 1}, **config},
            "skip_instance_cache": True,
        }



@pytest.fixture(scope="session")
def s3_server():
    for key, value in DUMMY_ENV.items():
        os.environ.setdefault(key, value)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **DUMMY_ENV},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            break
        except Exception:
            if process.poll() is not None or time.time() > deadline:
                process.kill()
                raise RuntimeError(f"moto_server did not start on {url}")
            time.sleep(0.1)
    yield S3Endpoint(url)
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture
def s3_bucket(s3_server):
    """A fresh bucket: yields ("s3://name", storage_options)."""
    import s3fs

    name = f"test-{uuid.uuid4().hex[:12]}"
    options = s3_server.storage_options()
    s3fs.S3FileSystem(**options).mkdir(name)
    return f"s3://{name}", options
