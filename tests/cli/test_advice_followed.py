"""What the next new user hit (issue 56): each row reproduced as it was met, and each piece of
advice a message gives run as printed. Row 1 (a mixture of rates in lerobot-train) is in
tests/train/test_lerobot_train.py and scripts/parity_train.py (check 6, real LeRobot)."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from pathlib import Path

import pytest

from lerobot_shards import MixtureDataset, RetryPolicy, StorageError, pack_dataset
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.storage import Storage
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.cli.commands import advised, run_cli
from tests.loopback import free_port
from tests.packed_fixtures import *
from tests.packed_fixtures import source_episodes

ROOT = Path(__file__).resolve().parents[2]


_run, _advised = run_cli, advised


def _two_packs(tmp_path: Path, second: tuple[int, int] = (32, 32)) -> Path:
    """Two packs in one folder; the second's `top` camera at another size (so it needs a key map)."""
    for name, (height, width) in (("ds_a", (48, 64)), ("ds_d", second)):
        spec = SampleSpec(
            episodes=2, lengths=(6, 8), seed=len(name), cameras=(CameraSpec("observation.images.top", height, width),)
        )
        write_sample_dataset(tmp_path / "src" / name, spec)
        pack_dataset(str(tmp_path / "src" / name), str(tmp_path / "mix" / name))
    return tmp_path / "mix"


# -- row 2: report judges a mixture with the key maps it records --------------------------------
def test_2_report_applies_the_recorded_key_maps_and_duplicates(tmp_path):
    mix = _two_packs(tmp_path)
    refused = _run("mixture", "create", str(mix), ok=False)
    assert refused.exit_code == 1 and "UNMIXABLE ds_d" in refused.output
    key_map = re.search(r"`(--key-map \S+)`", refused.output).group(1).split()
    _run("mixture", "create", str(mix), *key_map)  # the advice, as printed
    report = _run("mixture", "report", str(mix))
    assert "2 ok, 0 not ok" in report.output and "unmixable" not in report.output, report.output
    # Without the recorded map the same packs are still unmixable (the map is what made them mix).
    (mix / "mixture.json").unlink()
    assert "unmixable" in _run("mixture", "report", str(mix), ok=False).output


# -- row 3: a folder without mixture.json says which command writes one -------------------------
def test_3_a_folder_of_packs_without_a_mixture_file_names_the_command(tmp_path):
    mix = _two_packs(tmp_path, second=(48, 64))
    with pytest.raises(ArgumentError) as refused:
        MixtureDataset(str(mix))
    message = str(refused.value)
    assert message.startswith(f"no mixture.json in {mix}: run `lerobot-shards mixture create {mix}`"), message
    _run(*_advised(message, "mixture create"))
    assert len(MixtureDataset(str(mix))) == 2 * (6 + 8)


# -- row 9: the same pack twice names --allow-duplicates, not --allow-partial -------------------
def test_9_a_pack_listed_twice_names_allow_duplicates(tmp_path):
    mix = _two_packs(tmp_path, second=(48, 64))
    twice = ["--name", "a=ds_a", "--name", "b=ds_a"]  # relative to the mixture's folder
    refused = _run("mixture", "create", str(mix), *twice, ok=False)
    assert refused.exit_code == 1
    assert "--allow-partial" not in refused.output and "--allow-duplicates" in refused.output, refused.output
    _run("mixture", "create", str(mix), *twice, "--allow-duplicates")
    assert len(MixtureDataset(str(mix), allow_duplicates=True)) == 2 * (6 + 8)
    # report judges it as written: with the duplicate it was written with
    assert "2 ok, 0 not ok" in _run("mixture", "report", str(mix), *twice).output


