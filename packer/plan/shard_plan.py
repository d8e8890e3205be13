"""The shard plan: which episodes go to which shard, and which shards a ``--part`` packs.

Pure arithmetic over episode indices and size estimates (no I/O), so every SLURM array task
computes the same plan from the same source and options.
"""

from __future__ import annotations

from collections.abc import Sequence

from packer.errors import ShardPlanError


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
        raise ShardPlanError(
            f"{len(episode_indices)} episodes but {len(estimated_bytes)} size estimates"
        )
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


def parse_part(text: str) -> tuple[int, int]:
    """Parse ``I/N`` (0 <= I < N) as used by ``--part``.

    Raises:
        ShardPlanError: not of the form ``I/N`` or out of range.
    """
    try:
        index_text, count_text = text.split("/")
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise ShardPlanError(f"--part must look like I/N (e.g. 0/4), got {text!r}") from None
    if count < 1 or not 0 <= index < count:
        raise ShardPlanError(f"--part {text!r}: need 0 <= I < N and N >= 1")
    return index, count


def shards_of_part(num_shards: int, part_index: int, num_parts: int) -> list[int]:
    """Return the shard numbers part ``part_index`` of ``num_parts`` packs.

    Shards are dealt round-robin (shard i goes to part i mod N): neighbouring shards have
    similar sizes, so round-robin balances the parts without any size information. A part
    may get no shard when there are more parts than shards.
    """
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ShardPlanError(f"part {part_index}/{num_parts} is out of range")
    return list(range(part_index, num_shards, num_parts))


def parse_episode_ranges(text: str) -> list[int]:
    """Parse ``0,3,10-20`` (inclusive ranges) into sorted unique episode indices.

    Raises:
        ShardPlanError: malformed items, negative numbers or reversed ranges.
    """
    episodes: set[int] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            low_text, _, high_text = item.partition("-")
            low, high = int(low_text), int(high_text or low_text)
        except ValueError:
            raise ShardPlanError(f"--episodes: cannot parse {item!r}; expected e.g. 0,3,10-20") from None
        if low > high:
            raise ShardPlanError(f"--episodes: reversed episode range {item!r}")
        episodes.update(range(low, high + 1))
    if any(e < 0 for e in episodes):
        raise ShardPlanError("--episodes: episode indices must be >= 0")
    if not episodes:
        raise ShardPlanError(f"--episodes {text!r} selects no episode")
    return sorted(episodes)
