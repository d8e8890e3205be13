"""Random access from a bucket (issue 66): a real S3 server (moto on loopback) behind the fault
proxy, requests counted, never timed.

Rules: a batch of 32 random samples costs one request per footer, row group and episode it
touches (the episode's members in one ranged read), fewer than one per member touched; the same
batch again costs none; items equal the local pack's; and LeRobot's registry path (a bucket URL
as ``root``, AWS's own environment for the endpoint) reads the same items.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import s3fs

from lerobot_shards import PackedLeRobotDataset
from tests.fault_proxy import faulty_s3  # noqa: F401
from tests.packed_fixtures import *
from tests.reader.test_lerobot_reader import _make_reader, _registry_module
from tests.reader.test_reader_parity import assert_same_sample
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

LENGTHS = [12, 1, 30, 2, 17, 25, 9, 40, 5]


def _upload(local, s3_bucket, name: str) -> str:
    url, options = s3_bucket
    s3fs.S3FileSystem(**options).put(str(local), f"{url.removeprefix('s3://')}/{name}", recursive=True)
    return f"{url}/{name}"


def test_a_random_batch_costs_a_request_per_row_group_and_episode_it_touches(packed_copy, s3_bucket, faulty_s3):
    url = _upload(packed_copy, s3_bucket, "pack")
    bucket = faulty_s3(reset_probability=0.0, read_timeout=30)
    ds = PackedLeRobotDataset(url, storage_options=bucket.storage_options, episode_pool_size=16)
    local = PackedLeRobotDataset(str(packed_copy))
    positions = random.Random(5).sample(range(len(ds)), 32)
    before = bucket.proxy.counters.requests
    samples = ds.__getitems__(positions)
    spent = bucket.proxy.counters.requests - before

    catalog = ds.stream.catalog
    starts = np.cumsum([0, *LENGTHS])
    episodes = {int(np.searchsorted(starts, p, side="right") - 1) for p in positions}
    row_groups = {(int(catalog.shard_row[e]), int(catalog.row_group[e])) for e in episodes}
    footers = {int(catalog.shard_row[e]) for e in episodes}
    members = sum(len(catalog.datasets[0].video_keys) for _ in episodes)
    assert spent == len(footers) + len(row_groups) + len(episodes), (spent, footers, row_groups, episodes)
    assert len(episodes) < members  # one ranged read covers an episode's members
    for position, sample in zip(positions, samples):
        assert_same_sample(local[position], sample, f"bucket ds[{position}]")
    again = bucket.proxy.counters.requests
    ds.__getitems__(positions[::-1])
    assert bucket.proxy.counters.requests == again  # held episodes cost nothing


def test_lerobots_registry_reads_a_pack_in_a_bucket(packed_copy, s3_bucket, s3_server, tmp_path, monkeypatch):
    """``LeRobotDataset(repo_id, root="s3://...")`` on LeRobot main: ``localize_root`` brings the
    pack's ``meta/`` local, then the reader gets the URL itself; credentials and a non-AWS endpoint
    come from AWS's environment variables, as for any s3fs user (LeRobot passes no options)."""
    url = _upload(packed_copy, s3_bucket, "pack")
    monkeypatch.setenv("LEROBOT_SHARDS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    module = _registry_module()
    folder = module.localize_root("org/pack", url, None, token=None, force_cache_sync=False)
    assert (folder / "meta" / "info.json").read_bytes() == (packed_copy / "meta" / "info.json").read_bytes()
    reader = _make_reader(module, None, url, episodes=[4], return_uint8=True)
    local = PackedLeRobotDataset(str(packed_copy), episodes=[4], return_uint8=True)
    assert reader.num_frames == len(local) == 17
    for got, want in zip(reader.get_items([0, 16, 8]), local.__getitems__([0, 16, 8])):
        assert_same_sample(want, got, "registry reader from a bucket")
    with pytest.raises(FileNotFoundError, match="not a lerobot-shards pack"):
        module.localize_root("org/none", f"{s3_bucket[0]}/nothing")
