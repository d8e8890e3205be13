"""One error hierarchy by layer (issue 33): every error of the project is a LeRobotShardsError,
every error of packing a PackError, every decode failure a DecodeError; the builtin bases
callers already catch (ValueError, OSError, ...) are kept."""

from __future__ import annotations

import inspect

import lerobot_shards.core.errors
import lerobot_shards.packer.errors
from lerobot_shards.core.errors import DecodeError, DecodeStageError, LeRobotShardsError
from lerobot_shards.packer.errors import PackError, ShardPlanError, SourceError, VideoCutError


def _errors(module) -> list[type]:
    return [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, BaseException) and c.__module__ == module.__name__
    ]


def test_every_error_of_the_project_is_in_one_hierarchy():
    for error in _errors(lerobot_shards.core.errors) + _errors(lerobot_shards.packer.errors):
        if issubclass(error, Warning):
            continue
        assert issubclass(error, LeRobotShardsError), error


def test_errors_of_packing_are_pack_errors_and_keep_their_builtin_bases():
    for error in (SourceError, VideoCutError, ShardPlanError):
        assert issubclass(error, PackError) and issubclass(error, ValueError), error
    assert issubclass(DecodeStageError, DecodeError) and issubclass(DecodeStageError, RuntimeError)


def test_bad_arguments_are_argument_errors_in_both_packages(tmp_path):
    import pytest

    from lerobot_shards import PackedDataset
    from lerobot_shards.core.errors import ArgumentError
    from lerobot_shards.core.storage import RetryPolicy
    from lerobot_shards.packer.errors import OptionsError

    assert issubclass(OptionsError, ArgumentError) and issubclass(OptionsError, PackError)
    with pytest.raises(ArgumentError, match="max_attempts must be >= 1, got 0"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ArgumentError, match="episode_pool_size must be >= 1, got 0"):
        PackedDataset(str(tmp_path), episode_pool_size=0)
