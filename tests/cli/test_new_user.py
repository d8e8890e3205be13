"""What new users hit (issues 24 and 34): each row of a report reproduced as it was met."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from lerobot_shards.cli import main as cli
from tests.packed_fixtures import *
from tests.packed_fixtures import episodes_index
from tests.s3_server import s3_server  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[2]


# -- row 1: a pack must never write into a LeRobot dataset or any non-pack folder ------------------
def test_1_packing_into_a_lerobot_dataset_or_a_foreign_folder_is_refused(sample_source, tmp_path):
    aloha_copy = tmp_path / "data" / "aloha_copy"  # a LeRobot dataset (the report's was ALOHA; any will do)
    shutil.copytree(sample_source, aloha_copy)
    info_before = (aloha_copy / "meta" / "info.json").read_bytes()
    result = CliRunner().invoke(cli, ["pack", str(sample_source), str(aloha_copy)])
    assert result.exit_code == 1, result.output
    assert "is not empty: it holds a LeRobot dataset (meta/info.json)" in result.output
    assert (aloha_copy / "meta" / "info.json").read_bytes() == info_before
    assert not (aloha_copy / "pack-plan.json").exists()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    result = CliRunner().invoke(cli, ["pack", str(sample_source), str(notes)])
    assert result.exit_code == 1 and "holds 1 file(s) that are not a pack, e.g. notes.txt" in result.output, result.output
    assert sorted(p.name for p in notes.iterdir()) == ["notes.txt"]
    # An empty directory, and a pack of this plan (a resume), are fine.
    empty = tmp_path / "empty"
    empty.mkdir()
    assert CliRunner().invoke(cli, ["pack", str(sample_source), str(empty)]).exit_code == 0
    again = CliRunner().invoke(cli, ["pack", str(sample_source), str(empty)])
    assert again.exit_code == 0 and "already done" in again.output


# -- row 3: a loaded state must not be dropped silently by set_epoch --------------------------------
def test_3_set_epoch_of_another_epoch_after_load_state_dict_warns_and_the_readme_loop_resumes(packed_copy):
    import warnings

    import pytest

    from lerobot_shards import BatchLoader, PackedDataset, ResumeWarning

    def loader():
        return BatchLoader(PackedDataset(str(packed_copy), return_uint8=True, seed=1), batch_size=16, num_workers=0)

    first = loader()
    first.set_epoch(0)
    assert sum(len(b["index"]) for b in first) == 141
    first.set_epoch(1)
    seen = []
    for batch in first:
        seen += batch["index"].tolist()
        if len(seen) >= 48:
            break
    state = first.state_dict()
    assert state["epoch"] == 1 and state["samples_consumed"] == 48

    # What the report did: load, then a loop starting at epoch 0. Now it says so.
    resumed = loader()
    resumed.load_state_dict(state)
    with pytest.warns(ResumeWarning, match=r"set_epoch\(0\) leaves the loaded resume state unused \(epoch 1, 48 samples"):
        resumed.set_epoch(0)

    # The README's loop: start at the state's epoch; it continues where it stood, silently.
    resumed = loader()
    resumed.load_state_dict(state)
    rest = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResumeWarning)
        for epoch in range(state["epoch"], 2):
            resumed.set_epoch(epoch)
            for batch in resumed:
                rest += batch["index"].tolist()
    assert len(rest) == 141 - 48 and not set(rest) & set(seen)


# -- row 5: preview plots every dimension, with a legend of names and seconds on x --------------------
def test_5_preview_plots_every_dimension_with_names_and_seconds(tmp_path):
    import re

    from lerobot_shards import pack_dataset, render_preview
    from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

    # ALOHA's shape: 14-dim state and action with joint names, 50 fps (the report lost 4 dims).
    write_sample_dataset(
        tmp_path / "src",
        SampleSpec(
            episodes=1,
            lengths=(251,),
            fps=50,
            state_dim=14,
            action_dim=14,
            cameras=(CameraSpec("observation.images.top", 24, 32),),
        ),
    )
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "pack"))
    page, _ = render_preview(str(tmp_path / "pack"), max_episodes=1, frames_per_episode=1)
    charts = dict(re.findall(r'<div class="chart"><div class="cam">([^<]+)</div>(.*?)</div></div>', page, re.S))
    action = charts["action"]
    assert action.count("<polyline") == 14  # all 14 dims (the report: 10)
    assert all(f"</i>joint_{i}</span>" in action for i in range(14))  # a legend with the feature's names
    assert "5.0s" in action and "0.0s" in action  # 251 frames at 50 fps: seconds on x


# -- row 6: mixture create reports unmixable datasets; report shows the mixture's anchors ----------
def test_6_unmixable_camera_sizes_are_reported_at_create_and_report_shows_the_mixture_anchors(tmp_path):
    import json

    from lerobot_shards import MixtureDataset, pack_dataset
    from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

    for name, (height, width) in {"big": (48, 64), "big2": (48, 64), "small": (24, 32)}.items():
        write_sample_dataset(
            tmp_path / "src" / name,
            SampleSpec(
                episodes=2, lengths=(6, 8), seed=len(name), cameras=(CameraSpec("observation.images.top", height, width),)
            ),
        )
        pack_dataset(str(tmp_path / "src" / name), str(tmp_path / "mix" / name))
    result = CliRunner().invoke(
        cli, ["mixture", "create", str(tmp_path / "mix"), "--where", "frame_index >= 2", "--allow-partial"]
    )
    assert result.exit_code == 0, result.output
    assert "UNMIXABLE small: camera 'observation.images.top' is 24x32 here and 48x64 in 2 other dataset(s)" in result.output
    assert "--resize observation.images.top=48x64" in result.output
    spec = json.loads((tmp_path / "mix" / "mixture.json").read_text())
    assert [d["name"] for d in spec["datasets"]] == ["big", "big2"]
    assert len(MixtureDataset(str(tmp_path / "mix" / "mixture.json"))) == sum(d["anchors"] for d in spec["datasets"])
    report = CliRunner().invoke(cli, ["mixture", "report", str(tmp_path / "mix")])
    lines = {line.split()[0]: line for line in report.output.splitlines()[1:-1]}
    for dataset in spec["datasets"]:  # the mixture's anchors (its --where), not the pack's frames
        assert lines[dataset["name"]].split()[2] == str(dataset["anchors"]) and dataset["anchors"] == 10, report.output
    assert "unmixable" in lines["small"], report.output


# -- row 7: bucket errors are one line with the fix; Ctrl-C says how to resume --------------------
def test_7_bucket_errors_name_the_fix_and_ctrl_c_says_how_to_resume(sample_source, s3_server, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "AWS_ENDPOINT_URL": s3_server.endpoint_url, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "lerobot_shards.cli", "pack", str(sample_source), "s3://no-such-bucket/x"]
    missing = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert "the bucket no-such-bucket does not exist: create it first" in missing.stderr
    anonymous = {k: v for k, v in env.items() if not k.startswith("AWS_") or k == "AWS_ENDPOINT_URL"}
    anonymous.update(
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
    )
    no_keys = subprocess.run(command, env=anonymous, capture_output=True, text=True, timeout=120)
    assert no_keys.returncode == 1 and len(no_keys.stderr.strip().splitlines()) == 1, no_keys.stderr
    # The cause first (issue 42: the line began "read of the first 268435457 bytes failed").
    assert no_keys.stderr.startswith("Error: s3://no-such-bucket/x/") and ": no credentials (" in no_keys.stderr, no_keys.stderr
    assert "): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" in no_keys.stderr

    dst = tmp_path / "interrupted"
    pack = [
        sys.executable,
        "-m",
        "lerobot_shards.cli",
        "pack",
        str(sample_source),
        str(dst),
        "--video",
        "hevc",
        "--shard-size-mb",
        "0.001",
    ]
    # SIGINT as a terminal's Ctrl-C finds it: a test run started as a background job of a
    # non-interactive shell ignores SIGINT, and the pack would inherit that and never stop.
    process = subprocess.Popen(
        pack,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # Poll until the first shard is committed: a bounded number of polls (a hang guard of
    # minutes), and the pack must still be running when it is.
    for _ in range(60_000):
        if (dst / "shards" / "shard-000000.json").exists() or process.poll() is not None:
            break
        time.sleep(0.01)
    assert (dst / "shards" / "shard-000000.json").exists(), "no shard committed (a hang?)"
    assert process.poll() is None, "the pack ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "interrupted: shards already written are kept; re-run the same command to resume" in stderr
    assert "Traceback" not in stderr and "Aborted!" not in stderr
    resumed = subprocess.run(pack, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0 and "already done" in resumed.stdout, resumed.stderr


# -- row 8: the README's commands and stream snippet run as written on a 50 fps dataset ----------------
def _readme_block(heading: str, language: str) -> str:
    import re

    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading) :]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def test_8_readme_pack_commands_and_stream_snippet_run_on_a_50_fps_dataset(tmp_path, monkeypatch):
    import shlex

    block = _readme_block("### Pack, verify, inspect", "bash").replace("\\\n", " ")
    commands = [shlex.split(line.split("  #")[0]) for line in block.splitlines() if line.startswith("lerobot-shards")]
    assert [c[1] for c in commands] == ["make-sample", "pack", "verify", "info", "sql"]
    commands[0] += ["--fps", "50", "--episodes", "4"]  # the user's dataset: 50 fps
    for command in commands:
        args = [a.replace("/tmp/", f"{tmp_path}/") for a in command[1:]]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (command, result.output)

    code = _readme_block("### Stream into PyTorch", "python").replace("/tmp/", f"{tmp_path}/")
    # Issue 34 row 5: the snippet picks its device itself; it runs as written on the CPU install.
    code = code.replace("num_workers=4", "num_workers=0").replace("range(start_epoch, 10)", "range(start_epoch, 1)")
    code = code.replace(
        "        ...                                        # train", "        assert batch['action'].shape[1] == 3"
    )
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["fps"] == 50 and namespace["checkpoint"]["data"]["samples_consumed"] == len(namespace["ds"])


def _same_episodes_index(a: Path, b: Path) -> None:
    """Assert two packs' episodes indexes hold the same values, naming the columns and
    episodes that differ (a byte comparison only says the file differs)."""
    import pyarrow.parquet as pq

    left, right = (pq.read_table(root / "index" / "episodes.parquet").to_pylist() for root in (a, b))
    assert len(left) == len(right)
    differ = {
        (row["episode_index"], key): (row[key], other[key])
        for row, other in zip(left, right)
        for key in row
        if row[key] != other.get(key)
    }
    assert not differ, f"episodes index differs (episode, column): (sequential, parallel): {differ}"


# -- row 9: --workers on a one-shard dataset uses the cores (re-encodes) or says why not (copy) ------
def test_9_more_workers_than_shards_encode_members_in_parallel_or_say_why(sample_source, tmp_path, caplog):
    import logging
    from dataclasses import replace

    from lerobot_shards import pack_dataset
    from lerobot_shards.testing import CameraSpec, rollover_spec, write_sample_dataset
    from tests.packed_fixtures import assert_same_tree

    # Cameras of real sizes (128 px and up): x264's output for tiny frames was seen to depend on
    # the process it ran in, about 1 run in 10 under load: 32x32 (2051 or 2078 bytes, threads or
    # not) and, in a clean-clone CI run of issue 43's stop, 48x64 with one encoder thread
    # (5941 or 5920 bytes); not reproduced in isolation. The byte-identity promise is held at
    # camera sizes; docs/DESIGN_NOTES.md (section 16) says where it is not.
    source = tmp_path / "source"
    write_sample_dataset(
        source,
        replace(
            rollover_spec(),
            cameras=(CameraSpec("observation.images.top", 128, 160), CameraSpec("observation.images.wrist", 128, 128)),
        ),
    )
    with caplog.at_level(logging.INFO, logger="lerobot_shards.packer.run"):
        pack_dataset(str(source), str(tmp_path / "parallel"), video="h264", workers=2)
    assert any("re-encoding" in r.message and "members in 2 processes" in r.message for r in caplog.records), caplog.text
    pack_dataset(str(source), str(tmp_path / "sequential"), video="h264", workers=1)
    # Seen once in a clean-clone run under load (not reproduced since): say what differs.
    _same_episodes_index(tmp_path / "sequential", tmp_path / "parallel")
    assert_same_tree(tmp_path / "sequential", tmp_path / "parallel")  # the same bytes
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lerobot_shards.packer.run.pack"):
        pack_dataset(str(sample_source), str(tmp_path / "one"), workers=2)
    assert any(
        "--workers 2, but only 1 shard(s) to build" in r.message and "--shard-size-mb" in r.message for r in caplog.records
    ), caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lerobot_shards.packer.run.pack"):
        report = pack_dataset(str(sample_source), str(tmp_path / "many"), workers=2, shard_size_mb=0.01)
    assert report.shards >= 2 and "only" not in caplog.text


# -- row 10: a copyable pin, info as JSON, and a cheaper CPU conversion with the same values ----------
def test_10_info_prints_a_copyable_pin_and_json(packed_copy):
    import json

    from lerobot_shards.core.format import manifest_sha256

    pin = manifest_sha256((packed_copy / "manifest.json").read_bytes())
    narrow = CliRunner().invoke(cli, ["info", str(packed_copy)], terminal_width=80)
    assert narrow.exit_code == 0 and f"pin {pin}" in narrow.output.splitlines(), narrow.output  # whole, on its own line
    as_json = json.loads(CliRunner().invoke(cli, ["info", str(packed_copy), "--format", "json"]).output)
    assert as_json["pin"] == pin and as_json["totals"]["episodes"] == 9 and as_json["fps"] == 30
    pinned = CliRunner().invoke(cli, ["verify", str(packed_copy), "--manifest-sha256", as_json["pin"]])
    assert pinned.exit_code == 0, pinned.output


def test_10_to_device_on_cpu_gives_lerobots_values_contiguous(packed_copy):
    import torch

    from lerobot_shards import BatchLoader, PackedDataset, to_device

    batch = next(
        iter(BatchLoader(PackedDataset(str(packed_copy), return_uint8=True, shuffle=False), batch_size=8, num_workers=1))
    )
    key = "observation.images.top"
    assert not batch[key].is_contiguous()  # channels-last from the workers
    out = to_device(batch, "cpu")
    assert out[key].is_contiguous() and out[key].dtype == torch.float32
    assert torch.equal(out[key], batch[key].float() / 255)  # bit-identical to LeRobot's frames / 255


# == issue 34: what the next new user hit ============================================================
TRAIN = ROOT / "scripts" / "train.py"


def _train_py(*args: str, env: dict | None = None, cwd=None):
    import os
    import subprocess
    import sys

    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        if env is None or name not in env:
            full_env.pop(name, None)
    return subprocess.run([sys.executable, str(TRAIN), *args], env=full_env, cwd=cwd, capture_output=True, text=True, timeout=300)


# -- rows 1 and 2: train.py makes the log's folder, and reads a bucket through --storage-options ------
def test_34_1_2_train_py_creates_the_log_folder_and_takes_storage_options(packed_copy, s3_server, tmp_path):
    import json

    import s3fs

    from tests.loopback import free_port
    from tests.s3_server import make_bucket

    url, options = make_bucket(s3_server)
    s3fs.S3FileSystem(**options).put(str(packed_copy), f"{url.removeprefix('s3://')}/packed", recursive=True)
    run = tmp_path / "run"  # does not exist: the batch log is opened before any checkpoint
    result = _train_py(
        "--data",
        f"{url}/packed",
        "--storage-options",
        json.dumps(dict(options)),
        "--ckpt",
        str(run / "ckpt.pt"),
        "--log-batches",
        str(run / "batches.jsonl"),
        "--steps",
        "2",
        "--num-workers",
        "0",
        "--batch-size",
        "4",
        env={"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert len((run / "batches.jsonl").read_text().splitlines()) == 2 and (run / "ckpt.pt").is_file()

    # A bucket whose endpoint cannot be reached: one short line that says what to pass, no traceback.
    closed = f"http://127.0.0.1:{free_port()}"
    result = _train_py(
        "--data",
        f"{url}/packed",
        "--ckpt",
        str(tmp_path / "other" / "ckpt.pt"),
        "--steps",
        "1",
        env={"AWS_ENDPOINT_URL": closed, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"},
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 3, result.stderr
    assert "cannot connect" in result.stderr and "endpoint_url" in result.stderr, result.stderr


# -- row 3: a window longer than every episode is said, at pack time, at open and in `info` ----------
def test_34_3_windows_longer_than_every_episode_are_said(sample_source, packed_copy, tmp_path, caplog):
    import logging

    import pytest

    from lerobot_shards import PackedDataset, WindowWarning

    longest = max(row["length"] for row in episodes_index(packed_copy))
    window = json.dumps({"action": list(range(longest + 10))})
    with caplog.at_level(logging.WARNING):
        result = CliRunner().invoke(
            cli, ["pack", str(sample_source), str(tmp_path / "long"), "--window-frames", f"long={window}"]
        )
    assert result.exit_code == 0, result.output
    assert f"window 'long': the window of 'action' spans {longest + 10} frames" in caplog.text
    assert f"longest episode has {longest}: every sample pads it" in caplog.text
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "long")], terminal_width=200)
    assert f"long: action {longest + 10} frames" in info.output, info.output

    with pytest.warns(WindowWarning, match=rf"'action' spans {longest + 10} frames .* longest episode has {longest}"):
        PackedDataset(str(packed_copy), delta_timestamps={"action": [i / 30 for i in range(longest + 10)]})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", WindowWarning)  # a window some episode holds whole: nothing said
        PackedDataset(str(packed_copy), delta_timestamps={"action": [i / 30 for i in range(longest)]})


# -- row 4: SQL errors keep DuckDB's lines, and a bad --where is said once ----------------------------
def test_34_4_sql_errors_keep_their_lines_and_a_bad_where_is_said_once(packed_copy, tmp_path):
    result = CliRunner().invoke(cli, ["sql", str(packed_copy), "select * from samples where"])
    assert result.exit_code == 1 and "\\x0a" not in result.output, result.output
    lines = result.output.splitlines()
    assert any(line.startswith("LINE 1: select * from samples where") for line in lines)
    assert any(set(line.strip()) == {"^"} for line in lines), result.output  # the pointer, on its own line

    mix = tmp_path / "mix"
    mix.mkdir()
    shutil.copytree(packed_copy, mix / "a")
    shutil.copytree(packed_copy, mix / "b")
    result = CliRunner().invoke(cli, ["mixture", "create", str(mix), "--where", "frame_index >", "--allow-duplicates"])
    assert result.exit_code == 1
    assert result.output.count("is not a valid SQL predicate") == 1, result.output
    assert "read_parquet" not in result.output and "lerobot-shards-where" not in result.output
    assert "no complete packed dataset" not in result.output and not (mix / "mixture.json").exists()


# -- row 6: progress lines: the first one's ETA from the work's own clock, the last says how long ----
def test_34_6_progress_eta_counts_from_the_start_of_the_work():
    import io

    from lerobot_shards.cli import PackProgressLog
    from lerobot_shards.packer.run import PackProgress

    stream = io.StringIO()
    log = PackProgressLog(stream=stream)

    def state(done, seconds):
        return PackProgress(
            episodes_done=done,
            episodes_total=10,
            episodes_before=0,
            bytes_in=done * 10**6,
            bytes_out=0,
            shards_written=0,
            shards_total=1,
            seconds=seconds,
        )

    log(state(1, 6.0))  # the first line comes when the first episode is done, 6 s into the pack
    log.log.interval_s = 0
    log(state(10, 60.0))
    log.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("ETA 0:00:54"), lines  # 9 more episodes at 6 s each; not 0:00:00
    assert lines[-1].endswith("done in 0:01:00"), lines


# -- row 7: pack --help's window example works at the fps it names ------------------------------------
def test_34_7_pack_help_window_example_runs_on_a_50_fps_dataset(tmp_path):
    import re

    help_text = " ".join(CliRunner().invoke(cli, ["pack", "--help"], terminal_width=400).output.split())
    assert "0.0333" not in help_text
    example = re.search(r"at 50 fps (chunk='(\{.*?\})')", help_text)
    assert example is not None, help_text
    source = tmp_path / "src50"
    assert CliRunner().invoke(cli, ["make-sample", str(source), "--fps", "50", "--episodes", "2"]).exit_code == 0
    result = CliRunner().invoke(cli, ["pack", str(source), str(tmp_path / "p"), "--window", f"chunk={example.group(2)}"])
    assert result.exit_code == 0, result.output


# -- row 10: a pack as the source, a missing bucket, the tasks view ------------------------------------
def test_34_10_a_pack_as_source_a_missing_bucket_and_the_tasks_view(packed_copy, s3_server, tmp_path):
    from lerobot_shards import FormatError, PackedDataset

    result = CliRunner().invoke(cli, ["pack", str(packed_copy), str(tmp_path / "again")])
    assert result.exit_code == 1 and "is a packed dataset (manifest.json, shards/), not a LeRobot v3 dataset" in result.output
    import pytest

    with pytest.raises(FormatError, match=r"s3://no-such-bucket-34/packed: no such bucket 'no-such-bucket-34'"):
        PackedDataset("s3://no-such-bucket-34/packed", storage_options=s3_server.storage_options())
    tasks = CliRunner().invoke(
        cli, ["sql", str(packed_copy), "SELECT task_index, task FROM tasks ORDER BY 1", "--format", "json"]
    )
    assert tasks.exit_code == 0, tasks.output
    rows = json.loads(tasks.output)
    assert rows and [r["task_index"] for r in rows] == sorted(r["task_index"] for r in rows) and all(r["task"] for r in rows)


# -- row 9: every line of a plot has its own colour, and the last time label is not cut off -----------
def test_34_9_preview_lines_are_all_distinct_and_the_last_label_fits():
    import re

    import numpy as np

    from lerobot_shards.tools import line_colours, svg_plot

    for count in (3, 10, 14, 32):
        assert len(set(line_colours(count))) == count
    html = svg_plot(np.random.default_rng(0).normal(size=(120, 14)), [f"q{i}" for i in range(14)], fps=30)
    strokes = re.findall(r'<polyline fill="none" stroke="([^"]+)"', html)
    keys = re.findall(r'<i style="background:([^"]+)"></i>', html)
    assert len(strokes) == 14 and len(set(strokes)) == 14 and keys == strokes  # q0 and q10 no longer look the same
    width = int(re.search(r'<svg [^>]*width="(\d+)"', html).group(1))
    for x, anchor, text in re.findall(
        r'<text x="([\d.]+)" y="\d+" font-size="10" fill="#666" text-anchor="(\w+)">([^<]*s)</text>', html
    ):
        extent = 6 * len(text)  # about 6 px a character at font-size 10
        right = float(x) + (extent / 2 if anchor == "middle" else 0 if anchor == "end" else extent)
        assert right <= width, (text, x, anchor)
