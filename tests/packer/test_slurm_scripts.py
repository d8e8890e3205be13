"""The SLURM scripts without SLURM: every array task is run as SLURM runs it (bash on the
sbatch script, SLURM_ARRAY_TASK_ID set, same environment), then the dependent job. One
mixture source is broken: the others complete, the failure is recorded with its error and
reported, re-submitting skips what is done. The submit scripts run against a fake sbatch
that records what would be submitted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lerobot_shards.testing import SampleSpec, write_sample_dataset

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "slurm"
SCRIPTS = sorted([*SLURM.glob("*.sbatch"), *SLURM.glob("*.sh")])


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PYTHON=sys.executable, PYTHONPATH=str(ROOT), SLURM_CPUS_PER_TASK="1", **{k: str(v) for k, v in extra.items()})
    return env


def _sbatch(script: str, *args, cwd: Path, **env) -> subprocess.CompletedProcess:
    """Run a batch script the way slurmd does: bash, in the submission directory."""
    return subprocess.run(
        ["bash", str(SLURM / script), *map(str, args)], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_syntax(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if script.suffix == ".sbatch":
        text = script.read_text()
        assert text.startswith("#!/bin/bash\n") and "#SBATCH --output=" in text
        # #SBATCH lines are only read before the first command.
        first_command = next(i for i, line in enumerate(text.splitlines()) if line and not line.startswith("#"))
        assert all(i < first_command for i, line in enumerate(text.splitlines()) if line.startswith("#SBATCH"))


def test_mixture_array_packs_the_good_datasets_and_reports_the_broken_one(tmp_path):
    for name in ("alpha", "beta"):
        write_sample_dataset(tmp_path / "src" / name, SampleSpec(episodes=3, max_length=10, seed=len(name)))
    broken = tmp_path / "src" / "broken"
    (broken / "meta").mkdir(parents=True)  # no meta/info.json
    sources = tmp_path / "sources.txt"
    sources.write_text(
        f"# a mixture\n{tmp_path / 'src' / 'alpha'}\n\n{broken}   # deliberately broken\n{tmp_path / 'src' / 'beta'}\n"
    )
    dst = tmp_path / "mix"
    count = subprocess.run(
        [sys.executable, "-m", "lerobot_shards.cli", "mixture", "sources", "--count", str(sources)],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert count.stdout.strip() == "3"

    for task in range(3):  # sbatch --array=0-2 slurm/pack_mixture.sbatch
        result = _sbatch(
            "pack_mixture.sbatch", cwd=tmp_path, SLURM_ARRAY_TASK_ID=task, SLURM_ARRAY_JOB_ID=77, SOURCES=sources, DST=dst
        )
        assert result.returncode == 0, result.stderr  # a failed dataset never fails its task
    failure = json.loads((dst / "_failures" / "broken.json").read_text())
    assert failure["source"] == str(broken) and failure["error_type"] == "SourceError"
    assert "meta/info.json" in failure["error"] and "Traceback" in failure["traceback"]
    assert failure["slurm"]["SLURM_ARRAY_TASK_ID"] == "1" and failure["slurm"]["SLURM_ARRAY_JOB_ID"] == "77"

    for name in ("alpha", "beta"):
        verified = subprocess.run(
            [sys.executable, "-m", "lerobot_shards.cli", "verify", str(dst / name)], capture_output=True, text=True, env=_env()
        )
        assert verified.returncode == 0, verified.stderr

    assert _sbatch("mixture_create.sbatch", cwd=tmp_path, SOURCES=sources, DST=dst).returncode == 1  # a dataset failed
    assert not (dst / "mixture.json").exists()
    final = _sbatch("mixture_create.sbatch", "--allow-partial", cwd=tmp_path, SOURCES=sources, DST=dst)  # --dependency=afterany
    assert final.returncode == 0, final.stderr
    assert "mixture.json: 2 datasets" in final.stdout
    assert "FAILED broken: SourceError:" in final.stderr and "meta/info.json" in final.stderr
    spec = json.loads((dst / "mixture.json").read_text())
    assert [d["name"] for d in spec["datasets"]] == ["alpha", "beta"]
    for entry in spec["datasets"]:
        assert entry["anchors"] == json.loads((dst / entry["name"] / "manifest.json").read_text())["totals"]["frames"]
    strict = _sbatch("mixture_create.sbatch", "--strict", cwd=tmp_path, SOURCES=sources, DST=dst)
    assert strict.returncode == 1

    # Re-submitting: done datasets are skipped; the fixed one packs and its record goes away.
    again = _sbatch("pack_mixture.sbatch", cwd=tmp_path, SLURM_ARRAY_TASK_ID=0, SOURCES=sources, DST=dst)
    assert "[alpha] already packed and verified: skipped" in again.stdout
    write_sample_dataset(broken, SampleSpec(episodes=2, lengths=(4, 6)))
    fixed = _sbatch("pack_mixture.sbatch", cwd=tmp_path, SLURM_ARRAY_TASK_ID=1, SOURCES=sources, DST=dst)
    assert fixed.returncode == 0 and "[broken] packed and verified" in fixed.stdout, fixed.stderr
    assert not (dst / "_failures" / "broken.json").exists()
    assert _sbatch("mixture_create.sbatch", "--strict", cwd=tmp_path, SOURCES=sources, DST=dst).returncode == 0
    assert [d["name"] for d in json.loads((dst / "mixture.json").read_text())["datasets"]] == ["alpha", "broken", "beta"]


def test_pack_array_then_finalize(tmp_path):
    write_sample_dataset(tmp_path / "src", SampleSpec(episodes=4, max_length=10))
    dst = tmp_path / "packed"
    env = {"SRC": tmp_path / "src", "DST": dst, "SLURM_ARRAY_TASK_COUNT": 2}
    for task in range(2):  # sbatch --array=0-1 slurm/pack.sbatch --shard-size-mb 0.001
        result = _sbatch("pack.sbatch", "--shard-size-mb", "0.001", cwd=tmp_path, SLURM_ARRAY_TASK_ID=task, **env)
        assert result.returncode == 0, result.stderr
        assert "run `lerobot-shards finalize` after all parts" in result.stdout
    assert not (dst / "manifest.json").exists()
    final = _sbatch("finalize.sbatch", cwd=tmp_path, DST=dst)  # --dependency=afterok
    assert final.returncode == 0, final.stderr
    assert "finalized 4 episodes" in final.stdout and "ok:" in final.stdout
    assert json.loads((dst / "manifest.json").read_text())["totals"]["shards"] >= 2

    outside = _sbatch("pack.sbatch", cwd=tmp_path, SLURM_ARRAY_TASK_ID=2, **env)
    assert outside.returncode == 2 and "array task 2 is outside the 2 parts" in outside.stderr
    # Re-submitting one part of 2 with --array=1: PARTS keeps the plan.
    resubmit = _sbatch(
        "pack.sbatch",
        "--shard-size-mb",
        "0.001",
        cwd=tmp_path,
        SLURM_ARRAY_TASK_ID=1,
        SLURM_ARRAY_TASK_COUNT=1,
        PARTS=2,
        SRC=tmp_path / "src",
        DST=dst,
    )
    assert resubmit.returncode == 0 and "(0 written, 2 already done)" in resubmit.stdout, resubmit.stdout + resubmit.stderr
    nothing = _sbatch("pack.sbatch", cwd=tmp_path, SLURM_ARRAY_TASK_ID=0, SLURM_ARRAY_TASK_COUNT=1, DST=dst)
    assert nothing.returncode == 2 and "set SRC (path or URL) or REPO_ID" in nothing.stderr


FAKE_SBATCH = """#!/bin/bash
# Records each submission (arguments and the variables the job would inherit), prints a job id.
n=$(( $(cat "$FAKE_DIR/count" 2>/dev/null || echo 100) + 1 ))
echo $n > "$FAKE_DIR/count"
printf '%s\\n' "$(printf '%q ' "$@")| SOURCES=${SOURCES:-} DST=${DST:-} INDEX_OFFSET=${INDEX_OFFSET:-} PARTS=${PARTS:-} SRC=${SRC:-}" >> "$FAKE_DIR/log"
echo "$n;cluster"
"""


@pytest.fixture
def fake_sbatch(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH)
    (bin_dir / "sbatch").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_DIR": tmp_path}


def test_submit_mixture_splits_large_arrays_and_waits_for_all(tmp_path, fake_sbatch):
    (tmp_path / "sources.txt").write_text("a/one\na/two\n# skipped\na/three\n")
    result = subprocess.run(
        ["bash", str(SLURM / "submit_mixture.sh"), "sources.txt", "s3://b/mix", "--window", 'chunk={"action": [0, 0.1]}'],
        cwd=tmp_path,
        env=_env(MAX_ARRAY=2, THROTTLE=8, **fake_sbatch),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    log = (tmp_path / "log").read_text().splitlines()
    assert len(log) == 3
    first, second, final = log
    quoted_window = 'chunk=\\{\\"action\\":\\ \\[0\\,\\ 0.1\\]\\}'
    assert first.startswith("--parsable --array=0-1%8 ") and "pack_mixture.sbatch --window " + quoted_window in first
    assert first.endswith("| SOURCES=sources.txt DST=s3://b/mix INDEX_OFFSET=0 PARTS= SRC=")
    assert second.startswith("--parsable --array=0-0%8 ") and "INDEX_OFFSET=2 " in second
    assert final.startswith("--parsable --dependency=afterany:101:102 ") and final.split(" |")[0].endswith(
        "mixture_create.sbatch"
    )
    assert "mixture create: job 103 (after 101:102)" in result.stdout
    assert (tmp_path / "logs").is_dir()  # SLURM does not create the --output directory

    (tmp_path / "sources.txt").write_text("/p/x\nb/y x\n")
    bad = subprocess.run(
        ["bash", str(SLURM / "submit_mixture.sh"), "sources.txt", "s3://b/mix"],
        cwd=tmp_path,
        env=_env(**fake_sbatch),
        capture_output=True,
        text=True,
    )
    assert (
        bad.returncode == 2 and "sources.txt:2: name 'x'" in bad.stderr and len((tmp_path / "log").read_text().splitlines()) == 3
    )


def test_submit_pack_chains_finalize_after_ok(tmp_path, fake_sbatch):
    result = subprocess.run(
        ["bash", str(SLURM / "submit_pack.sh"), "/data/src", "/data/dst", "4", "--video", "hevc"],
        cwd=tmp_path,
        env=_env(**fake_sbatch),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    array, final = (tmp_path / "log").read_text().splitlines()
    assert array.startswith("--parsable --array=0-3 ") and "pack.sbatch --video hevc |" in array
    assert array.endswith("PARTS=4 SRC=/data/src") and "DST=/data/dst" in array
    assert final.startswith("--parsable --dependency=afterok:101 ") and "finalize.sbatch |" in final
    bad = subprocess.run(
        ["bash", str(SLURM / "submit_pack.sh"), "/s", "/d", "0"],
        cwd=tmp_path,
        env=_env(**fake_sbatch),
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "PARTS must be a positive integer, got '0'" in bad.stderr


def test_task_records_termination_and_config_errors(tmp_path):
    (tmp_path / "sources.txt").write_text("org/slow\n")
    ready = tmp_path / "ready"
    code = (
        "import sys, time, pathlib, lerobot_shards.packer.mixture.task as t\nfrom lerobot_shards.cli import main\n"
        # Python runs a signal handler in the main thread between bytecodes; the kernel may
        # deliver SIGTERM to another thread (numpy's BLAS pool), so one long sleep would not
        # return early. Packing works in short C calls (a frame, a packet): so does this.
        f"def slow(*a):\n    pathlib.Path({str(ready)!r}).touch()\n    for _ in range(600): time.sleep(0.1)\n"
        "t._pack = slow\n"
        f"main(['mixture', 'task', {str(tmp_path / 'mix')!r}, '--sources', {str(tmp_path / 'sources.txt')!r}], prog_name='lerobot-shards')\n"
    )
    task = subprocess.Popen(
        [sys.executable, "-c", code], env=_env(SLURM_ARRAY_TASK_ID=0), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and task.poll() is None:
        time.sleep(0.05)
    task.send_signal(signal.SIGTERM)  # what SLURM sends at the time limit or on scancel
    _, stderr = task.communicate(timeout=60)
    assert task.returncode == 143, stderr
    failure = json.loads((tmp_path / "mix" / "_failures" / "org--slow.json").read_text())
    assert failure["error_type"] == "TaskTerminated" and "SIGTERM" in failure["error"]

    def run(*args, **env):
        return subprocess.run(
            [sys.executable, "-m", "lerobot_shards.cli", "mixture", "task", str(tmp_path / "mix"), *args],
            env=_env(**env),
            capture_output=True,
            text=True,
        )

    outside = run("--sources", str(tmp_path / "sources.txt"), "--index", "1")
    assert outside.returncode == 2 and "index 1 is outside the 1 sources" in outside.stderr
    assert "give --index or run inside a SLURM array" in run("--sources", str(tmp_path / "sources.txt")).stderr
    offset = run("--sources", str(tmp_path / "sources.txt"), "--offset", "5", SLURM_ARRAY_TASK_ID=0)
    assert offset.returncode == 2 and "index 5 is outside" in offset.stderr
    missing = run("--sources", str(tmp_path / "nope.txt"), "--index", "0")
    assert missing.returncode == 2 and "cannot read sources file" in missing.stderr
    # A source that does not exist is a dataset failure, recorded; the task still exits 0.
    (tmp_path / "sources.txt").write_text(f"{tmp_path / 'does-not-exist'}\n")
    gone = run("--sources", str(tmp_path / "sources.txt"), "--index", "0")
    assert gone.returncode == 0 and "FAILED" in gone.stderr
    assert "does-not-exist" in json.loads((tmp_path / "mix" / "_failures" / "does-not-exist.json").read_text())["error"]
