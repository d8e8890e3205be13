"""Reading options are one value (``ReadOptions``): both datasets take it whole or its fields as
keywords, it reaches the consumer unchanged, its fields are the signature both datasets show
and the ``--shards.*`` flags of ``lerobot-shards train``; each option is written once."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from lerobot_shards import MixtureDataset, PackedDataset, ReadOptions, RetryPolicy
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.train.lerobot_train import TRAINER_SETS, ShardsOptions, known_flags
from tests.packed_fixtures import *


def test_both_datasets_show_every_read_option_with_its_default():
    fields = {f.name: f for f in dataclasses.fields(ReadOptions)}
    defaults = ReadOptions()
    for cls in (PackedDataset, MixtureDataset):
        parameters = inspect.signature(cls).parameters
        for name in fields:
            assert name in parameters, f"{cls.__name__} does not show {name}"
            assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
            assert parameters[name].default == getattr(defaults, name), name
        assert "options" in parameters and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    # The help is written once, on the field, and the class docstring is made from it.
    for name in fields:
        assert f"{name} (default" in ReadOptions.__doc__


def test_keywords_and_the_value_read_the_same_and_keywords_win(packed_copy):
    given = ReadOptions(seed=3, return_uint8=True, episode_pool_size=2)
    by_value = PackedDataset(str(packed_copy), options=given)
    by_keywords = PackedDataset(str(packed_copy), seed=3, return_uint8=True, episode_pool_size=2)
    assert by_value.options == by_keywords.options == given
    assert [s["index"].item() for s in by_value] == [s["index"].item() for s in by_keywords]
    assert PackedDataset(str(packed_copy), options=given, seed=4).options == dataclasses.replace(given, seed=4)
    # The value travels whole to what the consumer reads.
    assert by_value._view().options is by_value.options


def test_unknown_and_bad_options_are_refused_by_name(packed_copy):
    with pytest.raises(
        ArgumentError, match=r"PackedDataset got an unexpected option 'prefetch_episode'; did you mean 'prefetch_episodes'"
    ):
        PackedDataset(str(packed_copy), prefetch_episode=2)
    with pytest.raises(ArgumentError, match=r"MixtureDataset got an unexpected option 'sed'; did you mean 'seed'"):
        MixtureDataset([str(packed_copy)], sed=2)
    with pytest.raises(ArgumentError, match="options must be a ReadOptions, got dict"):
        PackedDataset(str(packed_copy), options={"seed": 1})
    for bad, message in [
        (dict(episode_pool_size=0), "episode_pool_size must be >= 1"),
        (dict(prefetch_episodes=-1), "prefetch_episodes must be >= 0"),
        (dict(fetch_threads=0), "fetch_threads must be >= 1"),
        (dict(decode_threads=0), "decode_threads must be None or >= 1, got 0"),
        (dict(prefetch_bytes=-1), "prefetch_bytes must be None or >= 0, got -1"),
        (dict(depth_unit="cm"), "depth_unit must be one of 'mm', 'm', got 'cm'"),
        (dict(decoder="ffmpeg"), "decoder must be one of 'auto', 'pyav', 'torchcodec', got 'ffmpeg'"),
        (dict(decoder="nvdec"), "decoder must be one of"),  # a CUDA row: a DecodeStage backend, not a worker decoder
        (dict(decode_device="cpu", image_transforms=lambda x: x), "image_transforms run on decoded frames"),
        (dict(retry=3), "retry must be a RetryPolicy"),
    ]:
        with pytest.raises(ArgumentError, match=message):
            ReadOptions(**bad)
        with pytest.raises(ArgumentError, match=message):  # before anything is read
            PackedDataset("/nonexistent", **bad)
    assert ReadOptions(retry=RetryPolicy(max_attempts=2)).retry.max_attempts == 2


def test_the_trainers_flags_are_the_read_options_it_does_not_set_itself():
    flags = known_flags()
    for field in dataclasses.fields(ReadOptions):
        spec = field.metadata["option"]
        if spec.flag is None:  # a Python object (callable, policy, rank): no flag
            assert field.name not in flags
        else:
            assert (field.name in flags) != (field.name in TRAINER_SETS), field.name
    assert set(flags) - {f.name for f in dataclasses.fields(ReadOptions)} == {
        "log_samples",
        "allow_untested_lerobot",
        "mixed_rates",
        "order",
    }
    options = ShardsOptions.from_flags({"cache_limit_gb": 2.5, "shuffle": False, "log_samples": "x"})
    assert options.read_options(seed=5) == ReadOptions(cache_limit_gb=2.5, shuffle=False, seed=5)
    assert ShardsOptions.from_flags(options.flags()) == options  # what a checkpoint records reads back the same
    with pytest.raises(ArgumentError, match="episode_pool_size must be >= 1"):
        ShardsOptions.from_flags({"episode_pool_size": 0})


def test_an_empty_trainer_flag_is_unset_for_optional_options_and_refused_for_others():
    from lerobot_shards.train.lerobot_train import split_args

    given, _ = split_args(["--shards.decode_device=", "--shards.manifest_sha256=none", "--shards.storage_options="])
    assert given == {"decode_device": None, "manifest_sha256": None, "storage_options": None}
    assert ShardsOptions.from_flags(given).read_options().decode_device is None  # decoded in the workers, as before
    with pytest.raises(ArgumentError, match=r"--shards.episode_pool_size='': not a valid value \(needs a value\)"):
        split_args(["--shards.episode_pool_size="])
    with pytest.raises(ArgumentError, match="decode_device must be None"):
        ReadOptions(decode_device="")
