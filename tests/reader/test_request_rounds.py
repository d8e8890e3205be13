"""Round trips to a bucket (issue 32), counted without a clock: a proxy in front of a real S3
server (moto on loopback) holds requests until a round's worth are waiting
(``FaultProxy.expect_rounds``). Opening a pack costs two rounds (the manifest; then the
episodes index, tasks and info together), opening a compiled mixture two (``mixture.json``;
its four tables together), and an admitted episode one (footer, row group and members
together), where they cost 6, 5 and 3 requests one after another before.
"""

from __future__ import annotations

import s3fs

from lerobot_shards import MixtureDataset, PackedDataset, create_mixture
from lerobot_shards.core.storage import Storage
from lerobot_shards.reader.fetch import EpisodeFetcher
from tests.fault_proxy import faulty_s3  # noqa: F401
from tests.packed_fixtures import *
from tests.s3_server import s3_bucket, s3_server  # noqa: F401


def _proxy(faulty_s3):
    return faulty_s3(reset_probability=0.0, read_timeout=60)


def _upload(local, s3_bucket, name: str) -> str:
    url, options = s3_bucket
    s3fs.S3FileSystem(**options).put(str(local), f"{url.removeprefix('s3://')}/{name}", recursive=True)
    return f"{url}/{name}"


def _released(proxy) -> list[int]:
    assert not [r for r in proxy.rounds if r[1]], f"a round was not filled (requests sent one after another): {proxy.rounds}"
    return [size for size, _, _ in proxy.rounds]


def test_opening_a_pack_and_fetching_an_episode_take_one_round_each(packed_copy, s3_bucket, faulty_s3):
    url = _upload(packed_copy, s3_bucket, "pack")
    bucket = _proxy(faulty_s3)
    bucket.proxy.expect_rounds([1, 3], timeout_s=15)
    dataset = PackedDataset(url, storage_options=bucket.storage_options)
    assert _released(bucket.proxy) == [1, 3]
    assert {line.split()[0] for line in bucket.proxy.rounds[1][2]} == {"GET"}
    fetcher = EpisodeFetcher.for_pack(Storage(url, bucket.storage_options), dataset.index)
    before = bucket.proxy.counters.requests
    bucket.proxy.expect_rounds([3], timeout_s=15)  # footer, row group, members
    episode = fetcher.fetch(0)
    assert _released(bucket.proxy) == [3] and bucket.proxy.counters.requests - before == 3
    assert set(episode.video) == set(dataset.video_keys)
    # Another episode of the same shard: its footer is cached (and its row group, when shared):
    # the rest in one round.
    catalog = fetcher.catalog
    later = max(e for e in range(catalog.num_episodes) if catalog.shard_row[e] == catalog.shard_row[0])
    assert later > 0, "the fixture should hold several episodes in a shard"
    expected = 1 + int(catalog.row_group[later] != catalog.row_group[0])
    bucket.proxy.expect_rounds([expected], timeout_s=15)
    fetcher.fetch(later)
    assert _released(bucket.proxy) == [expected]
    fetcher.close()


def test_opening_a_compiled_mixture_takes_two_rounds(packed_copy, packed_h264, s3_bucket, faulty_s3, tmp_path):
    import shutil

    root = tmp_path / "mix"
    shutil.copytree(packed_copy, root / "a")
    shutil.copytree(packed_h264, root / "b")
    create_mixture(str(root))
    url = _upload(root, s3_bucket, "mix")
    bucket = _proxy(faulty_s3)
    bucket.proxy.expect_rounds([1, 4], timeout_s=15)
    dataset = MixtureDataset(f"{url}/mixture.json", storage_options=bucket.storage_options)
    assert _released(bucket.proxy) == [1, 4]
    assert dataset.names == ["a", "b"]


def test_fetch_threads_is_an_option_of_both_datasets(packed_copy):
    import pytest

    dataset = PackedDataset(str(packed_copy), fetch_threads=5)
    assert dataset.options.fetch_threads == dataset._view().options.fetch_threads == 5
    assert PackedDataset(str(packed_copy)).options.fetch_threads == 2  # the documented default
    with pytest.raises(ValueError, match="fetch_threads must be >= 1, got 0"):
        PackedDataset(str(packed_copy), fetch_threads=0)
    with pytest.raises(ValueError, match="fetch_threads must be >= 1, got 0"):
        MixtureDataset([str(packed_copy)], fetch_threads=0)
