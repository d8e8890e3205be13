"""PackedDataset on a real S3 endpoint (moto on loopback): where=, the disk cache, stats.

Rules: a bucket gives the samples a local directory gives (same order, same values), SQL
filters read the bucket's sample index, and a second pass through a warm disk cache reads no
video from the bucket.
"""

from __future__ import annotations

import s3fs
import torch

from lerobot_shards import PackedDataset
from tests.packed_fixtures import *
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

DELTA = {"action": [0.0, 1 / 30, 2 / 30], "observation.images.wrist": [-1 / 30, 0.0]}
WHERE = "chunk_action_pad_after = 0 AND frame_index % 2 = 0"


def _upload(packed_copy, s3_bucket) -> tuple[str, dict]:
    url, options = s3_bucket
    s3fs.S3FileSystem(**options).put(str(packed_copy), f"{url.removeprefix('s3://')}/packed", recursive=True)
    return f"{url}/packed", options


def _samples(dataset) -> list[dict]:
    return list(torch.utils.data.DataLoader(dataset, batch_size=6, num_workers=2))


def _assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert set(x) == set(y)
        for key in x:
            same = torch.equal(x[key], y[key]) if isinstance(x[key], torch.Tensor) else x[key] == y[key]
            assert same, key


def test_bucket_with_where_and_disk_cache_equals_local(packed_copy, s3_bucket, tmp_path):
    url, options = _upload(packed_copy, s3_bucket)
    local = _samples(PackedDataset(str(packed_copy), delta_timestamps=DELTA, where=WHERE, seed=4, episode_pool_size=3))
    cache = tmp_path / "cache"

    cold = PackedDataset(
        url, storage_options=options, delta_timestamps=DELTA, where=WHERE, seed=4, episode_pool_size=3, cache_dir=str(cache)
    )
    assert cold.num_anchors == sum(len(b["index"]) for b in local) > 0
    _assert_same(local, _samples(cold))
    assert any(cache.rglob("*")), "fetched episode bytes should be in the disk cache"

    # Cold: only an episode split between the two workers can be a hit (the second fetch).
    assert cold.stats()["disk_cache_hits"] < cold.stats()["episodes_admitted"] / 2

    warm = PackedDataset(
        url, storage_options=options, delta_timestamps=DELTA, where=WHERE, seed=4, episode_pool_size=3, cache_dir=str(cache)
    )
    _assert_same(local, _samples(warm))
    stats = warm.stats()  # rows still come from the bucket: only video bytes are cached
    assert stats["disk_cache_hits"] == stats["episodes_admitted"] >= 1
