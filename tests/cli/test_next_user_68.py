"""What the next new user hit (issue 68): each row reproduced as it was met, its output and exit
code asserted, and each piece of advice run as printed."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from pathlib import Path

import pytest

from tests.cli.commands import advised, run_cli
from tests.packed_fixtures import *
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
TOP, WRIST = "observation.images.top", "observation.images.wrist"


_run, _advised = run_cli, advised


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


def _copy(source: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(source, to)
    return to


# -- row 3: a corpus report says what each pack left out, with counts ---------------------------
def test_3_mixture_report_counts_what_each_pack_left_out(sample_source, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    droid = _copy(sample_source, tmp_path / "droid")
    meta = next((droid / "meta" / "episodes").rglob("*.parquet"))
    episodes = pq.read_table(meta)
    unlisted = 4  # its rows stay in the middle of a data file; meta/episodes no longer lists it
    length = episodes.filter(pa.compute.equal(episodes["episode_index"], unlisted))["length"][0].as_py()
    pq.write_table(episodes.filter(pa.compute.not_equal(episodes["episode_index"], unlisted)), meta)
    (droid / "videos" / "orphan.mp4").write_bytes(b"\0" * 64)  # a file no episode uses
    mix = tmp_path / "mix"
    _run("pack", str(sample_source), str(mix / "clean"))
    _run("pack", str(droid), str(mix / "droid"))
    _run("mixture", "create", str(mix))
    report = _run("mixture", "report", str(mix)).output
    line = next(row for row in report.splitlines() if row.startswith("droid"))
    assert " ok " in line and f"{length} rows not packed" in line and "1 files not packed" in line, report
    assert next(row for row in report.splitlines() if row.startswith("clean")).rstrip().endswith(tuple("0123456789"))
    assert "2 ok, 0 not ok (1 ok without some of their source)" in report, report


# -- row 4: zero-byte videos name the episodes that pack, and the command packs them --------------
def test_4_empty_videos_name_the_episodes_that_pack(tmp_path):
    from lerobot_shards.testing import SampleSpec, write_sample_dataset

    source = tmp_path / "agibot"
    write_sample_dataset(source, SampleSpec(episodes=4, video_files_size_in_mb=1e-6))
    empty = sorted((source / "videos" / TOP).rglob("*.mp4"))[2]
    empty.write_bytes(b"")
    checked = _run("check", str(source), ok=False)
    assert checked.exit_code == 1 and "is empty (0 bytes)" in checked.output and "--episodes 0-1,3" in checked.output
    refused = _run("pack", str(source), str(tmp_path / "p"), "--shard-size-mb", "64", ok=False)
    assert refused.exit_code == 1 and "1 episode cannot be packed: episode 2: camera" in refused.output, refused.output
    advised = _advised(refused.output, "pack")
    assert "--shard-size-mb" in advised and advised[advised.index("--episodes") + 1] == "0-1,3", (
        advised
    )  # the user's options kept
    _run(*advised)  # as printed
    assert json.loads((tmp_path / "p" / "manifest.json").read_text())["totals"]["episodes"] == 3


# -- row 5: a 0-row episode dropped under pad is named; info says what "of N" counts ------------
def test_5_a_dropped_episode_is_named_and_info_counts_what_was_read(sample_source, tmp_path, caplog):
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = _copy(sample_source, tmp_path / "src")
    total = len(pq.read_table(next((source / "meta" / "episodes").rglob("*.parquet"))))
    last = total - 1  # its rows are the last of their data file: removing them moves no other episode's
    for data in (source / "data").rglob("*.parquet"):
        rows = pq.read_table(data)
        pq.write_table(rows.filter(pa.compute.not_equal(rows["episode_index"], last)), data)
    with caplog.at_level(logging.WARNING, logger="lerobot_shards"):
        packed = _run("pack", str(source), str(tmp_path / "p"), "--on-frame-mismatch", "pad", "--workers", "1")
    assert f"dropped 1 (episodes {last}, not in the pack)" in packed.output, packed.output
    assert f"episode {last}:" in caplog.text and "dropped (--on-frame-mismatch pad)" in caplog.text, caplog.text
    info = _run("info", str(tmp_path / "p")).output
    assert f"of {total} episodes read ({total - 1} packed)" in info, info


# -- row 7: verify on a pack being written says so, and whom to wait for --------------------------
def test_7_verify_of_a_pack_being_written_says_wait(sample_source, tmp_path):
    from lerobot_shards.core.storage import Storage
    from lerobot_shards.packer.run import destination_lease

    dst = tmp_path / "p"
    _run("pack", str(sample_source), str(dst))
    (dst / "manifest.json").unlink()  # as while its shards are still being written
    stopped = _run("verify", str(dst), ok=False).output
    assert "being written" not in stopped and "finalize" in stopped, stopped  # nobody writes it: finish or publish it
    with destination_lease(Storage(str(dst)), None):  # a live run's lease (this process holds its lock)
        told = _run("verify", str(dst), ok=False)
    assert told.exit_code == 1 and f"being written now (pid {os.getpid()} on" in told.output, told.output
    assert "wait for that run to end" in told.output and "finalize" not in told.output.split("being written", 1)[1]


# -- row 9: errors name what the user must fix, not our bounds or the client's words -------------
def test_9_error_words_are_the_users(tmp_path):
    import pytest

    from lerobot_shards.core.errors import ObjectNotFoundError
    from lerobot_shards.core.storage import Storage

    with pytest.raises(ObjectNotFoundError) as missing:
        Storage(str(tmp_path)).read_prefix("manifest.json", 256 << 20)
    assert str(missing.value).endswith("not found (read)") and "MiB" not in str(missing.value), missing.value
    told = _run("info", "s3://bucket/pack", "--storage-options", '{"endpoint_url": "127.0.0.1:9"}', ok=False)
    assert told.exit_code == 1 and "endpoint_url '127.0.0.1:9' has no scheme: give 'http://127.0.0.1:9'" in told.output
    assert "Traceback" not in told.output and len(told.output.strip().splitlines()) == 1, told.output


# -- row 10: a bucket source's messages name its s3:// objects, not the staging cache ------------
def test_10_a_bucket_sources_messages_name_the_bucket(s3_bucket, tmp_path, caplog, monkeypatch):
    import s3fs

    from lerobot_shards.testing import SampleSpec, write_sample_dataset

    url, options = s3_bucket
    source = tmp_path / "src"
    write_sample_dataset(source, SampleSpec(episodes=3, video_files_size_in_mb=1e-6))
    sorted((source / "videos" / TOP).rglob("*.mp4"))[1].write_bytes(b"")
    (source / "videos" / "orphan.mp4").write_bytes(b"\0" * 64)  # said as a reading note (a log line)
    s3fs.S3FileSystem(**options).put(str(source), f"{url.removeprefix('s3://')}/robot", recursive=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # the staging cache lives under it
    given = ["--src-storage-options", json.dumps(options)]
    checked = _run("check", f"{url}/robot", *given, ok=False)
    assert f"{url}/robot/videos/{TOP}/" in checked.output and "0 bytes" in checked.output, checked.output
    with caplog.at_level(logging.WARNING, logger="lerobot_shards"):
        refused = _run("pack", f"{url}/robot", str(tmp_path / "p"), *given, ok=False)
    said = refused.output + caplog.text
    assert f"{url}/robot/videos/{TOP}/" in refused.output and "cannot be packed" in refused.output, refused.output
    assert refused.output.rstrip().endswith("with your --src-storage-options"), refused.output  # its keys not printed
    assert ".cache" not in said and str(tmp_path / "home") not in said + checked.output, said


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        (("source", "left_out"), {"rows": "17"}, "field 'rows' must be an integer >= 0"),
        (("source", "left_out"), {"rows": 1, "\x1b[2Jevil": 3}, "unknown field '\\x1b[2Jevil' (counts ['rows', 'files'])"),
        (("source", "left_out"), [3], "field 'left_out' must be an object"),
        (("extra", "schema_drift"), {"only_in_info": 5}, "field 'only_in_info' must be a list"),
        (("extra", "schema_drift"), {"only_in_info": [1]}, "field 'only_in_info' must be a list of feature names"),
    ],
)
def test_3_what_a_report_counts_is_parsed_where_the_manifest_is(sample_source, tmp_path, where, value, said):
    """Row 3's counts come from the manifest: a hostile value is refused by name where the
    manifest is read, never printed into a corpus report or counted there with a traceback."""
    from lerobot_shards.core.errors import FormatError
    from lerobot_shards.core.format import Manifest, content_sha256

    _run("pack", str(sample_source), str(tmp_path / "p"))
    data = json.loads((tmp_path / "p" / "manifest.json").read_text())
    data[where[0]][where[1]] = value
    data["content_sha256"] = content_sha256(data)  # as a writer that meant it would
    with pytest.raises(FormatError, match=re.escape(said)):
        Manifest.from_dict(data)
    data[where[0]][where[1]] = {"rows": 2, "files": 1} if where[0] == "source" else {"only_in_info": ["x"]}
    data["content_sha256"] = content_sha256(data)
    Manifest.from_dict(data)  # what the packer writes reads
