"""The shard plan is pure arithmetic: episodes never split, deterministic parts."""

import pytest

from lerobot_shards import OptionsError, ShardPlanError
from lerobot_shards.packer.options import parse_episode_ranges, parse_part
from lerobot_shards.packer.plan import plan_shards, shards_of_part


def test_consecutive_shards_close_at_the_target():
    shards = plan_shards([0, 1, 2, 3, 4], [40, 40, 40, 40, 40], 100)
    assert shards == [[0, 1], [2, 3], [4]]


def test_an_episode_larger_than_the_target_gets_its_own_shard():
    assert plan_shards([0, 1, 2], [10, 500, 10], 100) == [[0], [1], [2]]


def test_every_episode_exactly_once_in_order():
    episodes = list(range(0, 300, 3))
    sizes = [(e * 7919) % 97 for e in episodes]
    shards = plan_shards(episodes, sizes, 150)
    assert [e for shard in shards for e in shard] == episodes
    for shard in shards[:-1]:
        assert sum(sizes[episodes.index(e)] for e in shard) <= 150 or len(shard) == 1


def test_bad_inputs():
    with pytest.raises(ShardPlanError, match="2 episodes but 1 size estimates"):
        plan_shards([0, 1], [1], 10)
    with pytest.raises(ShardPlanError, match="strictly ascending"):
        plan_shards([1, 0], [1, 1], 10)
    with pytest.raises(ShardPlanError, match="target_bytes must be positive"):
        plan_shards([0], [1], 0)


def test_parts_cover_every_shard_once():
    for num_shards in (0, 1, 5, 7):
        for parts in (1, 2, 3, 8):
            covered = sorted(s for i in range(parts) for s in shards_of_part(num_shards, i, parts))
            assert covered == list(range(num_shards))


def test_parse_part_and_episodes():
    assert parse_part("2/3") == (2, 3)
    with pytest.raises(OptionsError, match="I/N"):
        parse_part("3")
    with pytest.raises(OptionsError, match="0 <= I < N"):
        parse_part("3/3")
    assert parse_episode_ranges("0,3,10-12, 3") == (0, 3, 10, 11, 12)
    with pytest.raises(OptionsError, match="reversed"):
        parse_episode_ranges("5-2")
    with pytest.raises(OptionsError, match="cannot parse"):
        parse_episode_ranges("a,b")
