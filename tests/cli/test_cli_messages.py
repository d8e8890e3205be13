"""A CLI and API that explain themselves (issue 15): each misleading case a newcomer hit gets
a message that says what is wrong and what to do, and the pack summary tells the truth."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from lerobot_shards import PackedDataset
from lerobot_shards.cli import main as cli
from lerobot_shards.core.errors import FormatError, WindowError
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "src"
    write_sample_dataset(
        root, SampleSpec(episodes=2, lengths=(4, 5), cameras=(CameraSpec("observation.images.top", 32, 48),), seed=1)
    )
    return root


@pytest.mark.parametrize(
    "args, message",
    [
        (["--repo-id", "org/name"], "not both"),
        (["--workers", "0"], "'--workers': 0 is not in the range x>=1"),
        (["--video", "h264", "--crf", "99"], "'--crf': 99 is not in the range 0<=x<=51"),
        (["--crf", "20"], "--crf and --preset apply to re-encodes"),
        (["--gop", "0"], "'--gop': 0 is not in the range x>=1"),
        (["--shard-size-mb", "0"], "'--shard-size-mb'"),
    ],
)
def test_pack_refuses_contradictory_or_out_of_range_options(source, tmp_path, args, message):
    result = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "out"), *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "out").exists()


def test_pack_summary_counts_truthfully(source, tmp_path):
    first = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "out")])
    assert first.exit_code == 0, first.output
    assert "into 1 shard (1 written, 0 already done); read " in first.output and "1 shards" not in first.output
    again = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "out")])
    assert "(0 written, 1 already done); nothing left to pack" in again.output and "/s" not in again.output
    h264 = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "h264"), "--video", "h264"])
    assert "re-encoded 2 of 2 episodes (--video h264)" in h264.output, h264.output
    # Issue 24 row 4: info and the episodes view say the same as pack.
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "h264")], terminal_width=200)
    assert "0 / 0 / 2 of 2 episodes" in info.output, info.output
    sql = CliRunner().invoke(
        cli,
        [
            "sql",
            str(tmp_path / "h264"),
            'SELECT count(*) AS n FROM episodes WHERE "video/observation.images.top/reencoded"',
            "--format",
            "csv",
        ],
    )
    assert sql.exit_code == 0 and sql.output.strip().splitlines()[-1] == "2", sql.output
    copy = CliRunner().invoke(cli, ["info", str(tmp_path / "out")], terminal_width=200)
    assert "0 / 0 / 0 of 2 episodes" in copy.output, copy.output
    assert "kept the source video of all 2 episodes (copy mode)" in first.output  # was "re-encoded 0 of 2", read as a failure


def test_every_option_of_every_command_has_help():
    import click

    def commands(group, prefix):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, [*prefix, name])
            else:
                yield [*prefix, name], command

    undocumented = [
        f"{' '.join(path)} {p.opts[0]}"
        for path, command in commands(cli, [])
        for p in command.params
        if isinstance(p, click.Option) and not p.help
    ]
    assert not undocumented, undocumented
    assert "Re-encode quality" in CliRunner().invoke(cli, ["pack", "--help"]).output


def test_reader_explains_a_mixture_file_a_file_and_a_missing_root(tmp_path):
    (tmp_path / "mixture.json").write_text(json.dumps({"datasets": []}))
    with pytest.raises(
        FormatError, match="is a mixture file, not a packed dataset: .*mixture report.*open it with lerobot_shards.MixtureDataset"
    ):
        PackedDataset(str(tmp_path / "mixture.json"))
    with pytest.raises(FormatError, match="holds a mixture.json"):
        PackedDataset(str(tmp_path))
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(FormatError, match="is a file"):
        PackedDataset(str(tmp_path / "plain.txt"))
    with pytest.raises(FormatError, match="no such directory"):
        PackedDataset(str(tmp_path / "absent"))


def test_delta_timestamps_that_are_not_lists_of_seconds_are_refused_clearly(source, tmp_path):
    result = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "p")])
    assert result.exit_code == 0, result.output
    with pytest.raises(WindowError, match=r"must be a list of seconds .* got float 0.1"):
        PackedDataset(str(tmp_path / "p"), delta_timestamps={"action": 0.1})
    with pytest.raises(WindowError, match="must hold numbers"):
        PackedDataset(str(tmp_path / "p"), delta_timestamps={"action": ["soon"]})


def test_pack_logs_progress_lines_when_output_is_not_a_terminal(source, tmp_path, monkeypatch):
    monkeypatch.setenv("LEROBOT_SHARDS_PROGRESS_S", "0")  # a line per episode: counted, not timed
    result = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    text = result.stderr if hasattr(result, "stderr") else result.output
    lines = [line for line in text.splitlines() if line.startswith("[pack] ")]
    assert lines[0].startswith("[pack] 1/2 episodes (50%)") and lines[-1].startswith("[pack] 2/2 episodes (100%)"), lines
    assert "MB in" in lines[-1]


def test_progress_line_rate_and_eta_come_from_this_runs_episodes():
    from lerobot_shards.cli import progress_line

    assert progress_line(30, 40, 20_000_000, 10.0, started_done=20) == "30/40 episodes (75%), 20.0 MB in, 2.0 MB/s, ETA 0:00:10"
    assert progress_line(20, 40, 0, 5.0, started_done=20) == "20/40 episodes (50%), 0.0 MB in"
    assert progress_line(1, 4000, 1, 3600.0).endswith("ETA 3999:00:00")


def test_bench_help_lists_each_benchmarks_options(tmp_path, monkeypatch):
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)  # not the checkout: the benchmarks come from the installed package
    for which, option in (([], "--max-batches"), (["real"], "--source")):
        shown = subprocess.run(
            [sys.executable, "-m", "lerobot_shards.cli", "bench", *which, "--help"], capture_output=True, text=True, timeout=120
        )
        assert shown.returncode == 0 and option in shown.stdout, shown.stdout[-500:] + shown.stderr[-500:]


def test_verify_logs_progress_per_shard(source, tmp_path, monkeypatch):
    monkeypatch.setenv("LEROBOT_SHARDS_PROGRESS_S", "0")
    packed = tmp_path / "p"
    assert CliRunner().invoke(cli, ["pack", str(source), str(packed), "--shard-size-mb", "0.002"]).exit_code == 0
    shards = len(list((packed / "shards").glob("*.tar")))
    result = CliRunner().invoke(cli, ["verify", str(packed)])
    assert result.exit_code == 0, result.output
    text = result.stderr if hasattr(result, "stderr") else result.output
    lines = [line for line in text.splitlines() if line.startswith("[verify] ")]
    assert len(lines) == shards and lines[-1].startswith(f"[verify] {shards}/{shards} shards (100%), 2 episodes checked"), lines


def test_finalize_logs_progress_per_shard(source, tmp_path, monkeypatch):
    monkeypatch.setenv("LEROBOT_SHARDS_PROGRESS_S", "0")
    packed = tmp_path / "p"
    for part in ("0/2", "1/2"):
        assert (
            CliRunner().invoke(cli, ["pack", str(source), str(packed), "--shard-size-mb", "0.002", "--part", part]).exit_code == 0
        )
    shards = len(list((packed / "shards").glob("*.tar")))
    result = CliRunner().invoke(cli, ["finalize", str(packed)])
    assert result.exit_code == 0, result.output
    text = result.stderr if hasattr(result, "stderr") else result.output
    lines = [line for line in text.splitlines() if line.startswith("[finalize] ")]
    assert len(lines) == shards >= 2 and lines[-1].startswith(f"[finalize] {shards}/{shards} shards (100%)"), lines


def test_make_sample_logs_progress_lines(tmp_path, monkeypatch):
    monkeypatch.setenv("LEROBOT_SHARDS_PROGRESS_S", "0")
    result = CliRunner().invoke(
        cli, ["make-sample", str(tmp_path / "s"), "--episodes", "3", "--min-length", "2", "--max-length", "3"]
    )
    assert result.exit_code == 0, result.output
    text = result.stderr if hasattr(result, "stderr") else result.output
    lines = [line for line in text.splitlines() if line.startswith("[make-sample] ")]
    assert [line.split(" (")[0] for line in lines] == [
        "[make-sample] 1/3 episodes",
        "[make-sample] 2/3 episodes",
        "[make-sample] 3/3 episodes",
    ]
