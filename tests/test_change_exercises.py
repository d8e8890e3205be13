"""Change exercises (issue 50): three changes a newcomer makes, each one file (under
``tests/exercises/``) plus one row of a table, shown working end to end. If one of them starts
needing a second file, a seam has stopped keeping its promise (``docs/ARCHITECTURE.md``)."""

from __future__ import annotations

import uuid

import fsspec
import pytest
import torch

from lerobot_shards import PackedDataset, RetryPolicy, pack_dataset
from lerobot_shards.core.errors import AccessDeniedError, StorageError
from lerobot_shards.core.storage import BACKENDS, Storage
from tests.exercises.busy_storage import BUSY, BusyFileSystem
from tests.packed_fixtures import *
from tests.packed_fixtures import PACK_WINDOWS, SHARD_SIZE_MB

FAST = RetryPolicy(max_attempts=3, base_s=0.0, cap_s=0.0)
DELTA = {"action": [0.0, 1 / 30], "observation.images.top": [-1 / 30, 0.0]}


def _tree(url: str) -> dict[str, bytes]:
    storage = Storage(url, retry=FAST)
    return {rel: storage.read_bytes(rel) for rel in storage.list()}


def _local_tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def busy_store(monkeypatch):
    fsspec.register_implementation("busy", BusyFileSystem, clobber=True)
    monkeypatch.setattr(BusyFileSystem, "busy_answers", 0)
    return f"busy://exercise-{uuid.uuid4().hex}"


def test_a_storage_system_with_its_own_errors_is_one_file_and_one_row(busy_store, sample_source, packed_copy, monkeypatch):
    """Without its row, the store's busy answers are unknown errors: permanent, at once. With
    it (``BACKENDS["busy"] = BUSY``), a pack to the store and a read from it retry every busy
    answer, the pack's bytes equal a local pack's, its samples equal the local pack's, and a
    client without credentials is told the store's own fix."""
    with pytest.raises(StorageError, match=r"write failed: ServiceBusy: .*busy") as refused:
        Storage(busy_store, retry=FAST).write_bytes("probe.txt", b"x")
    assert refused.value.attempts == 1  # not retried: no row says it is transient

    monkeypatch.setitem(BACKENDS, "busy", BUSY)  # the one row
    dst = f"{busy_store}/pack"
    report = pack_dataset(str(sample_source), dst, video="copy", windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, retry=FAST)
    assert report.finalized and BusyFileSystem.busy_answers > 10
    packed = _tree(dst)
    assert packed == _local_tree(packed_copy)

    answered = BusyFileSystem.busy_answers
    remote = list(torch.utils.data.DataLoader(PackedDataset(dst, delta_timestamps=DELTA, seed=3, retry=FAST), batch_size=8))
    local = list(torch.utils.data.DataLoader(PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=3), batch_size=8))
    assert BusyFileSystem.busy_answers > answered and len(remote) == len(local)
    for a, b in zip(remote, local):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]) if isinstance(a[key], torch.Tensor) else a[key] == b[key], key

    with pytest.raises(AccessDeniedError, match=r"no credentials \(read\): run `busy login`"):
        Storage(dst, {"signed_in": False}, retry=FAST).read_bytes("manifest.json")