# -- row 10: a wrong endpoint is named, not asked for ------------------------------------------
def test_10_a_wrong_endpoint_is_named_not_asked_for(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    storage = Storage("s3://bucket/pack", {"endpoint_url": endpoint}, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(StorageError) as failed:
        storage.read_bytes("manifest.json")
    message = str(failed.value)
    assert f"cannot connect to {endpoint} (the endpoint_url from storage_options)" in message, message
    assert "pass storage_options" not in message
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    with pytest.raises(StorageError, match=r"cannot connect to .* \(the endpoint_url from AWS_ENDPOINT_URL\)"):
        Storage("s3://bucket/pack", retry=RetryPolicy(max_attempts=1)).read_bytes("manifest.json")


# -- row 5: an episode without rows is never advised a pad that cannot fill it ------------------
def test_5_an_episode_without_rows_is_advised_what_packs_it(sample_source, tmp_path, monkeypatch):
    import shutil

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    monkeypatch.setenv("LEROBOT_SHARDS_JOURNAL", str(tmp_path / "journal"))
    source = tmp_path / "source"
    shutil.copytree(sample_source, source)
    episodes = len(source_episodes(source))
    for path in sorted((source / "data").glob("*/*.parquet")):  # episode 2's rows lost, its metadata kept
        table = pq.read_table(path)
        pq.write_table(table.filter(pc.not_equal(table["episode_index"], 2)), path)
    checked = _run("check", str(source), ok=False)
    assert checked.exit_code == 1
    assert f"checked {episodes} episodes" in checked.output, checked.output  # every episode read is counted
    assert "pad" not in checked.output.split("Error:")[-1], checked.output
    for policy in ("drop-episode", "pad"):  # pad has nothing to fill from: it leaves the episode out too
        again = _run("check", str(source), "--on-frame-mismatch", policy)
        assert "ERROR" not in again.output and "ok to pack" in again.output, again.output
    advised = re.search(r"to pack: (--on-frame-mismatch drop-episode) leaves out .*; (--episodes \S+) packs", checked.output)
    assert advised, checked.output
    for n, flags in enumerate(advised.groups()):
        packed = _run("pack", str(source), str(tmp_path / f"out{n}"), *flags.split())
        assert f"packed {episodes - 1} episodes" in packed.output, packed.output
    refused = _run("pack", str(source), str(tmp_path / "plain"), ok=False)
    assert "it has no rows to fill from: --on-frame-mismatch drop-episode leaves it out" in refused.output
    assert "  " not in refused.output.splitlines()[-1]


# -- row 8: the shard size advised for idle workers makes the shards it says ---------------------
def _logged(caplog, *args: str) -> str:
    """A command's log lines (warnings go to the log, which pytest captures)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lerobot_shards"):
        _run(*args)
    return caplog.text


def test_8_the_advised_shard_size_makes_enough_shards(sample_source, tmp_path, caplog):
    episodes = len(source_episodes(sample_source))
    first = _logged(caplog, "pack", str(sample_source), str(tmp_path / "one"), "--workers", "4")
    advice = re.search(r"pack with (--shard-size-mb \S+) \((\d+) shards or more\)", first)
    assert advice and int(advice.group(2)) == 4, first
    followed = _logged(caplog, "pack", str(sample_source), str(tmp_path / "four"), "--workers", "4", *advice.group(1).split())
    assert "idle" not in followed, followed
    assert len(list((tmp_path / "four" / "shards").glob("*.tar"))) >= 4
    # More workers than episodes: no size helps, and none is advised.
    many = _logged(
        caplog, "pack", str(sample_source), str(tmp_path / "many"), "--workers", str(episodes + 2), "--shard-size-mb", "0.0001"
    )
    assert f"--workers {episodes} is as fast" in many and "--shard-size-mb" not in many, many


# -- row 11: whole-number seconds read as frames are asked about -------------------------------
def test_11_frames_given_as_seconds_are_asked_about(sample_source, tmp_path, caplog):
    import warnings

    from lerobot_shards import PackedDataset, WindowWarning

    packed = _logged(caplog, "pack", str(sample_source), str(tmp_path / "p"), "--window", 'chunk={"action":[0,1,2]}')
    hint = re.search(r"did you mean frames\? (--window-frames \S+)", packed)
    assert hint, packed
    followed = _logged(caplog, "pack", str(sample_source), str(tmp_path / "f"), *shlex.split(hint.group(1)))
    assert "did you mean" not in followed and "every sample pads" not in followed, followed
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PackedDataset(str(tmp_path / "p"), delta_timestamps={"action": [0, 1, 2]})
    said = [str(w.message) for w in caught if issubclass(w.category, WindowWarning)]
    assert said and "did you mean frames? as seconds at 30 fps: {'action': [0.0, 0.033333, 0.066667]}" in said[0], said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PackedDataset(str(tmp_path / "p"), delta_timestamps={"action": [0.0, 0.033333, 0.066667]})  # as advised
    assert not [w for w in caught if issubclass(w.category, WindowWarning)]


# -- rows 4 and 7: sizes per camera, and NVDEC's limits said before packing, advice followed -----
def test_4_7_nvdec_limits_are_said_at_check_and_the_advised_sizes_pack_per_camera(sample_source, tmp_path, caplog):
    """The default sample (48x64 and 32x32 cameras) could not be resized at all: one size
    stretched the other camera. Now check (and pack, before it packs) says, per camera, the size
    NVDEC needs, then one command with every camera's size; it passes as printed, its sizes
    pack, and info then says NVDEC decodes every camera."""
    checked = _run("check", str(sample_source), "--video", "hevc")
    assert checked.output.count("NVDEC cannot decode this camera") == 2, checked.output
    advised = _advised(checked.output, "check")
    assert advised[:4] == ["check", str(sample_source), "--video", "hevc"] and "observation.images.wrist=144x144" in advised
    # pack says the same before it packs (not only check before, or info after).
    unsized = _logged(caplog, "pack", str(sample_source), str(tmp_path / "unsized"), "--video", "hevc")
    assert _advised(unsized, "check") == advised, unsized
    again = _run(*advised)  # as printed
    assert "NVDEC" not in again.output, again.output
    out = tmp_path / "nvdec"
    _run("pack", str(sample_source), str(out), *advised[2:])
    info = _run("info", str(out), "--format", "json")
    assert json.loads(info.output)["nvdec_refusals"] == {}, info.output
    # One size for cameras of two aspects is refused naming the per-camera flag that fits.
    one = _run("pack", str(sample_source), str(tmp_path / "one"), "--video", "hevc", "--resize", "144x192", ok=False)
    assert "give each camera its own size (KEY=HxW), e.g. --resize observation.images.wrist=144x144" in one.output
    assert not (tmp_path / "one" / "manifest.json").exists()
    unknown = _run("pack", str(sample_source), str(tmp_path / "two"), "--video", "hevc", "--resize", "nope=16x16", ok=False)
    assert "--resize names ['nope'], which are not video cameras" in unknown.output
    assert "NVDEC: yes" in _run("info", str(out)).output


def test_7_info_names_every_camera_nvdec_refuses(packed_hevc):
    info = json.loads(_run("info", str(packed_hevc), "--format", "json").output)
    refusals = info["nvdec_refusals"]
    assert len(refusals) == 2, refusals  # both cameras, each with the size that fits it
    for why in refusals.values():
        assert re.search(r"repack it at \d+x\d+", why), why
    table = _run("info", str(packed_hevc)).output
    advised = _advised(table, "pack")
    assert advised.count("--resize") == 2, table  # one command for both cameras


# -- row 6: check takes every pack option that shapes a pack, and checks it ---------------------
def _flags(*command: str) -> set[str]:
    """The flags a command's --help lists."""
    return set(re.findall(r"^\s+(--[a-z][a-z0-9-]*)", _run(*command, "--help").output, re.M)) - {"--help"}


def test_6_check_takes_packs_options_and_pack_check_drops_none(sample_source, tmp_path):
    ok = _run("check", str(sample_source), "--video", "h264", "--gop", "1", "--crf", "30", "--preset", "fast")
    assert "ok to pack" in ok.output
    window = 'c={"action":[0,0.013]}'
    for command in (["check", str(sample_source)], ["pack", "--check", str(sample_source)]):
        refused = _run(*command, "--window", window, ok=False)  # pack refuses it: so does its check
        assert refused.exit_code == 1 and "not multiples of 1/fps" in refused.output, refused.output
        advised = re.search(r"or give it in frames: (--window-frames \S+)", refused.output).group(1)
        assert "ok to pack" in _run(*command, *shlex.split(advised)).output
    bogus = _run("check", str(sample_source), "--video", "h264", "--preset", "bogus", ok=False)
    assert bogus.exit_code == 2 and "'bogus' is not one of 'ultrafast'" in bogus.output
    copy = _run("pack", "--check", str(sample_source), "--crf", "5", ok=False)
    assert copy.exit_code == 2 and "--crf and --preset apply to re-encodes" in copy.output
    ignored = _run("pack", "--check", str(sample_source), "--workers", "3", ok=False)
    assert ignored.exit_code == 2 and "--workers: only a pack that writes uses it" in ignored.output
    # Every flag pack has is check's, or one only a writing pack uses: none is dropped in silence.
    destination = {"--workers", "--part", "--storage-options", "--journal", "--trust-destination", "--repair"}
    check, pack = _flags("check"), _flags("pack") - {"--check"}
    assert check == pack - destination and destination <= pack, check ^ (pack - destination)
    for flag in destination - {"--trust-destination", "--repair"}:  # each refused by --check, by name
        value = {"--part": "0/2", "--storage-options": "{}", "--journal": str(tmp_path / "j"), "--workers": "2"}[flag]
        refused = _run("pack", "--check", str(sample_source), flag, value, ok=False)
        assert refused.exit_code == 2 and f"{flag}: only a pack that writes uses it" in refused.output, refused.output


# -- row 13: make-sample names the flag and the folder ------------------------------------------
def test_13_make_sample_names_the_flag_and_the_folder(tmp_path):
    swapped = _run("make-sample", str(tmp_path / "s"), "--min-length", "50", "--max-length", "10", ok=False)
    assert swapped.exit_code == 2 and "--max-length" in swapped.output and "--min-length 50" in swapped.output
    for length in ("0", "-3"):
        bad = _run("make-sample", str(tmp_path / "s"), "--min-length", length, ok=False)
        assert bad.exit_code == 2 and "--min-length" in bad.output and "internal error" not in bad.output
    assert not (tmp_path / "s").exists()
    import subprocess

    readonly = tmp_path / "ro"
    readonly.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(readonly)]).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:  # an existing read-only OUT: named, not the working folder the writer makes inside it
        refused = _run("make-sample", str(readonly), ok=False)
        assert refused.exit_code == 1 and refused.output.strip().splitlines()[-1] == f"Error: {readonly}: Read-only file system"
    finally:
        subprocess.run(["umount", str(readonly)], check=False)


