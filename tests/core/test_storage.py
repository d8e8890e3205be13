"""Storage: one API over local disk and S3 (a real moto_server and real s3fs), with retries that end.

Contracts: bytes come back exact or an exception names the object; transient faults are
retried and counted; permanent errors are raised at once; nothing hangs; a Storage works in
forked and spawned worker processes.
"""

from __future__ import annotations

import errno
import io
import multiprocessing
import os
import pickle
import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from lerobot_shards.core.errors import AccessDeniedError, ObjectNotFoundError, ShortReadError, StorageError
from lerobot_shards.core.storage import GENERIC, S3, RetryPolicy, Storage, coalesce_ranges
from tests.fault_proxy import faulty_s3  # noqa: F401
from tests.hang_guard import hang_guard
from tests.loopback import free_port
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

FAST_RETRY = RetryPolicy(max_attempts=12, base_s=0.01, cap_s=0.05)


def _client_error(status: int, code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject")


def _translated(error: ClientError) -> OSError:
    from s3fs.errors import translate_boto_error

    return translate_boto_error(error)


def _caused_by(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


# -- classification (pure) ------------------------------------------------------------------
@pytest.mark.parametrize(
    "error, transient",
    [
        (ConnectionResetError(errno.ECONNRESET, "reset"), True),
        (ConnectionAbortedError(), True),
        (TimeoutError(), True),
        (OSError(errno.ETIMEDOUT, "timed out"), True),
        (EndpointConnectionError(endpoint_url="http://x"), True),
        (ReadTimeoutError(endpoint_url="http://x"), True),
        (ConnectionClosedError(endpoint_url="http://x"), True),
        (_client_error(503, "SlowDown"), True),
        (_client_error(500, "InternalError"), True),
        (_client_error(429, "TooManyRequests"), True),
        (_client_error(400, "RequestTimeout"), True),  # S3 answers an idle upload with 400
        (_translated(_client_error(503, "SlowDown")), True),  # s3fs: OSError(EBUSY) from ClientError
        (_translated(_client_error(502, "BadGateway")), True),  # s3fs: OSError(EIO), status in the cause
        (_client_error(404, "NoSuchKey"), False),
        (_client_error(403, "AccessDenied"), False),
        (_client_error(400, "InvalidArgument"), False),
        (_client_error(416, "InvalidRange"), False),
        (_translated(_client_error(403, "AccessDenied")), False),  # PermissionError
        (_translated(_client_error(404, "NoSuchKey")), False),  # FileNotFoundError
        (FileNotFoundError(), False),
        (PermissionError(), False),
        (ShortReadError("x: short"), False),
        (ValueError("a bug"), False),  # unknown: never retried into a slow failure
        (_caused_by(RuntimeError("wrapper"), ConnectionResetError()), True),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_is_transient(error, transient):
    assert S3.is_transient(error) is transient


def test_aiohttp_errors_are_transient():
    import aiohttp

    for backend in (GENERIC, S3):  # fsspec's HTTP filesystem and every aiohttp-based client
        assert backend.is_transient(aiohttp.ServerDisconnectedError())
        assert backend.is_transient(aiohttp.ClientPayloadError("Response payload is not completed"))
        assert backend.is_transient(aiohttp.ClientOSError(errno.ECONNRESET, "reset"))


def test_retry_policy_backoff_is_bounded_full_jitter():
    policy = RetryPolicy(base_s=0.2, cap_s=1.0)
    rng = random.Random(0)
    for attempt, bound in [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (10, 1.0)]:
        delays = [policy.delay_s(attempt, rng) for _ in range(200)]
        assert 0 <= min(delays) and max(delays) <= bound
        assert max(delays) > bound * 0.8, "full jitter spans the whole interval"
    with pytest.raises(ValueError, match="max_attempts must be >= 1, got 0"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError, match="read_timeout_s must be >= 0"):
        RetryPolicy(read_timeout_s=-1)


# -- coalescing (pure) ----------------------------------------------------------------------
def test_coalesce_ranges_merges_near_ranges_and_covers_each_once():
    ranges = [(100, 10), (0, 10), (15, 5), (1000, 50), (105, 20), (5000, 0)]
    requests = coalesce_ranges(ranges, max_gap_bytes=10)
    assert [(r.offset, r.size) for r in requests] == [(0, 20), (100, 25), (1000, 50)]
    assert sorted(m for r in requests for m in r.members) == [0, 1, 2, 3, 4]  # the empty range needs no request
    for request in requests:
        for member in request.members:
            offset, size = ranges[member]
            assert request.offset <= offset and offset + size <= request.offset + request.size
    assert len(coalesce_ranges(ranges, max_gap_bytes=0)) == 4  # (0,10) and (15,5) no longer touch
    assert len(coalesce_ranges(ranges, max_gap_bytes=10**9)) == 1
    # The size cap splits; a single range larger than the cap still gets one request.
    assert [(r.offset, r.size) for r in coalesce_ranges([(0, 10), (10, 10), (20, 100)], max_request_bytes=25)] == [
        (0, 20),
        (20, 100),
    ]
    assert coalesce_ranges([]) == []
    with pytest.raises(ValueError, match=r"range 1 is \(-1, 5\)"):
        coalesce_ranges([(0, 1), (-1, 5)])


# -- local ----------------------------------------------------------------------------------
def _parquet_bytes(rows: int) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": list(range(rows)), "y": [f"r{i}" for i in range(rows)]}), buffer, row_group_size=100)
    return buffer.getvalue()


def _exercise(storage: Storage, tmp_path) -> None:
    """The same contract, whatever the root."""
    payload = os.urandom(300_000)
    storage.write_bytes("a/b/blob.bin", payload)
    assert storage.read_bytes("a/b/blob.bin") == payload
    assert storage.read_range("a/b/blob.bin", 1000, 5000) == payload[1000:6000]
    assert storage.read_range("a/b/blob.bin", 0, 0) == b""
    assert storage.size("a/b/blob.bin") == len(payload)
    assert storage.exists("a/b/blob.bin") and not storage.exists("a/b/nothing.bin")

    ranges = [(0, 100), (150, 50), (10_000, 1000), (10_900, 200), (250_000, 10)]
    before = storage.counters.requests
    assert storage.read_ranges("a/b/blob.bin", ranges, max_gap_bytes=1024) == [payload[o : o + s] for o, s in ranges]
    assert storage.counters.requests - before == 3 < len(ranges)

    local = tmp_path / "upload.bin"
    local.write_bytes(b"uploaded")
    storage.put_file(local, "a/up.bin")
    assert local.exists() and storage.read_bytes("a/up.bin") == b"uploaded"
    storage.write_bytes("a/b/blob.bin", b"replaced")  # never a stale cached size or listing
    assert storage.size("a/b/blob.bin") == 8 and storage.read_bytes("a/b/blob.bin") == b"replaced"
    storage.write_bytes("t.parquet", _parquet_bytes(1000))
    assert storage.list() == ["a/b/blob.bin", "a/up.bin", "t.parquet"]
    assert storage.list("a/b") == ["a/b/blob.bin"] and storage.list("nope") == []

    with storage.open_input("t.parquet") as handle:
        table = pq.ParquetFile(handle).read_row_group(3)
    assert table["x"].to_pylist() == list(range(300, 400))

    storage.remove("a/up.bin")
    assert not storage.exists("a/up.bin")
    storage.remove("a/up.bin", missing_ok=True)
    with pytest.raises(ObjectNotFoundError, match=r"a/nothing\.bin: not found") as caught:
        storage.read_bytes("a/nothing.bin")
    assert isinstance(caught.value, FileNotFoundError) and caught.value.attempts == 1
    assert storage.counters.retries == 0
    assert storage.counters.bytes_read > 300_000 and storage.counters.bytes_written > 300_000


def test_local_round_trip(tmp_path):
    storage = Storage(tmp_path / "root")
    _exercise(storage, tmp_path)
    assert not list((tmp_path / "root").rglob(".*tmp*")), "temp files renamed into place"
    assert Storage(f"file://{tmp_path}/root").read_bytes("a/b/blob.bin") == b"replaced"
    with pytest.raises(ObjectNotFoundError):
        Storage(tmp_path / "root").remove("a/up.bin")


def test_register_with_duckdb_local(tmp_path):
    storage = Storage(tmp_path)
    storage.write_bytes("t.parquet", _parquet_bytes(50))
    con = duckdb.connect()
    base = storage.register_with_duckdb(con)
    assert con.execute(f"SELECT count(*) FROM read_parquet('{base}/t.parquet')").fetchone() == (50,)


# -- S3 -------------------------------------------------------------------------------------
def test_s3_round_trip(s3_bucket, tmp_path):
    url, options = s3_bucket
    storage = Storage(f"{url}/dataset", options)
    _exercise(storage, tmp_path)
    assert storage.object_url("t.parquet") == f"{url}/dataset/t.parquet"


def test_missing_object_raises_at_once(s3_bucket):
    url, options = s3_bucket
    storage = Storage(url, options, retry=RetryPolicy(max_attempts=6, base_s=1.0))
    for read in (lambda: storage.read_bytes("missing.bin"), lambda: storage.read_range("missing.bin", 0, 10)):
        with pytest.raises(ObjectNotFoundError, match=rf"{url}/missing\.bin: not found") as caught:
            read()
        assert caught.value.attempts == 1 and caught.value.url == f"{url}/missing.bin"
    assert storage.counters.retries == 0 and storage.counters.requests == 2  # no backoff, no retry
    with pytest.raises(ObjectNotFoundError, match="no-such-bucket"):
        Storage("s3://no-such-bucket-here", options).read_bytes("x")


def test_an_object_written_by_another_client_since_a_listing_is_read(s3_bucket):
    """s3fs answers a whole-object read's size from its cached listing of the folder: a root
    that listed shards/ before another process wrote shard 1 must still read shard 1 (a resumed
    pack's bucket read back as "not found")."""
    url, options = s3_bucket
    reader = Storage(f"{url}/pack", options)
    writer = Storage(f"{url}/pack", {**options, "default_block_size": 6 << 20})  # its own client
    writer.write_bytes("shards/shard-000000.json", b"{}")
    assert reader.list("shards") == ["shards/shard-000000.json"]  # the listing is cached
    writer.write_bytes("shards/shard-000001.json", b"[1]")
    assert reader.read_bytes("shards/shard-000001.json") == b"[1]"


def test_range_beyond_the_object_names_it_and_is_not_retried(s3_bucket):
    url, options = s3_bucket
    storage = Storage(url, options, retry=RetryPolicy(base_s=1.0))
    storage.write_bytes("shards/shard-000001.tar", b"x" * 1000)
    with pytest.raises(
        ShortReadError, match=r"shard-000001\.tar: ranged read \[900, 1100\) got 100 of 200 bytes; the object has 1000 bytes"
    ):
        storage.read_range("shards/shard-000001.tar", 900, 200)
    with pytest.raises(ShortReadError, match=r"shard-000001\.tar: ranged read \[5000, 5010\) got 0 of 10 bytes"):
        storage.read_range("shards/shard-000001.tar", 5000, 10)  # S3 answers 416 InvalidRange
    assert storage.counters.retries == 0
    with pytest.raises(ValueError, match="negative"):
        storage.read_range("shards/shard-000001.tar", -1, 10)


def test_transient_faults_are_retried_and_bytes_stay_exact(s3_bucket, faulty_s3):
    url, options = s3_bucket
    payload = os.urandom(2_000_000)
    Storage(url, options).write_bytes("blob.bin", payload)
    faulty = faulty_s3(reset_probability=0.3, stall_probability=0.03, throttle_probability=0.1, seed=7)
    storage = Storage(url, faulty.storage_options, retry=FAST_RETRY)
    rng = random.Random(1)
    for _ in range(30):
        offset = rng.randrange(len(payload) - 1)
        size = rng.randint(1, min(300_000, len(payload) - offset))
        assert storage.read_range("blob.bin", offset, size) == payload[offset : offset + size]
    assert storage.read_bytes("blob.bin") == payload
    ranges = [(i * 100_000, 60_000) for i in range(10)]
    assert storage.read_ranges("blob.bin", ranges, max_gap_bytes=50_000) == [payload[o : o + s] for o, s in ranges]
    storage.write_bytes("written.bin", payload[:500_000])  # writes are retried too (a PUT is idempotent)
    assert Storage(url, options).read_bytes("written.bin") == payload[:500_000]
    counters = faulty.counters
    assert counters.resets >= 1 and counters.throttles >= 1 and counters.stalls >= 1, counters
    # Every throttle (503) and stall (read timeout) costs one of our attempts. A reset before
    # the response headers may instead be retried once inside aiohttp (RFC 9112 retry of an
    # idempotent request), invisible to every layer above it.
    assert storage.counters.retries >= counters.throttles + counters.stalls, (storage.counters, counters)
    assert storage.counters.retries <= counters.faults, (storage.counters, counters)


def test_stalling_endpoint_raises_within_the_policy(s3_bucket, faulty_s3):
    url, options = s3_bucket
    faulty = faulty_s3(reset_probability=0.0, stall_probability=1.0)
    # No timeouts in the options: the policy's apply (s3fs's own default would be 15 s).
    stalled_options = {k: v for k, v in faulty.storage_options.items() if k != "config_kwargs"}
    policy = RetryPolicy(max_attempts=3, base_s=0.01, connect_timeout_s=1, read_timeout_s=1)
    storage = Storage(url, stalled_options, retry=policy)
    # The policy's timeouts reach botocore (s3fs's default read timeout would be 15 s).
    assert storage.fs.config_kwargs["read_timeout"] == 1 and storage.fs.config_kwargs["connect_timeout"] == 1
    with hang_guard(120, "three 1-second read timeouts"):
        with pytest.raises(
            StorageError, match=rf"{url}/blob\.bin: ranged read \[0, 10\) failed after 3 attempts; last error: .*[Tt]imeout"
        ) as caught:
            storage.read_range("blob.bin", 0, 10)
    assert caught.value.attempts == 3 and storage.counters.retries == 2
    assert faulty.counters.stalls == 3


def test_unreachable_endpoint_is_retried_then_named(s3_bucket):
    url, options = s3_bucket
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    storage = Storage(url, {**options, "client_kwargs": {"endpoint_url": dead}}, retry=RetryPolicy(max_attempts=3, base_s=0.01))
    with pytest.raises(StorageError, match=rf"{url}/x\.bin: read failed after 3 attempts; last error: .*{dead}"):
        storage.read_bytes("x.bin")


def test_permanent_errors_are_not_retried():
    storage = Storage("s3://bucket", retry=RetryPolicy(base_s=1.0))
    calls = []

    def denied():
        calls.append(1)
        raise _translated(_client_error(403, "AccessDenied"))

    with pytest.raises(AccessDeniedError, match=r"s3://bucket/k: access denied \(read\)") as caught:
        storage._call("read", "k", denied)
    assert isinstance(caught.value, PermissionError) and calls == [1]


def test_register_with_duckdb_reads_parquet_over_s3(s3_bucket):
    url, options = s3_bucket
    storage = Storage(f"{url}/ds", options)
    storage.write_bytes("index/part-0.parquet", _parquet_bytes(300))
    storage.write_bytes("index/part-1.parquet", _parquet_bytes(200))
    con = duckdb.connect()
    base = storage.register_with_duckdb(con)
    assert base == f"{url}/ds"
    assert con.execute(f"SELECT count(*), sum(x) FROM read_parquet('{base}/index/part-0.parquet')").fetchone() == (
        300,
        sum(range(300)),
    )
    assert con.execute(f"SELECT count(*) FROM read_parquet('{base}/index/part-*.parquet')").fetchone() == (500,)


# -- processes ------------------------------------------------------------------------------
def _read_in_child(storage: Storage, queue) -> None:
    try:
        queue.put((os.getpid(), storage.read_range("blob.bin", 10, 20), storage.counters.requests))
    except BaseException as err:  # reported to the parent, which fails the test with it
        queue.put((os.getpid(), repr(err), -1))


def _run_child(context: str, storage: Storage):
    ctx = multiprocessing.get_context(context)
    queue = ctx.Queue()
    process = ctx.Process(target=_read_in_child, args=(storage, queue))
    process.start()
    result = queue.get(timeout=60)
    process.join(30)
    assert process.exitcode == 0
    return result


def test_storage_pickles_and_works_in_forked_and_spawned_processes(s3_bucket):
    url, options = s3_bucket
    storage = Storage(url, options)
    storage.write_bytes("blob.bin", bytes(range(100)))
    assert storage.read_bytes("blob.bin") == bytes(range(100))  # s3fs's event loop now runs here

    copy = pickle.loads(pickle.dumps(storage))
    assert copy.counters.requests == 0 and copy.read_range("blob.bin", 0, 3) == bytes([0, 1, 2])

    expected = bytes(range(10, 30))
    pid, data, _ = _run_child("fork", storage)  # inherits the parent's filesystem object
    assert pid != os.getpid() and data == expected
    pid, data, requests = _run_child("spawn", storage)  # arrives pickled
    assert data == expected and requests == 1
    assert storage.read_range("blob.bin", 10, 20) == expected, "the parent still works"


def test_forked_children_and_parent_read_concurrently(s3_bucket):
    """fork after the parent's event loop started, then read in all three processes at once."""
    url, options = s3_bucket
    storage = Storage(url, options)
    storage.write_bytes("blob.bin", bytes(range(100)))
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    children = [ctx.Process(target=_read_in_child, args=(storage, queue)) for _ in range(2)]
    for child in children:
        child.start()
    for _ in range(5):
        assert storage.read_range("blob.bin", 10, 20) == bytes(range(10, 30))
    results = [queue.get(timeout=60) for _ in children]
    for child in children:
        child.join(30)
    assert [data for _, data, _ in results] == [bytes(range(10, 30))] * 2


def test_repr_hides_options():
    storage = Storage("s3://bucket/prefix", {"key": "AKIA", "secret": "hunter2"})
    assert "hunter2" not in repr(storage) and "s3://bucket/prefix" in repr(storage)


def test_fork_while_a_parent_thread_holds_the_lock(s3_bucket):
    url, options = s3_bucket
    storage = Storage(url, options)
    storage.write_bytes("blob.bin", bytes(range(100)))
    with storage._process.lock:  # as if a prefetch thread were counting bytes at the moment of fork
        pid, data, _ = _run_child("fork", storage)
    assert data == bytes(range(10, 30))


def test_process_limits_are_named_and_never_retried(tmp_path):
    """aiohttp reports an exhausted descriptor table as a connection error (which alone reads
    as transient): the reader names the limit at once instead of retrying it as the network."""
    from lerobot_shards.core.errors import ResourceLimitError
    from lerobot_shards.reader.fetch import Prefetcher

    class ClientOSError(OSError):  # aiohttp's, matched by name like the real one
        pass

    wrapped = ClientOSError("Cannot connect to host")
    wrapped.__cause__ = OSError(errno.EMFILE, "Too many open files")
    assert GENERIC.is_transient(wrapped)  # on its own it looks like a flaky network
    storage = Storage(str(tmp_path), retry=RetryPolicy(max_attempts=6, base_s=0.0))
    calls = []

    def exhausted():
        calls.append(1)
        raise wrapped

    with pytest.raises(
        ResourceLimitError, match=r"read: too many open files \(EMFILE\): this process may open \d+ files \(ulimit -n"
    ):
        storage._call("read", "k", exhausted)
    assert len(calls) == 1 and storage.counters.retries == 0

    prefetcher = Prefetcher(lambda p: p, size_of=lambda p: 1, describe=lambda p: f"episode {p}", depth=2)

    def no_thread(*args, **kwargs):
        raise RuntimeError("can't start new thread")

    prefetcher._executor.submit = no_thread
    with pytest.raises(ResourceLimitError, match=r"prefetching episode 0: cannot start another thread: .* \(ulimit -u\)"):
        prefetcher.schedule([0, 1])
