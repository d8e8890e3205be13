"""Object storage end to end against a real S3 server (moto_server on loopback): pack to and
from a bucket, verify/info/sql on s3://, stream from the bucket, survive faults (issue 5)."""

from __future__ import annotations

import io
import json
from urllib.parse import urlparse

import pyarrow.parquet as pq
import pytest
import s3fs
import torch
from click.testing import CliRunner

from lerobot_shards import FormatError, IntegrityError, PackedDataset, RetryPolicy, StorageError, pack_dataset, run_sql, verify
from lerobot_shards.cli import main as cli
from lerobot_shards.core.errors import ObjectNotFoundError
from lerobot_shards.core.storage import S3, Storage
from tests.fault_proxy import FaultProxy, faulty_s3  # noqa: F401
from tests.hang_guard import hang_guard
from tests.packed_fixtures import *
from tests.packed_fixtures import PACK_WINDOWS, SHARD_SIZE_MB
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

DELTA = {"action": [0.0, 1 / 30], "observation.images.top": [-1 / 30, 0.0]}


def _epoch(dataset) -> list[dict]:
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2)
    return list(loader)


def _assert_same_batches(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for key in x:
            if isinstance(x[key], torch.Tensor):
                assert torch.equal(x[key], y[key]), key
            else:
                assert x[key] == y[key], key


@pytest.fixture
def packed_in_bucket(sample_source, s3_bucket):
    url, options = s3_bucket
    dst = f"{url}/packed"
    report = pack_dataset(str(sample_source), dst, windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB, storage_options=options)
    assert report.finalized
    return dst, options


def test_pack_to_bucket_is_identical_and_inspectable(packed_copy, packed_in_bucket):
    dst, options = packed_in_bucket
    fs = s3fs.S3FileSystem(**options)
    root = dst.removeprefix("s3://")
    local_files = sorted(p.relative_to(packed_copy).as_posix() for p in packed_copy.rglob("*") if p.is_file())
    remote_files = sorted(p[len(root) + 1 :] for p in fs.find(root))
    assert remote_files == local_files
    for rel in local_files:
        assert fs.cat_file(f"{root}/{rel}") == (packed_copy / rel).read_bytes(), rel
    assert verify(dst, decode=True, storage_options=options).ok
    columns, rows = run_sql(dst, "SELECT count(*), sum(chunk_action_pad_after) FROM samples", storage_options=options)
    assert rows[0][0] == 141
    frames = run_sql(dst, "SELECT count(*) FROM frames", storage_options=options)[1]
    assert frames == [(141,)]
    result = CliRunner().invoke(cli, ["info", dst, "--storage-options", json.dumps(options)])
    assert result.exit_code == 0 and "9 / 141" in result.output


def test_reader_from_bucket_equals_local(packed_copy, packed_in_bucket):
    dst, options = packed_in_bucket
    remote = PackedDataset(dst, storage_options=options, delta_timestamps=DELTA, seed=3)
    local = PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=3)
    _assert_same_batches(_epoch(local), _epoch(remote))
    assert remote.stats()["bytes_fetched"] > 0


def test_pack_from_a_bucket_source(sample_source, packed_copy, s3_bucket, tmp_path):
    url, options = s3_bucket
    fs = s3fs.S3FileSystem(**options)
    fs.put(str(sample_source), f"{url.removeprefix('s3://')}/lerobot", recursive=True)
    dst = tmp_path / "from-bucket"
    pack_dataset(
        f"{url}/lerobot",
        str(dst),
        windows=PACK_WINDOWS,
        shard_size_mb=SHARD_SIZE_MB,
        src_storage_options=options,
        cache_dir=str(tmp_path / "cache"),
    )
    for tar in sorted(packed_copy.glob("shards/*")):
        if tar.suffix in (".tar", ".parquet"):
            assert (dst / "shards" / tar.name).read_bytes() == tar.read_bytes(), tar.name
    # A subset stages only the files its episodes need.
    staged = pack_dataset(
        f"{url}/lerobot", str(tmp_path / "subset"), episodes=[0], src_storage_options=options, cache_dir=str(tmp_path / "cache2")
    )
    assert staged.episodes == 1
    assert len(list((tmp_path / "cache2").rglob("*.mp4"))) == 2


