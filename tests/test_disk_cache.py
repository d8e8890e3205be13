"""Disk cache: size cap with LRU eviction, safe across processes, used by the reader."""

import multiprocessing
import os
import time

import pytest

from reader import PackedDataset
from reader.disk_cache import DiskCache
from tests.packed_fixtures import *  # noqa: F401,F403


def test_cap_and_lru_order(tmp_path):
    cache = DiskCache(tmp_path, limit_bytes=10_000)
    for i in range(30):
        cache.put(f"k{i}", bytes([i]) * 1000)
        if i == 5:
            time.sleep(0.01)
            assert cache.get("k0") is not None  # touch: k0 becomes recent
            old = time.time() - 100
            for j in range(1, 5):
                path = cache._path(f"k{j}")
                os.utime(path, (old, old))
    cache.evict()
    assert cache.size_bytes() <= 10_000
    assert cache.get("k29") is not None and cache.get("k1") is None
    with pytest.raises(ValueError, match="must be positive"):
        DiskCache(tmp_path, 0)


def _writer(directory, offset):
    cache = DiskCache(directory, limit_bytes=50_000)
    for i in range(200):
        cache.put(f"{offset}-{i}", bytes([i % 256]) * 997)
        assert cache.get(f"{offset}-{i}") in (None, bytes([i % 256]) * 997)


def test_two_processes_share_a_directory(tmp_path):
    processes = [multiprocessing.Process(target=_writer, args=(tmp_path, p)) for p in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    cache = DiskCache(tmp_path, limit_bytes=50_000)
    cache.evict()
    assert cache.size_bytes() <= 50_000
    for path in tmp_path.glob("*/*"):
        data = path.read_bytes()
        assert data == data[:1] * 997, "a torn entry"


def test_reader_second_epoch_hits_the_cache(packed_copy, tmp_path):
    dataset = PackedDataset(str(packed_copy), cache_dir=str(tmp_path / "cache"), cache_limit_gb=1, return_uint8=True)
    first = [int(s["index"]) for s in dataset]
    read_first = dataset.storage.counters.bytes_read
    dataset.set_epoch(1)
    second = [int(s["index"]) for s in dataset]
    read_second = dataset.storage.counters.bytes_read - read_first
    assert sorted(first) == sorted(second) == list(range(141))
    # Video bytes now come from the cache; only parquet rows are read again.
    tar_bytes = sum(p.stat().st_size for p in packed_copy.glob("shards/*.tar"))
    assert read_second < read_first - tar_bytes // 2
    assert DiskCache(tmp_path / "cache", 10**9).size_bytes() > 0
