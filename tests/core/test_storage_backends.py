"""The storage seam (issue 33): a storage system is a ``StorageBackend`` and a row of
``BACKENDS``; ``Storage`` asks the row for its client's options and tuning, and whether paths
are local files. A new system plugs in by the row alone (here fsspec's in-memory filesystem)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from lerobot_shards.core.storage import BACKENDS, GENERIC, HUB, LOCAL, S3, RetryPolicy, Storage, StorageBackend, backend_for


def test_each_protocol_has_its_row_and_others_get_the_generic_one(tmp_path):
    assert backend_for("file") is LOCAL and backend_for("s3") is backend_for("s3a") is S3
    assert backend_for("gcs") is GENERIC
    assert Storage(str(tmp_path)).is_local and not Storage("memory://x").is_local
    options = S3.filesystem_options({"anon": True}, RetryPolicy(max_attempts=3, connect_timeout_s=2.0), internal_retries=False)
    assert options["config_kwargs"] == {"connect_timeout": 2.0, "read_timeout": 15.0, "retries": {"total_max_attempts": 1}}
    assert options["anon"] and options["skip_instance_cache"]
    assert LOCAL.filesystem_options({}, RetryPolicy(), internal_retries=True) == {}


@dataclass(frozen=True)
class _Recording(StorageBackend):
    """A new system's row: says what it was asked (the seam is the only thing it touches)."""

    calls: list = None

    def filesystem_options(self, storage_options, retry, *, internal_retries):
        self.calls.append(("options", internal_retries))
        return super().filesystem_options(storage_options, retry, internal_retries=internal_retries)

    def tune(self, fs, *, internal_retries):
        self.calls.append(("tune", internal_retries))


def test_a_new_system_is_one_row(monkeypatch):
    calls: list = []
    monkeypatch.setitem(BACKENDS, "memory", _Recording("in-memory", calls=calls))
    storage = Storage(f"memory://seam-{uuid.uuid4().hex}")
    storage.write_bytes("a/b.bin", b"hello")
    assert storage.read_bytes("a/b.bin") == b"hello" and storage.read_range("a/b.bin", 1, 3) == b"ell"
    assert ("options", False) in calls and ("tune", False) in calls


def test_http_client_failures_are_classified_by_their_client_not_their_name():
    """Connection failures of the Hub's client (httpx2) and of requests are transient; an SSL or
    proxy failure built on requests' ConnectionError, and other libraries' ReadErrors, are not."""
    import tarfile

    import botocore.exceptions
    import httpx2
    import requests

    request = httpx2.Request("GET", "http://127.0.0.1/x")
    for error in (
        httpx2.ConnectError("refused", request=request),
        httpx2.ReadTimeout("slow", request=request),
        httpx2.RemoteProtocolError("cut", request=request),
        requests.exceptions.ConnectionError("reset"),
        requests.exceptions.ChunkedEncodingError("cut"),
    ):
        assert HUB.is_transient(error), type(error)
        assert not S3.is_transient(error) and not GENERIC.is_transient(error), type(error)  # the Hub's client, not theirs
    for error in (
        requests.exceptions.SSLError("certificate verify failed"),
        requests.exceptions.ProxyError("proxy"),
        botocore.exceptions.SSLError(endpoint_url="https://x", error="bad certificate"),
        botocore.exceptions.ProxyConnectionError(proxy_url="http://p", error="refused"),
        tarfile.ReadError("bad tar"),
    ):
        assert not HUB.is_transient(error), type(error)


def test_a_destination_that_takes_no_writes_is_refused_before_work(tmp_path):
    """hf:// takes no writes (every Hub write is a commit): pack_dataset refuses it before the
    source is read, and a mixture's SLURM task says so as a configuration error (exit 2)."""
    import pytest

    from lerobot_shards import pack_dataset
    from lerobot_shards.core.errors import StorageError
    from lerobot_shards.packer.mixture import task

    with pytest.raises(StorageError, match=r"hf://datasets/org/x: not written to \(the Hugging Face Hub\)"):
        pack_dataset(str(tmp_path / "no-such-source"), "hf://datasets/org/x")
    sources = tmp_path / "sources.txt"
    sources.write_text(f"{tmp_path / 'ds'}\n")
    from lerobot_shards.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=r"not written to \(the Hugging Face Hub\)") as refused:
        task.run(str(sources), 0, "hf://datasets/org/mix")
    assert refused.value.exit_code == 2
