"""Where this process sits in a training job, read from its environment.

``detect_world`` is the only place in the reader that reads torch.distributed, the
``RANK``/``WORLD_SIZE`` environment variables and the DataLoader's worker info; the planning
it feeds (``lerobot_shards.reader.plan.world.World``) is plain arithmetic.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import torch.distributed as dist
import torch.utils.data

from lerobot_shards.core.address_space import usable_cores
from lerobot_shards.core.errors import PlanError
from lerobot_shards.reader.plan.world import World


def detect_world(rank: int | None = None, world_size: int | None = None) -> World:
    """Build the ``World`` of the calling process.

    ``rank`` and ``world_size`` are each resolved from the first source that has them:
    the explicit argument, then torch.distributed when it is available and
    initialized, then the ``RANK`` / ``WORLD_SIZE`` environment variables (set by
    torchrun), then 0 / 1. ``worker`` and ``num_workers`` come from
    ``torch.utils.data.get_worker_info()`` (0 / 0 outside a DataLoader worker).

    Returns:
        The detected ``World``.

    Raises:
        PlanError: an environment variable is not an integer, or the resolved values
            are out of range (say ``RANK=3`` with ``world_size=2``).
    """
    dist_rank = dist_world = None
    worker, num_workers = 0, 0
    if dist.is_available() and dist.is_initialized():
        dist_rank, dist_world = dist.get_rank(), dist.get_world_size()
    info = torch.utils.data.get_worker_info()
    if info is not None:
        worker, num_workers = int(info.id), int(info.num_workers)
    if rank is None:
        rank = dist_rank if dist_rank is not None else _env_int("RANK", 0)
    if world_size is None:
        world_size = dist_world if dist_world is not None else _env_int("WORLD_SIZE", 1)
    return World(rank=int(rank), world_size=int(world_size), worker=worker, num_workers=num_workers)


# Below this many pixels per frame (every camera), handing a camera's decode to another thread
# costs more than the decode saves: 1 DataLoader worker on 2 cores, 2 cameras, torchcodec,
# 2 threads against 1 ran 0.87x at 96x128, 0.72x at 224x224, 0.90x at 240x320, and 1.19x at
# 360x480, 1.13x at 480x640 (docs/BENCHMARKS.md, "decode_threads by frame size").
THREADED_MIN_PIXELS = 320 * 360


def decode_threads_for(world: World, frame_sizes: Iterable[tuple[int, int]] = ()) -> int:
    """How many threads a consumer decodes a sample's cameras with when the user did not say:
    the cores this process may run on, divided among the DataLoader workers of this rank and
    the ranks of this node (``LOCAL_WORLD_SIZE``, set by torchrun and accelerate), at least 1;
    and 1 when every camera's frames (``frame_sizes``: (height, width) each) are smaller than
    ``THREADED_MIN_PIXELS``, where the hand-off costs more than it saves.

    A decode releases the GIL, so cameras decode side by side on otherwise idle cores (one
    worker on a many-core node); with a worker per core this is 1 and nothing changes.

    Raises:
        PlanError: ``LOCAL_WORLD_SIZE`` is not an integer.
    """
    cores = usable_cores()
    local_ranks = max(1, _env_int("LOCAL_WORLD_SIZE", 1))
    sizes = list(frame_sizes)
    if sizes and max(height * width for height, width in sizes) < THREADED_MIN_PIXELS:
        return 1
    return max(1, cores // (max(1, world.num_workers) * local_ranks))


def split_threads(threads: int, cameras: int, *, encoded_video: bool = False) -> tuple[int, int]:
    """How a consumer spends its ``threads``: ``(samples built side by side, cameras decoded
    side by side within each)``. Cameras first, as many as a sample has (``cameras``: the most
    any dataset's samples decode), then samples with the threads left: one worker on two cores
    builds two one-camera samples at once (1.3x the samples/s of one at a time, and the first
    batch sooner), and decodes a four-camera sample's cameras two at a time, where two samples
    at once ran no faster and its first batch later (docs/BENCHMARKS.md, "Threads per
    consumer"). Workers that ship compressed members (``encoded_video``) decode none of their
    frames: one sample at a time.
    """
    if encoded_video or threads <= 1:
        return 1, 1
    camera_threads = max(1, min(cameras, threads))
    return max(1, threads // camera_threads), camera_threads


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise PlanError(f"environment variable {name}={raw!r} is not an integer") from None