# -- row 14: preview checks it can write before decoding; a failed run leaves nothing -----------
def test_14_preview_refuses_an_unwritable_output_before_decoding(packed_copy, tmp_path):
    import subprocess

    readonly = tmp_path / "ro"
    readonly.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(readonly)]).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        refused = _run("preview", str(packed_copy), "-o", str(readonly / "p.html"), ok=False)
        assert refused.exit_code == 1 and f"{readonly / 'p.html'}: cannot write it" in refused.output, refused.output
        assert "preview: episode" not in refused.output  # nothing was decoded first
    finally:
        subprocess.run(["umount", str(readonly)], check=False)
    written = _run("preview", str(packed_copy), "-o", str(tmp_path / "p.html"), "--episodes", "1")
    assert (tmp_path / "p.html").stat().st_size > 0 and "wrote" in written.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.html", "ro"]  # no temp page left
    # A preview killed mid-decode (SIGKILL: no cleanup runs) left its half page; the next preview
    # of that page removes it, and keeps one whose writer still runs.
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed, running = tmp_path / f".p.html.{dead.pid}.x1.tmp", tmp_path / f".p.html.{os.getpid()}.x2.tmp"
    killed.write_text("<html>half")
    running.write_text("<html>half")
    _run("preview", str(packed_copy), "-o", str(tmp_path / "p.html"), "--episodes", "1")
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, "p.html", "ro"]


