"""Episode pool, prefetch, decode errors and reader stats (issue 4, contracts 2, 5 and 6).

Rules: the pool never holds more than ``episode_pool_size`` episodes; prefetch stays within
its byte budget; a background failure reaches the consumer naming the episode, never a hang;
decoder errors name shard, episode and camera; ``stats()`` adds up over DataLoader workers,
whatever their start method.
"""

from __future__ import annotations

import random
import shutil
import threading
import time

import pytest
import torch

from lerobot_shards import DecodeError, PackedDataset
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import video_column
from lerobot_shards.reader.fetch import EpisodeFetcher, Prefetcher, PrefetchError
from tests.hang_guard import hang_guard
from tests.pack_tamper import replace_member
from tests.packed_fixtures import *
from tests.packed_fixtures import episodes_index

TOTAL = 141
TOP = "observation.images.top"


# -- Prefetcher, without files ---------------------------------------------------------------
class _Recorder:
    """A fetch that records concurrency and can fail or block on chosen positions."""

    def __init__(self, fail: set[int] = frozenset(), delay_s: float = 0.0):
        self.fail, self.delay_s = fail, delay_s
        self.fetched: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, position: int) -> str:
        time.sleep(self.delay_s)
        with self.lock:
            self.fetched.append(position)
        if position in self.fail:
            raise RuntimeError("disk on fire")
        return f"item {position}"


def _prefetcher(fetch, sizes, **options) -> Prefetcher:
    return Prefetcher(fetch, size_of=sizes.__getitem__, describe=lambda p: f"shard-000000 episode {p}", **options)


def test_prefetch_fetches_in_schedule_order_within_depth_and_bytes():
    sizes = [100] * 8 + [1000, 100]
    fetch = _Recorder(delay_s=0.01)
    prefetcher = _prefetcher(fetch, sizes, depth=4, byte_budget=250, threads=2)
    order = [3, 1, 4, 0, 5, 9, 2, 6, 8, 7]
    prefetcher.schedule(order)
    got = [prefetcher.take(p) for p in order]
    prefetcher.close()
    assert got == [f"item {p}" for p in order]
    assert sorted(fetch.fetched) == sorted(order), "every episode fetched exactly once"
    # The budget holds two 100-byte episodes; the 1000-byte one is let through alone.
    assert prefetcher.peak_bytes == 1000 and prefetcher.in_flight_bytes == 0


def test_prefetch_budget_smaller_than_one_episode_still_progresses():
    sizes = [500] * 6
    prefetcher = _prefetcher(_Recorder(), sizes, depth=3, byte_budget=1)
    prefetcher.schedule(list(range(6)))
    assert [prefetcher.take(p) for p in range(6)] == [f"item {p}" for p in range(6)]
    assert prefetcher.peak_bytes == 500
    prefetcher.close()


def test_background_failure_reaches_the_consumer_naming_the_episode():
    fetch = _Recorder(fail={2})
    prefetcher = _prefetcher(fetch, [1] * 5, depth=4)
    prefetcher.schedule([0, 1, 2, 3, 4])
    assert prefetcher.take(0) == "item 0" and prefetcher.take(1) == "item 1"
    with pytest.raises(PrefetchError, match=r"shard-000000 episode 2: background fetch failed \(RuntimeError: disk on fire\)"):
        prefetcher.take(2)
    assert prefetcher.take(3) == "item 3"
    prefetcher.close()


def test_unscheduled_take_fetches_on_demand_and_once():
    fetch = _Recorder()
    prefetcher = _prefetcher(fetch, [1] * 4, depth=0)
    prefetcher.schedule([0, 1, 2])
    assert fetch.fetched == []  # depth 0: nothing ahead of need
    assert [prefetcher.take(p) for p in (0, 1, 2)] == ["item 0", "item 1", "item 2"]
    assert fetch.fetched == [0, 1, 2]
    with pytest.raises(ValueError, match="depth must be >= 0, got -1"):
        _prefetcher(fetch, [1], depth=-1)
    prefetcher.close()


# -- through PackedDataset -------------------------------------------------------------------
def _episode_bytes(packed) -> list[int]:
    dataset = PackedDataset(str(packed))
    fetcher = EpisodeFetcher.for_pack(dataset.storage, dataset.index)
    return [fetcher.fetch(i).nbytes for i in range(len(dataset.index.episodes))]


