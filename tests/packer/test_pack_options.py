"""Pack options are values (``PackOptions`` shape the pack, ``PackRunOptions`` one run): each
field says its name, type, default, help and flag once; ``pack_dataset``'s keywords and the
``lerobot-shards pack`` flags are made from the fields."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from click.testing import CliRunner

from lerobot_shards import OptionsError, PackOptions, PackRunOptions, pack_dataset
from lerobot_shards.cli import main as cli, parse_pack_args
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.option_fields import option_fields
from lerobot_shards.packer.options import flag_of
from tests.packed_fixtures import *


def test_pack_dataset_shows_every_option_of_both_values():
    parameters = inspect.signature(pack_dataset).parameters
    for cls in (PackOptions, PackRunOptions):
        defaults = cls()
        for field in dataclasses.fields(cls):
            assert parameters[field.name].kind is inspect.Parameter.KEYWORD_ONLY
            assert parameters[field.name].default == getattr(defaults, field.name), field.name
    with pytest.raises(ArgumentError, match=r"pack_dataset got an unexpected option 'shard_size'; did you mean 'shard_size_mb'"):
        pack_dataset("src", "dst", shard_size=4)


def test_every_flag_is_a_field_with_its_help_and_default():
    help_text = CliRunner().invoke(cli, ["pack", "--help"], terminal_width=1000).output
    flagged = [f for cls in (PackOptions, PackRunOptions) for f in option_fields(cls) if f.flag is not None]
    assert {f.name for f in flagged} >= {"video", "episodes", "windows", "window_frames", "workers", "part", "journal"}
    for f in flagged:
        assert f.flag in help_text and f.spec.help.split(";")[0] in " ".join(help_text.split()), f.name
        assert flag_of(f.name) == f.flag
    assert flag_of("windows") == "--window"
    # Parsed flags are exactly the fields' values, ready for pack_dataset.
    given = parse_pack_args(
        [
            "--episodes",
            "3,1-2",
            "--window",
            'chunk={"action": [0, 0.1]}',
            "--part",
            "1/2",
            "--resize",
            "48x64",
            "--video",
            "h264",
            "--storage-options",
            '{"anon": true}',
            "--follow-symlinks",
        ]
    )
    assert set(given) == {f.name for f in flagged}
    options = PackOptions(**{k: v for k, v in given.items() if k in {f.name for f in dataclasses.fields(PackOptions)}})
    run = PackRunOptions(**{k: v for k, v in given.items() if k in {f.name for f in dataclasses.fields(PackRunOptions)}})
    assert options.episodes == (1, 2, 3) and options.windows == {"chunk": {"action": [0, 0.1]}} and options.resize == (48, 64)
    assert run.part == (1, 2) and run.storage_options == {"anon": True} and run.follow_symlinks and run.workers == 1
    assert PackOptions() == PackOptions(**{k: v for k, v in parse_pack_args([]).items() if k in options.__dataclass_fields__})


def test_bad_flags_name_the_flag():
    for args, message in [
        (["--episodes", "5-2"], "--episodes: reversed episode range"),
        (["--part", "2/2"], "--part '2/2': need 0 <= I < N"),
        (["--resize", "big"], "Invalid value for --resize: expected HxW"),
        (["--window", "chunk"], "Invalid value for --window: expected NAME=JSON"),
        (["--window-frames", 'c={"action": [0.5]}'], "Invalid value for --window-frames: c: frame offsets must be integers"),
        (["--storage-options", "[1]"], "Invalid value for --storage-options: must be a JSON object"),
    ]:
        result = CliRunner().invoke(cli, ["pack", "src", "dst", *args])
        assert result.exit_code == 2 and message in result.output, (args, result.output)


def test_values_have_one_normal_form_and_are_checked():
    assert PackOptions(episodes=[3, 1, 3], resize=[48, 64], video="h264") == PackOptions(
        episodes=(1, 3), resize=(48, 64), video="h264"
    )
    with pytest.raises(OptionsError, match="workers must be >= 1, got 0") as caught:
        PackRunOptions(workers=0)
    assert caught.value.option == "workers"
    with pytest.raises(OptionsError, match="tolerance_s must be >= 0, got -1"):
        PackOptions(tolerance_s=-1)


def test_values_and_keywords_pack_the_same(sample_source, tmp_path):
    by_keywords = pack_dataset(
        str(sample_source),
        str(tmp_path / "a"),
        episodes=[0, 2],
        windows={"chunk": {"action": [0.0]}},
        shard_size_mb=0.001,
        workers=1,
    )
    by_value = pack_dataset(
        str(sample_source),
        str(tmp_path / "b"),
        options=PackOptions(episodes=(2, 0), windows={"chunk": {"action": [0.0]}}, shard_size_mb=0.001),
        run=PackRunOptions(workers=1),
    )
    assert by_keywords.episodes == by_value.episodes == 2
    plans = [json.loads((tmp_path / name / "pack-plan.json").read_text()) for name in "ab"]
    assert (
        plans[0]["options"]
        == plans[1]["options"]
        == PackOptions(episodes=(0, 2), windows={"chunk": {"action": [0.0]}}, shard_size_mb=0.001).to_json_dict()
    )


def test_an_empty_flag_value_means_not_given():
    """Scripts pass "$VAR" for an unset option (slurm/submit_mixture.sh does): an empty value is
    the default, as before the flags were made from the fields."""
    empty = parse_pack_args(
        ["--episodes", "", "--resize", "", "--part", "", "--storage-options", "", "--src-storage-options", ""]
    )
    assert empty == parse_pack_args([])
