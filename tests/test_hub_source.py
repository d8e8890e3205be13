"""Hub source: huggingface_hub's download functions are the only fake (no network here);
they serve a generated dataset from disk and record every request."""

from __future__ import annotations

import shutil
from pathlib import Path

import huggingface_hub
import pytest
from huggingface_hub.errors import HfHubHTTPError

from packer import SourceError, pack_dataset
from packer.source import hub as hub_source
from tests.packed_fixtures import *  # noqa: F401,F403

SHA = "0123456789abcdef0123456789abcdef01234567"


class FakeHub:
    """Serves files of a local dataset like the Hub would, recording requests."""

    def __init__(self, root: Path, fail_first: int = 0, status: int = 429):
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        self.fail_first = fail_first
        self.status = status

    def _maybe_fail(self):
        if self.fail_first > 0:
            self.fail_first -= 1
            response = type("Response", (), {"status_code": self.status, "headers": {}, "request": None})()
            raise HfHubHTTPError(f"{self.status} fake", response=response)

    def snapshot_download(self, *, repo_id, repo_type, revision, local_dir, allow_patterns=None, **_):
        assert repo_type == "dataset"
        self.requests.append(("snapshot", revision, tuple(allow_patterns or ())))
        self._maybe_fail()
        for path in self.root.rglob("*"):
            rel = path.relative_to(self.root).as_posix()
            if path.is_file() and (not allow_patterns or any(rel.startswith(p.rstrip("*")) for p in allow_patterns)):
                target = Path(local_dir) / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        return str(local_dir)

    def hf_hub_download(self, *, repo_id, repo_type, revision, filename, local_dir, **_):
        self.requests.append(("file", revision, filename))
        self._maybe_fail()
        target = Path(local_dir) / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.root / filename, target)
        return str(target)


@pytest.fixture
def fake_hub(sample_source, monkeypatch):
    hub = FakeHub(sample_source)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", hub.snapshot_download)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub.hf_hub_download)
    monkeypatch.setattr(hub_source.time, "sleep", lambda s: None)
    return hub


def test_whole_repo_through_snapshot_download_with_a_sha_revision(fake_hub, packed_copy, tmp_path):
    from tests.packed_fixtures import PACK_WINDOWS, SHARD_SIZE_MB

    dst = tmp_path / "hub"
    pack_dataset(None, str(dst), repo_id="org/ds", revision=SHA, windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, cache_dir=str(tmp_path / "c"))
    assert fake_hub.requests == [("snapshot", SHA, ())], "the SHA must reach huggingface_hub untouched"
    for tar in packed_copy.glob("shards/*.tar"):
        assert (dst / "shards" / tar.name).read_bytes() == tar.read_bytes()


def test_subset_downloads_only_needed_files_once(fake_hub, tmp_path):
    cache = tmp_path / "c"
    pack_dataset(None, str(tmp_path / "a"), repo_id="org/ds", revision="v1.0", episodes=[0, 1], cache_dir=str(cache))
    files = sorted(r[2] for r in fake_hub.requests if r[0] == "file")
    assert files and all(f.startswith(("data/", "videos/")) for f in files)
    assert len(files) == len(set(files)) and len(files) < 8
    fake_hub.requests.clear()
    pack_dataset(None, str(tmp_path / "b"), repo_id="org/ds", revision="v1.0", episodes=[0, 1], cache_dir=str(cache))
    assert fake_hub.requests == [], "files already on disk must not be requested again"


def test_rate_limits_are_retried_then_fail_naming_the_file(fake_hub, tmp_path):
    fake_hub.fail_first = 3
    pack_dataset(None, str(tmp_path / "a"), repo_id="org/ds", episodes=[2], cache_dir=str(tmp_path / "c"))
    fake_hub.fail_first = 100
    with pytest.raises(SourceError, match=r"Hub download of org/ds@main:meta/ failed after 6 attempt"):
        pack_dataset(None, str(tmp_path / "b"), repo_id="org/ds", episodes=[3], cache_dir=str(tmp_path / "c2"))
    fake_hub.fail_first, fake_hub.status = 1, 404
    with pytest.raises(SourceError, match="after 1 attempt"):
        pack_dataset(None, str(tmp_path / "d"), repo_id="org/ds", episodes=[3], cache_dir=str(tmp_path / "c3"))
