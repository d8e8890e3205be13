"""The decode ceiling: what the CPU decoder alone delivers for a benchmark's samples.

Same decoder (torchcodec, one FFmpeg thread per decoder), same member bytes, the frames of the
same kind of anchors (random, a window's frames per camera), no DataLoader, no tabular work,
one process per core the reader under test uses; a decoder is opened once per (episode,
camera) and kept, as the reader's episode pool does. Given the frames a loader delivered (its
measured samples' ``episode_index`` and ``frame_index``), it decodes exactly those, in order.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from pathlib import Path

import torch


def _ceiling_worker(packed: str, delta, samples: list[tuple[int, int]], queue) -> None:
    """Decode exactly the frames ``samples`` (``(episode_index, frame_index)`` each) need, in
    that order, from the same member bytes with the same decoder."""
    from lerobot_shards.core.pack import PackedIndex
    from lerobot_shards.core.storage import Storage
    from lerobot_shards.core.windows import query_frames, resolve_delta_timestamps
    from lerobot_shards.reader.decode import CpuDecoders

    storage = Storage(packed)
    index = PackedIndex(storage)
    offsets = resolve_delta_timestamps(delta, index.manifest.fps) if delta else {}
    stage = CpuDecoders("auto")
    position_of = {int(episode): position for position, episode in enumerate(index.episodes.episode_index)}
    torch.set_num_threads(1)
    tars: dict[int, bytes] = {}
    entries: dict[int, object] = {}
    decoders: dict[tuple[int, str], object] = {}
    for episode, _ in samples:  # open every decoder first: the ceiling times decoding alone
        position = position_of[episode]
        if position in entries:
            continue
        entry = entries[position] = index.episodes[position]
        for key, member in entry.cameras.items():
            if entry.shard not in tars:
                tars[entry.shard] = (Path(packed) / "shards" / f"shard-{entry.shard:06d}.tar").read_bytes()
            decoders[(position, key)] = stage.open(tars[entry.shard][member.offset : member.offset + member.size], where=key)
    frames = 0
    started = time.perf_counter()
    for episode, frame in samples:
        position = position_of[episode]
        entry = entries[position]
        for key in entry.cameras:
            wanted = query_frames(frame, entry.length, offsets[key])[0].tolist() if key in offsets else [frame]
            frames += len(stage.decode(decoders[(position, key)], wanted, where=key))
    queue.put((len(samples), frames, time.perf_counter() - started))


def random_samples(packed: Path, samples: int, seed: int) -> list[tuple[int, int]]:
    """``samples`` anchors drawn without replacement (seeded), as ``(episode_index, frame_index)``."""
    from lerobot_shards.core.pack import PackedIndex
    from lerobot_shards.core.storage import Storage

    episodes = PackedIndex(Storage(str(packed))).episodes
    every = [(int(e), j) for e, length in zip(episodes.episode_index, episodes.length) for j in range(int(length))]
    random.Random(seed).shuffle(every)
    return every[:samples]


def decode_ceiling(
    packed: Path, delta, samples: int, workers: int, seed: int, *, frames: list[tuple[int, int]] | None = None
) -> dict:
    """The ceiling's throughput on ``frames`` (``(episode_index, frame_index)`` per sample, in
    the order a loader under test delivered them: the same frames, decoded in the same order),
    or on ``samples`` anchors drawn at random (seeded) when no ``frames`` are given. Samples are
    dealt to ``workers`` processes in turn."""
    chosen = list(frames) if frames is not None else random_samples(packed, samples, seed)
    # spawn: forking a process that runs threads (prefetch, s3fs, RSS sampler) can deadlock.
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    shares = [chosen[i::workers] for i in range(workers)]
    processes = [context.Process(target=_ceiling_worker, args=(str(packed), delta, s, queue)) for s in shares]
    started = time.perf_counter()
    for process in processes:
        process.start()
    results = [queue.get() for _ in processes]
    for process in processes:
        process.join()
    wall = time.perf_counter() - started
    slowest = max(seconds for _, _, seconds in results)
    return {
        "samples_per_s": sum(n for n, _, _ in results) / slowest,
        "frames_per_s": sum(f for _, f, _ in results) / slowest,
        "processes": workers,
        "samples": len(chosen),
        "seconds": slowest,
        "wall_s": wall,
        "same_frames": frames is not None,
    }
