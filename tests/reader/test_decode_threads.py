"""A sample's cameras decoded side by side (issue 32): the same bytes as one after another,
on the threads asked for, sized from the idle cores when the user did not say."""

from __future__ import annotations

import threading

import pytest
import torch

from lerobot_shards import PackedDataset
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.reader.decode import CpuDecoders
from lerobot_shards.reader.plan import World
from lerobot_shards.reader.runtime import decode_threads_for, environment
from tests.packed_fixtures import *

TOP = "observation.images.top"
WINDOW = {TOP: [-0.1, 0.0, 0.1], "action": [0.0, 0.1]}


def _samples(root, **options) -> list[dict]:
    return list(PackedDataset(str(root), seed=5, episode_pool_size=3, delta_timestamps=WINDOW, **options))


def _assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key in x:
            if isinstance(x[key], torch.Tensor):
                assert x[key].dtype == y[key].dtype and torch.equal(x[key], y[key]), key
            else:
                assert x[key] == y[key], key


@pytest.mark.parametrize("uint8", [False, True])
def test_threads_give_the_same_samples_decoding_the_cameras_at_once(packed_copy, monkeypatch, uint8):
    one = _samples(packed_copy, decode_threads=1, return_uint8=uint8)
    # Each decode waits at a barrier for the sample's other camera: with the cameras one after
    # another the first would wait alone and the barrier break; side by side both pass it.
    meeting = threading.Barrier(2, timeout=60)
    seen: set[str] = set()
    real = CpuDecoders.decode

    def decode(decoder, indices, *, where):
        seen.add(threading.current_thread().name)
        meeting.wait()
        return real(decoder, indices, where=where)

    monkeypatch.setattr(CpuDecoders, "decode", staticmethod(decode))
    two = _samples(packed_copy, decode_threads=2, return_uint8=uint8)
    _assert_same(one, two)
    assert not meeting.broken
    # The cameras' decodes ran on the builder's two threads, never on the consumer's own.
    assert seen == {"lerobot-shards-decode_0", "lerobot-shards-decode_1"}, seen


def test_threads_in_a_dataloader_worker_give_the_same_batches(packed_copy):
    def batches(threads):
        dataset = PackedDataset(str(packed_copy), seed=2, return_uint8=True, decode_threads=threads)
        return list(torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2))

    one, two = batches(1), batches(2)
    assert len(one) == len(two)
    for a, b in zip(one, two):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a[TOP], b[TOP])


def test_decode_threads_must_be_positive(packed_copy):
    with pytest.raises(ArgumentError, match="decode_threads must be None"):
        PackedDataset(str(packed_copy), decode_threads=0)


def test_default_threads_share_the_cores_among_workers_and_local_ranks(monkeypatch):
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert decode_threads_for(World(0, 1, num_workers=0)) == 16  # the training process alone
    assert decode_threads_for(World(0, 1, num_workers=4, worker=1)) == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert decode_threads_for(World(0, 1, num_workers=4, worker=1)) == 1  # 32 consumers on 16 cores
    assert decode_threads_for(World(0, 1, num_workers=1)) == 2
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert decode_threads_for(World(0, 1)) == 1


def test_small_frames_keep_one_thread_whatever_the_cores(monkeypatch):
    """Threads only where a camera's decode pays for the hand-off (issue 44): cameras under
    THREADED_MIN_PIXELS (96x96, 224x224, 240x320) decode on the worker's own thread; one large
    camera is enough for threads; no sizes known keeps the core-based count."""
    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    world = World(0, 1, num_workers=4, worker=1)
    assert decode_threads_for(world, [(96, 96), (224, 224)]) == 1
    assert decode_threads_for(world, [(240, 320)] * 4) == 1
    assert decode_threads_for(world, [(96, 96), (480, 640)]) == 4
    assert decode_threads_for(world, [(360, 480)]) == 4
    assert decode_threads_for(world) == 4


def test_the_consumer_picks_threads_by_each_packs_frame_size(packed_copy, monkeypatch):
    """The default reaches each pack's sample builder: the test set's small cameras decode on one
    thread even where the cores would allow more; a user's decode_threads is taken as given."""
    from lerobot_shards.reader.runtime import Consumer, SharedStats, make_sample_builder

    monkeypatch.setattr(environment.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    # (decode_threads, cameras side by side, samples side by side): 3 threads for 2 cameras
    # decode both cameras at once, one sample at a time; 4 build two samples at once.
    for given, cameras, samples in ((None, 1, 1), (3, 2, 1), (4, 2, 2)):
        dataset = PackedDataset(str(packed_copy), seed=2, return_uint8=True, decode_threads=given)
        consumer = Consumer(dataset._view(), stats=SharedStats(), worker=None)
        assert (consumer.builder(0).decode_threads, consumer.sample_threads) == (cameras, samples)
    # A small-frame pack keeps one camera thread where a mixture's split would give two (its
    # large-frame neighbour decides the consumer's threads).
    view = PackedDataset(str(packed_copy), seed=2, return_uint8=True)._view()
    assert make_sample_builder(view, 0, World(0, 1), camera_threads=2).decode_threads == 1
