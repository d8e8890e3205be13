"""The shard plan: which episodes go to which shard, and which shards a ``--part`` packs.

Pure arithmetic over episode indices and size estimates (no I/O), so every SLURM array task
computes the same plan from the same source and options.
"""

from __future__ import annotations

from collections.abc import Sequence

from lerobot_shards.packer.errors import ShardPlanError


def plan_shards(episode_indices: Sequence[int], estimated_bytes: Sequence[int], target_bytes: int) -> list[list[int]]:
    """Group episodes, in the given (ascending) order, into consecutive shards.

    A shard is closed when adding the next episode would push its estimated size over
    ``target_bytes``; an episode larger than the target gets a shard of its own. Episodes
    are never split.

    Returns:
        One list of episode indices per shard, in shard order.

    Raises:
        ShardPlanError: mismatched lengths, unsorted or duplicate episodes, negative sizes
            or a non-positive target.
    """
    if len(episode_indices) != len(estimated_bytes):
        raise ShardPlanError(f"{len(episode_indices)} episodes but {len(estimated_bytes)} size estimates")
    if target_bytes <= 0:
        raise ShardPlanError(f"target_bytes must be positive, got {target_bytes}")
    if any(b < 0 for b in estimated_bytes):
        raise ShardPlanError("estimated sizes must be >= 0")
    if any(a >= b for a, b in zip(episode_indices, list(episode_indices)[1:])):
        raise ShardPlanError("episode indices must be strictly ascending")
    shards: list[list[int]] = []
    current: list[int] = []
    current_bytes = 0
    for episode, size in zip(episode_indices, estimated_bytes):
        if current and current_bytes + size > target_bytes:
            shards.append(current)
            current, current_bytes = [], 0
        current.append(int(episode))
        current_bytes += int(size)
    if current:
        shards.append(current)
    return shards


def shards_of_part(num_shards: int, part_index: int, num_parts: int) -> list[int]:
    """Return the shard numbers part ``part_index`` of ``num_parts`` packs.

    Shards are dealt round-robin (shard i goes to part i mod N): neighbouring shards have
    similar sizes, so round-robin balances the parts without any size information. A part
    may get no shard when there are more parts than shards.
    """
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ShardPlanError(f"part {part_index}/{num_parts} is out of range")
    return list(range(part_index, num_shards, num_parts))


def shard_size_for(estimated_bytes: Sequence[int], shards: int) -> float | None:
    """The ``--shard-size-mb`` (3 significant digits, as printed) at which ``plan_shards`` makes
    at least ``shards`` shards of these episodes, or None when it cannot (a shard holds whole
    episodes: never more shards than episodes)."""
    if shards > len(estimated_bytes) or shards < 1:
        return None
    episodes = list(range(len(estimated_bytes)))
    size_mb = max(sum(estimated_bytes), 1) / shards / 2**20
    for _ in range(200):  # each try 10% smaller; uneven episodes need a smaller target
        printed = float(f"{size_mb:.3g}")
        if printed > 0 and len(plan_shards(episodes, estimated_bytes, max(1, int(printed * 1024 * 1024)))) >= shards:
            return printed
        size_mb *= 0.9
    return None
