"""What the next new user hit (issue 68): each row reproduced as it was met, its output and exit
code asserted, and each piece of advice run as printed."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from click.testing import CliRunner

from lerobot_shards.cli import main as cli
from tests.packed_fixtures import *

ROOT = Path(__file__).resolve().parents[2]
TOP, WRIST = "observation.images.top", "observation.images.wrist"


def _run(*args: str, ok: bool = True):
    result = CliRunner().invoke(cli, list(args))
    if ok:
        assert result.exit_code == 0, result.output
    return result


def _advised(text: str, command: str) -> list[str]:
    """The first `lerobot-shards <command> ...` a message advises, as argv (after the program)."""
    found = re.search(rf"`lerobot-shards ({command}[^`]*)`", text)
    assert found, text
    return shlex.split(found.group(1))


# -- row 1: NVDEC advice keeps the user's options and sizes every camera, in one command ---------
def test_1_nvdec_advice_is_one_command_with_the_users_options(sample_source, tmp_path):
    packed = tmp_path / "hv"
    _run("pack", str(sample_source), str(packed), "--video", "hevc", "--crf", "30", "--resize", f"{TOP}=144x192")
    info = _run("info", str(packed)).output
    advised = _advised(info, "pack")
    assert advised.count("--resize") == 2 and f"{TOP}=144x192" in advised and f"{WRIST}=144x144" in advised, info
    assert advised[advised.index("--crf") + 1] == "30", info  # the user's own option kept
    assert advised[1] == "SRC" and "a local folder named" in info  # a local source is recorded by its name only
    advised[1] = str(sample_source)
    _run(*advised)  # as printed, SRC given
    refusals = json.loads(_run("info", advised[2], "--format", "json").output)["nvdec_refusals"]
    assert refusals == {}, refusals  # following it brings no camera's warning back
    # check's advice keeps --gop (and every other option given).
    checked = _run("check", str(sample_source), "--video", "h264", "--gop", "1").output
    again = _advised(checked, "check")
    assert again[again.index("--gop") + 1] == "1" and again.count("--resize") == 1, checked
    assert "NVDEC" not in _run(*again).output


# -- row 2: preview counts a task's rows, not the whole length of every episode listing it --------
def test_2_preview_counts_frames_per_task_by_row(packed_copy, tmp_path):
    page = tmp_path / "p.html"
    _run("preview", str(packed_copy), "-o", str(page), "--episodes", "1", "--frames", "1")
    table = page.read_text().split("<th>task</th><th>episodes</th><th>frames</th></tr>", 1)[1].split("</table>", 1)[0]
    shown = {task: int(frames) for task, _, frames in re.findall(r"<tr><td>(.*?)</td><td>(\d+)</td><td>(\d+)</td></tr>", table)}
    counted = _run(
        "sql",
        str(packed_copy),
        "SELECT t.task, count(*) AS n FROM frames f JOIN tasks t USING (task_index) GROUP BY 1",
        "--format",
        "json",
    )
    expected = {row["task"]: row["n"] for row in json.loads(counted.output)}
    assert shown == expected, (shown, expected)
    assert sum(shown.values()) == json.loads(_run("info", str(packed_copy), "--format", "json").output)["totals"]["frames"]


# -- row 6: an unpacked LeRobot dataset and a mixture, given where a pack is wanted ---------------
def test_6_a_lerobot_dataset_or_a_mixture_where_a_pack_is_wanted_says_what_works(sample_source, tmp_path, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(sample_source, tmp_path / "ds")
    told = _run("info", "ds", ok=False)
    assert told.exit_code == 1 and "ds is a LeRobot dataset, not a pack" in told.output, told.output
    advised = _advised(told.output, "pack")
    assert advised == ["pack", "ds", "ds-packed"], told.output
    _run(*advised)  # as printed
    assert "episodes / frames" in _run("info", "ds-packed").output
    # A mixture: the command that describes it, and the packs info/sql/preview take.
    shutil.copytree(tmp_path / "ds-packed", tmp_path / "mix" / "a")
    _run("mixture", "create", "mix")
    for command in (["info", "mix"], ["sql", "mix/mixture.json", "SELECT 1"], ["preview", "mix", "-o", "p.html"]):
        said = _run(*command, ok=False)
        assert said.exit_code == 1 and "not a packed dataset" in said.output, said.output
        report = _advised(said.output, "mixture report")
        assert "1 ok, 0 not ok" in _run(*report).output  # as printed


# -- row 8: --gop in copy mode is refused, as --resize is ------------------------------------------
def test_8_gop_in_copy_mode_is_refused_naming_the_flag(sample_source, tmp_path):
    for command in ("pack", "check"):
        args = [command, str(sample_source)] + ([str(tmp_path / "g")] if command == "pack" else []) + ["--gop", "1"]
        refused = _run(*args, ok=False)
        assert refused.exit_code == 1 and "gop 1 needs a re-encode" in refused.output and "(--gop)" in refused.output
    assert not (tmp_path / "g").exists()
    _run("check", str(sample_source), "--gop", "1", "--video", "h264")  # what it says: with a re-encode


# -- row 11: sql runs every statement given, in several arguments too ------------------------------
def test_11_sql_takes_several_statements(packed_copy):
    out = _run("sql", str(packed_copy), "SELECT 41 + 1 AS a", "SELECT 'two' AS b;", "--format", "json").output
    assert [json.loads(line) for line in out.splitlines()] == [[{"a": 42}], [{"b": "two"}]], out


# -- row 13: the README's window in seconds runs on the README's own sample ------------------------
def test_13_the_readmes_window_in_seconds_packs_the_readmes_sample(tmp_path):
    readme = (ROOT / "README.md").read_text()
    window = re.search(r"`--window (chunk='[^`]*')`", readme).group(1)
    sample = re.search(r"lerobot-shards (make-sample /tmp/src [^\n#]*)", readme).group(1)
    _run(*shlex.split(sample.replace("/tmp/src", str(tmp_path / "src"))))
    _run("pack", str(tmp_path / "src"), str(tmp_path / "p"), "--window", *shlex.split(window))


# -- row 12: the LeRobot install resolves with LeRobot, and make parity installs it as written -----
def test_12_the_train_install_resolves_with_lerobot_as_parity_installs_it():
    readme = (ROOT / "README.md").read_text()
    setup = (ROOT / "scripts" / "parity_setup.sh").read_text()
    lines = [line.split("#")[0].strip() for line in readme.splitlines() if line.startswith("lerobot-env/bin/pip install")]
    project = [line for line in lines if "lerobot-shards[" in line]
    assert len(project) == 1 and "'lerobot[dataset]==0.6.1'" in project[0], lines  # one resolve with LeRobot's pins
    for line in lines:  # word for word what make parity installs (scripts/parity_train.py checks it too)
        assert line.split("install", 1)[1].strip().replace("/path/to/lerobot-shards", ".") in setup, line
    assert "dependency conflicts" in setup  # make parity fails on a resolver conflict
    accelerate = re.search(r"'accelerate==([\d.]+)'", readme).group(1)
    assert f"accelerate {accelerate}" in readme and f"accelerate {accelerate}" in (ROOT / "docs" / "LEROBOT_TRAIN.md").read_text()


# -- row 14: info names the format version as docs/FORMAT.md numbers it ---------------------------
def test_14_info_names_the_format_version_and_what_readers_read(packed_copy):
    from lerobot_shards.core.format import SUPPORTED_FORMAT_VERSIONS

    line = [row for row in _run("info", str(packed_copy)).output.splitlines() if "format" in row][0]
    manifest = json.loads((packed_copy / "manifest.json").read_text())
    assert f"format version {manifest['format_version']}" in line, line
    newest = max(SUPPORTED_FORMAT_VERSIONS)
    assert f"version {newest}" in (ROOT / "docs" / "FORMAT.md").read_text().splitlines()[0]
    assert f"readers read 2 to {newest}" in (ROOT / "README.md").read_text().replace("\n", " ")
