"""The decode ceiling: what the CPU decoder alone delivers for a benchmark's samples.

Same decoder (torchcodec, one FFmpeg thread per decoder), same member bytes, the frames of the
same kind of anchors (random, a window's frames per camera), no DataLoader, no tabular work,
one process per core the reader under test uses; a decoder is opened once per (episode,
camera) and kept, as the reader's episode pool does.
"""

from __future__ import annotations

import multiprocessing
import random
import time
from pathlib import Path

import torch

from lerobot_shards import PackedDataset


def _ceiling_worker(packed: str, delta, anchors: list[int], queue) -> None:
    """Decode exactly the frames the samples need, from the same member bytes, same decoder."""
    from lerobot_shards.core.pack import PackedIndex
    from lerobot_shards.core.storage import Storage
    from lerobot_shards.core.windows import query_frames, resolve_delta_timestamps
    from lerobot_shards.reader.decode import CpuDecoders

    storage = Storage(packed)
    index = PackedIndex(storage)
    offsets = resolve_delta_timestamps(delta, index.manifest.fps) if delta else {}
    stage = CpuDecoders("auto")
    episode_of_frame = []
    for position, entry in enumerate(index.episodes):
        episode_of_frame += [(position, j) for j in range(entry.length)]
    torch.set_num_threads(1)
    tars: dict[int, bytes] = {}
    decoders: dict[tuple[int, str], object] = {}
    for anchor in anchors:  # open every decoder first: the ceiling times decoding alone
        position, _ = episode_of_frame[anchor]
        entry = index.episodes[position]
        for key, member in entry.cameras.items():
            if (position, key) not in decoders:
                if entry.shard not in tars:
                    tars[entry.shard] = (Path(packed) / "shards" / f"shard-{entry.shard:06d}.tar").read_bytes()
                decoders[(position, key)] = stage.open(tars[entry.shard][member.offset : member.offset + member.size], where=key)
    frames = 0
    started = time.perf_counter()
    for anchor in anchors:
        position, frame = episode_of_frame[anchor]
        entry = index.episodes[position]
        for key in entry.cameras:
            wanted = query_frames(frame, entry.length, offsets[key])[0].tolist() if key in offsets else [frame]
            frames += len(stage.decode(decoders[(position, key)], wanted, where=key))
    queue.put((len(anchors), frames, time.perf_counter() - started))


def decode_ceiling(packed: Path, delta, samples: int, workers: int, seed: int) -> dict:
    total = PackedDataset(str(packed)).num_anchors
    anchors = list(range(total))
    random.Random(seed).shuffle(anchors)
    anchors = anchors[:samples]
    # spawn: forking a process that runs threads (prefetch, s3fs, RSS sampler) can deadlock.
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    shares = [anchors[i::workers] for i in range(workers)]
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
        "wall_s": wall,
    }