def test_pool_and_prefetch_stay_within_their_bounds(packed_copy):
    sizes = _episode_bytes(packed_copy)
    video = [e.byte_range[1] for e in PackedDataset(str(packed_copy)).index.episodes]
    budget = max(video)  # room for the largest episode alone, not for two large ones

    def run(prefetch_bytes):
        dataset = PackedDataset(
            str(packed_copy), seed=1, episode_pool_size=2, prefetch_episodes=3, prefetch_bytes=prefetch_bytes, return_uint8=True
        )
        seen = [i for batch in torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2) for i in batch["index"].tolist()]
        assert sorted(seen) == list(range(TOTAL))
        return dataset.stats()

    stats = run(budget)
    assert stats["max_open_episodes"] <= 2, "pool held more episodes than episode_pool_size"
    assert stats["max_open_bytes"] <= sum(sorted(sizes)[-2:]), "open bytes exceed the two largest episodes"
    assert stats["max_prefetched_bytes"] <= budget, "prefetch ran past its byte budget"
    assert stats["episodes_admitted"] >= 9
    assert run(None)["max_prefetched_bytes"] > budget  # without a budget three episodes run ahead


def test_a_fetch_that_crashes_in_a_worker_names_the_episode(packed_copy, monkeypatch):
    real_fetch = EpisodeFetcher.fetch

    def fetch(self, episode):
        if self.catalog.episode_index[episode] == 7:
            raise MemoryError("simulated")
        return real_fetch(self, episode)

    monkeypatch.setattr(EpisodeFetcher, "fetch", fetch)  # inherited by the forked workers
    dataset = PackedDataset(str(packed_copy), seed=0, return_uint8=True)
    with hang_guard(120, "a failed background fetch"):
        with pytest.raises(PrefetchError, match=r"shard-\d{6} episode 7: background fetch failed \(MemoryError: simulated\)"):
            list(torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2))


def _corrupt_member_keep_digest(src, dst, episode: int, camera: str) -> None:
    """Overwrite one member with noise and re-seal the pack: only decoding can tell."""
    shutil.copytree(src, dst)
    size = next(r for r in episodes_index(dst) if r["episode_index"] == episode)[video_column(camera, "size")]
    replace_member(dst, episode, camera, random.Random(episode).randbytes(size))


@pytest.mark.parametrize("decoder,decode_threads", [("torchcodec", 1), ("pyav", 1), ("torchcodec", 2)])
def test_decoder_errors_name_shard_episode_and_camera(packed_copy, tmp_path, decoder, decode_threads):
    dst = tmp_path / "corrupt"
    _corrupt_member_keep_digest(packed_copy, dst, episode=2, camera=TOP)
    dataset = PackedDataset(str(dst), episodes=[2], decoder=decoder, shuffle=False, decode_threads=decode_threads)
    # Refused by the mp4 box check (lerobot_shards/core/format/mp4.py) or by the decoder, whichever the
    # damaged bytes reach first: either way the error names shard, episode and camera.
    with pytest.raises(
        (DecodeError, FormatError), match=rf"shard-\d{{6}} episode 2 camera {TOP}: (cannot (open video|decode frames)|mp4 )"
    ):
        next(iter(dataset))


# -- stats -----------------------------------------------------------------------------------
def test_stats_add_up_over_workers_and_epochs(packed_copy):
    dataset = PackedDataset(str(packed_copy), seed=3, episode_pool_size=3, return_uint8=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=16, num_workers=2)
    for epoch in range(2):
        dataset.set_epoch(epoch)
        assert sum(len(b["index"]) for b in loader) == TOTAL
    stats = dataset.stats()
    assert stats["samples"] == 2 * TOTAL
    assert stats["frames_decoded"] == 2 * 2 * TOTAL  # two cameras, one frame each
    assert stats["decoder_hits"] + stats["decoder_misses"] == stats["frames_decoded"]
    assert stats["episodes_admitted"] >= 2 * 9 and stats["bytes_fetched"] > 0
    assert stats["decode_seconds"] > 0 and stats["fetch_seconds"] > 0
    assert stats["decoder_backend"] in ("torchcodec", "pyav")
    list(dataset)  # the main process publishes into its own slot
    assert dataset.stats()["samples"] == 3 * TOTAL
    dataset.reset_stats()
    assert dataset.stats()["samples"] == 0


def test_stats_reach_the_parent_from_spawned_workers(packed_copy):
    dataset = PackedDataset(str(packed_copy), seed=3, return_uint8=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, num_workers=1, multiprocessing_context="spawn")
    assert sum(len(b["index"]) for b in loader) == TOTAL
    assert dataset.stats()["samples"] == TOTAL