def test_the_retry_policy_bounds_a_bucket_source_too(sample_source, s3_bucket, faulty_s3, tmp_path):
    """``PackRunOptions.retry`` says it bounds a bucket source: staging reads through it (it used
    the default policy: 6 attempts with waits up to 5 s, whatever the user asked)."""
    url, options = s3_bucket
    fs = s3fs.S3FileSystem(**options)
    fs.put(str(sample_source), f"{url.removeprefix('s3://')}/lerobot", recursive=True)
    faulty = faulty_s3(reset_probability=0.0, throttle_probability=1.0, seed=5)  # every request: 503 SlowDown
    policy = RetryPolicy(max_attempts=2, base_s=0.01, cap_s=0.02, connect_timeout_s=1.0, read_timeout_s=1.0)
    with (
        hang_guard(300, "staging a bucket source that only throttles"),
        pytest.raises(StorageError, match=r"after 2 attempts; last error: .*\[S3 SlowDown, HTTP 503\]") as failed,
    ):
        pack_dataset(
            f"{url}/lerobot",
            str(tmp_path / "out"),
            src_storage_options=faulty.storage_options,
            retry=policy,
            cache_dir=str(tmp_path / "cache"),
        )
    assert failed.value.attempts == 2 and faulty.counters.throttles == 2


def test_interrupted_pack_to_bucket_resumes(sample_source, s3_bucket):
    url, options = s3_bucket
    dst = f"{url}/resumable"
    first = pack_dataset(str(sample_source), dst, shard_size_mb=SHARD_SIZE_MB, part=(0, 2), storage_options=options)
    assert not first.finalized
    fs = s3fs.S3FileSystem(**options)
    assert not fs.exists(f"{dst.removeprefix('s3://')}/manifest.json"), "no manifest until finalize: the commit point"
    second = pack_dataset(str(sample_source), dst, shard_size_mb=SHARD_SIZE_MB, storage_options=options)
    assert second.shards_skipped == first.shards_written and second.finalized
    assert verify(dst, storage_options=options).ok


def test_missing_and_truncated_shards_fail_naming_the_shard(packed_in_bucket):
    dst, options = packed_in_bucket
    fs = s3fs.S3FileSystem(**options)
    root = dst.removeprefix("s3://")
    tar = f"{root}/shards/shard-000001.tar"
    fs.pipe_file(tar, fs.cat_file(tar)[:700])
    with hang_guard(120, "errors must surface"):
        with pytest.raises(IntegrityError, match=r"shard-000001"):
            list(PackedDataset(dst, storage_options=options, shuffle=False))
        fs.rm_file(f"{root}/shards/shard-000002.tar")
        index = pq.read_table(io.BytesIO(fs.cat_file(f"{root}/index/episodes.parquet"))).to_pylist()
        in_shard_2 = [e["episode_index"] for e in index if e["shard"] == 2]
        with pytest.raises(ObjectNotFoundError, match=r"shard-000002.*not found"):
            list(PackedDataset(dst, storage_options=options, shuffle=False, episodes=in_shard_2))


def test_transient_faults_are_retried_and_samples_stay_exact(packed_copy, packed_in_bucket, s3_server):
    dst, _ = packed_in_bucket
    host, port = urlparse(s3_server.endpoint_url).hostname, urlparse(s3_server.endpoint_url).port
    with FaultProxy(host, port, reset_probability=0.3, seed=1) as proxy:
        options = s3_server.storage_options(proxy.url)
        retry = RetryPolicy(max_attempts=10, base_s=0.01, cap_s=0.1)
        remote = PackedDataset(dst, storage_options=options, delta_timestamps=DELTA, seed=9, retry=retry)
        local = PackedDataset(str(packed_copy), delta_timestamps=DELTA, seed=9)
        _assert_same_batches(list(local), list(remote))
        assert proxy.counters.resets > 0


def _bucket_tree(url: str, options: dict) -> dict[str, bytes]:
    storage = Storage(url, options)
    return {rel: storage.read_bytes(rel) for rel in storage.list()}


