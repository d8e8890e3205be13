"""Disk cache: a size cap with LRU eviction, whole entries or none, safe across processes."""

import multiprocessing
import os
import time

import pytest

from lerobot_shards import PackedDataset
from lerobot_shards.reader.fetch import DiskCache, range_key
from tests.packed_fixtures import *

HEADER = 16  # bytes each entry adds on disk


def _age(cache: DiskCache, key: str, seconds_ago: float) -> None:
    stamp = time.time() - seconds_ago
    os.utime(cache._path(key), (stamp, stamp))


def test_cap_is_respected_after_every_put(tmp_path):
    cache = DiskCache(tmp_path, limit_bytes=20_000)
    for i in range(300):
        cache.put(f"k{i}", bytes([i % 256]) * (500 + 37 * (i % 40)))
        assert cache.size_bytes() <= 20_000, f"after put {i}"
    assert cache.get("k299") == bytes([299 % 256]) * (500 + 37 * (299 % 40))
    stats = cache.stats()
    assert stats.puts == 300 and stats.evicted_entries > 200 and stats.hits == 1
    cache.put("huge", b"x" * 20_001)  # larger than the whole cap: not stored, nothing evicted
    assert cache.get("huge") is None and cache.get("k299") is not None
    with pytest.raises(ValueError, match="must be positive, got 0 bytes"):
        DiskCache(tmp_path, 0)


def test_eviction_is_least_recently_used(tmp_path):
    cache = DiskCache(tmp_path, limit_bytes=10 * (1000 + HEADER), low_water=1.0)
    for i in range(10):
        cache.put(f"k{i}", bytes([i]) * 1000)
        _age(cache, f"k{i}", 100 - i)  # k0 oldest ... k9 newest
    assert cache.get("k0") == bytes([0]) * 1000  # a hit makes k0 the newest
    cache.put("k10", b"\x0a" * 1000)
    cache.put("k11", b"\x0b" * 1000)
    assert cache.get("k1") is None and cache.get("k2") is None, "the two least recently used went"
    assert all(cache.get(f"k{i}") is not None for i in [0, *range(3, 12)])


def test_damaged_entry_is_a_miss_and_is_removed(tmp_path):
    cache = DiskCache(tmp_path, limit_bytes=10_000)
    cache.put("a", b"hello world")
    path = cache._path("a")
    path.write_bytes(path.read_bytes()[:-3])  # truncated behind our back
    assert cache.get("a") is None and not path.exists()
    assert cache.stats().corrupt_entries == 1 and cache.stats().misses == 1


def test_only_our_files_are_evicted_and_stale_temp_files_go(tmp_path):
    # A directory given as cache_dir keeps every file of its own, even ones named like entries.
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "README").write_text("mine too")
    (tmp_path / "ab" / ("ab" + "0" * 62)).write_text("an entry-like name")
    originals = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    cache = DiskCache(tmp_path, limit_bytes=3000)
    cache.put("a", b"x" * 1000)
    stale = cache._path("a").parent / ".tmp-crashed"
    stale.write_bytes(b"y" * 500)
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    for i in range(20):
        cache.put(f"k{i}", b"z" * 1000)
    cache.evict(target_bytes=0)
    assert all(p.exists() for p in originals) and (tmp_path / "notes.txt").read_text() == "mine"
    assert not stale.exists()


def test_a_failed_write_is_a_miss_not_an_error(tmp_path):
    cache = DiskCache(tmp_path, limit_bytes=10_000)
    key = "blocked"
    cache._path(key).parent.write_bytes(b"a file where the entry's directory goes")
    cache.put(key, b"data")
    assert cache.get(key) is None and cache.stats().errors >= 1


def test_range_key_changes_with_the_object_version():
    assert range_key("s3://b/shard.tar", 10, 20, "sha-1") != range_key("s3://b/shard.tar", 10, 20, "sha-2")
    assert range_key("s3://b/shard.tar", 10, 20) != range_key("s3://b/shard.tar", 10, 21)


def _payload(key: int) -> bytes:
    return bytes([key % 251]) * (700 + 13 * key)


def _hammer(directory, seed: int, failures) -> None:
    cache = DiskCache(directory, limit_bytes=30_000)
    for step in range(400):
        key = (step * 7 + seed * 13) % 60  # both processes write and read the same keys
        if step % 2:
            cache.put(f"k{key}", _payload(key))
            continue
        # Even steps read a key the other process writes and the key this one wrote last
        # (the newest entry: never the LRU victim), so hits do not depend on scheduling.
        for wanted in (key, ((step - 1) * 7 + seed * 13) % 60 if step else key):
            data = cache.get(f"k{wanted}")
            if data is not None and data != _payload(wanted):
                failures.put(f"process {seed}: k{wanted} came back with {len(data)} wrong bytes")
    stats = cache.stats()
    failures.put(("done", stats.hits > 0, stats.evicted_entries > 0))


def test_two_processes_share_a_directory(tmp_path):
    ctx = multiprocessing.get_context("fork")
    failures = ctx.Queue()
    processes = [ctx.Process(target=_hammer, args=(tmp_path, seed, failures)) for seed in range(2)]
    for process in processes:
        process.start()
    reports = [failures.get(timeout=60) for _ in range(2)]
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert reports == [("done", True, True)] * 2, reports  # both hit and evicted, nothing torn
    # Each process keeps the cap as far as it sees; a scan restores it after both wrote.
    assert DiskCache(tmp_path, limit_bytes=30_000).size_bytes() <= 30_000 + 2 * (30_000 // 10 + 2000)
    cache = DiskCache(tmp_path, limit_bytes=30_000)
    cache.evict()
    assert cache.size_bytes() <= 30_000
    assert not list(tmp_path.glob("*/*/.tmp-*")), "every temp file was renamed or removed"
    for key in range(60):
        assert cache.get(f"k{key}") in (None, _payload(key))


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