# -- row 15: a missing shard is one line per file, and the repair command says what SRC is -------
def test_15_verify_says_a_missing_shard_once(packed_copy, tmp_path):
    import shutil

    pack = tmp_path / "pack"
    shutil.copytree(packed_copy, pack)
    (pack / "shards" / "shard-000000.tar").unlink()
    failed = _run("verify", str(pack), ok=False)
    fails = [line for line in failed.output.splitlines() if line.startswith("FAIL")]
    assert fails == ["FAIL shards/shard-000000.tar: missing"], failed.output
    assert "a local folder named" in failed.output.splitlines()[-1]


# -- row 17: numbers and names the docs state, read back from the code ---------------------------
def test_17_the_docs_say_what_the_code_does(tmp_path):
    import subprocess
    import sys

    from lerobot_shards.core.format import (
        FORMAT_VERSION,
        FPS_FORMAT_VERSION,
        PREROLL_FORMAT_VERSION,
        SUPPORTED_FORMAT_VERSIONS,
        ParquetCompression,
    )

    format_doc = (ROOT / "docs" / "FORMAT.md").read_text()
    newest = max(SUPPORTED_FORMAT_VERSIONS)
    assert format_doc.splitlines()[0].endswith(f"version {newest}")
    row = next(line for line in format_doc.splitlines() if line.startswith("| `format_version` |"))
    for version in (FORMAT_VERSION, PREROLL_FORMAT_VERSION, FPS_FORMAT_VERSION):
        assert f"`{version}`" in row, row
    assert f"readers read {min(SUPPORTED_FORMAT_VERSIONS)}-{newest}" in row, row
    table = [
        int(line.split("|")[1]) for line in format_doc.split("## Versions", 1)[1].splitlines() if re.match(r"\| \d+ \|", line)
    ]
    assert table == sorted(table) and table[-1] == newest, table
    # Every make target the README names exists; pyright's scope is said as pyproject sets it.
    readme, makefile = (ROOT / "README.md").read_text(), (ROOT / "Makefile").read_text()
    for target in set(re.findall(r"^make ([\w-]+)", readme, re.M)):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), target
    assert 'include = ["lerobot_shards"]' in (ROOT / "pyproject.toml").read_text()
    for text in (readme, makefile, (ROOT / "tests" / "contracts" / "test_lint.py").read_text()):
        assert "pyright over the pure layers" not in text and "pyright on the pure layers" not in text
    # The pack-output row names what writers call; a level out of its codec's range is refused.
    architecture = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert "pack_parquet(name)" in architecture and "destination=True" in architecture
    with pytest.raises(ValueError, match=r"'lz4' takes levels 1 to 12, got 20"):
        ParquetCompression("lz4", "too high", level=20)
    # The benchmark charts redraw from committed results, with the command BENCHMARKS gives.
    benchmarks = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    assert "benchmarks/render_charts.py --out docs" in benchmarks
    drawn = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "render_charts.py"), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert drawn.returncode == 0, drawn.stderr
    for chart in re.findall(r"\]\((bench-[\w-]+\.png)\)", benchmarks):
        assert (tmp_path / chart).stat().st_size > 10_000, chart