def _local_tree(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# Our retry loop alone is in charge at the destination: the faulty endpoint's options carry no
# botocore retries, and read timeouts of 1 s make stalls cheap.
FAULT_RETRY = RetryPolicy(max_attempts=12, base_s=0.01, cap_s=0.05, connect_timeout_s=1.0, read_timeout_s=1.0)


def test_pack_to_a_faulty_bucket_completes_with_retries_and_the_same_bytes(sample_source, packed_copy, s3_bucket, faulty_s3):
    url, options = s3_bucket
    faulty = faulty_s3(reset_probability=0.15, stall_probability=0.02, throttle_probability=0.1, seed=3)
    assert "retries" not in faulty.storage_options["config_kwargs"]
    with hang_guard(600, "packing through resets, stalls and throttling"):
        report = pack_dataset(
            str(sample_source),
            f"{url}/faulty",
            windows=PACK_WINDOWS,
            shard_size_mb=SHARD_SIZE_MB,
            storage_options=faulty.storage_options,
            retry=FAULT_RETRY,
        )
    counters = faulty.counters
    assert report.finalized and counters.resets > 0 and counters.stalls > 0 and counters.throttles > 0, counters
    # Every write (plan, meta, shards, receipts, index, manifest) went through the faults and
    # landed whole: the pack is byte-identical to the same pack on local disk.
    assert _bucket_tree(f"{url}/faulty", options) == _local_tree(packed_copy)
    assert verify(f"{url}/faulty", storage_options=options).ok


def test_a_destination_that_fails_mid_pack_leaves_no_finished_pack_and_resumes(sample_source, packed_copy, s3_bucket, faulty_s3):
    url, options = s3_bucket
    dst = f"{url}/dies"
    faulty = faulty_s3(reset_probability=0.0, seed=4)
    policy = RetryPolicy(max_attempts=3, base_s=0.01, cap_s=0.02, connect_timeout_s=1.0, read_timeout_s=1.0)

    def outage_after_first_shard(state) -> None:
        if state.shards_written == 1:  # the bucket starts answering 503 SlowDown to everything
            faulty.proxy.set_fault_probabilities(throttle=1.0)

    with pytest.raises(
        StorageError,
        match=r"shard-000001\.\w+: upload failed after 3 attempts; last error: .*reduce your request rate.* \[S3 SlowDown, HTTP 503\]",
    ) as failed:
        pack_dataset(
            str(sample_source),
            dst,
            windows=PACK_WINDOWS,
            shard_size_mb=SHARD_SIZE_MB,
            storage_options=faulty.storage_options,
            retry=policy,
            progress=outage_after_first_shard,
        )
    assert dst in str(failed.value) and failed.value.attempts == 3
    # Nothing a reader takes for a finished pack: no manifest, and readers say so.
    bucket = Storage(dst, options)
    assert not bucket.exists("manifest.json") and bucket.exists("shards/shard-000000.json")
    with pytest.raises(FormatError, match="no manifest.json; not a packed dataset, or its pack has not finished"):
        PackedDataset(dst, storage_options=options)
    assert not verify(dst, storage_options=options).ok
    # The bucket heals; the same command resumes from the committed shard and finishes.
    faulty.proxy.set_fault_probabilities()
    report = pack_dataset(
        str(sample_source),
        dst,
        windows=PACK_WINDOWS,
        shard_size_mb=SHARD_SIZE_MB,
        storage_options=faulty.storage_options,
        retry=policy,
    )
    assert report.finalized and report.shards_skipped == 1 and report.shards_written == report.shards - 1
    assert _bucket_tree(dst, options) == _local_tree(packed_copy)


def test_storage_errors_are_classified_and_bounded(s3_bucket, s3_server):
    url, options = s3_bucket
    storage = Storage(url, options, retry=RetryPolicy(max_attempts=3, base_s=0.01))
    with pytest.raises(ObjectNotFoundError, match=r"missing\.bin: not found"):
        storage.read_bytes("missing.bin")
    assert storage.counters.retries == 0 and storage.counters.requests == 1
    host, port = urlparse(s3_server.endpoint_url).hostname, urlparse(s3_server.endpoint_url).port
    with FaultProxy(host, port, stall_probability=1.0) as proxy:
        stalled = Storage(url, s3_server.storage_options(proxy.url), retry=RetryPolicy(max_attempts=2, base_s=0.01))
        with hang_guard(120, "a stalled endpoint"), pytest.raises(StorageError, match=r"after 2 attempts"):
            stalled.read_bytes("anything.bin")
    assert S3.is_transient(ConnectionResetError()) and not S3.is_transient(PermissionError())
