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
