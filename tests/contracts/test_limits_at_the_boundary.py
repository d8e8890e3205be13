"""A process limit met anywhere ends in one line that names the limit, with advice that fits
the command, and never in a hang, a crash or a bug report.

Swept under real ``RLIMIT_AS`` values (as ``ulimit -v`` sets them), ``pack --video hevc`` once
met four endings besides success: x265 waiting forever for a thread that never started,
Python's "can't start new thread" reported as an internal error (exit 70), a codec library
that could not be mapped advised as ``pip install _core``, and an out-of-memory line that
advised ``--workers`` to commands that have no such flag.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lerobot_shards import pack_dataset
from lerobot_shards.cli import main as cli
from lerobot_shards.testing import SampleSpec, write_sample_dataset

MIB = 1 << 20
# From below what importing the command line takes to above what packing needs (~0.7 GiB).
LIMITS_MIB = list(range(300, 901, 75))


def _under_limit(limit_mib: int, args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mib * MIB, limit_mib * MIB))

    env = {**os.environ, "TMPDIR": str(tmp)}
    try:
        return subprocess.run(
            [sys.executable, "-m", "lerobot_shards.cli", *args],
            capture_output=True,
            text=True,
            preexec_fn=limit,
            env=env,
            timeout=300,
        )
    except subprocess.TimeoutExpired:  # a hang guard: each run takes seconds
        pytest.fail(f"`lerobot-shards {' '.join(args)}` under a {limit_mib} MiB address-space limit hung")


def _one_limit_line(done: subprocess.CompletedProcess, what: str) -> str:
    """The run's error line, after checking it is the only one and a limit's, not a bug's."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    said = f"{what}: exit {done.returncode}: {done.stderr[-1500:]}"
    assert done.returncode == 1 and len(errors) == 1, said
    assert "Traceback" not in done.stderr and "internal error" not in errors[0] and "pip install" not in errors[0], said
    assert "ulimit -v" in errors[0], said
    return errors[0]


def test_pack_and_verify_under_every_address_space_limit_end_in_a_pack_or_one_limit_line(tmp_path):
    source = tmp_path / "src"
    write_sample_dataset(source, SampleSpec(episodes=3, seed=57))
    packed = tmp_path / "packed"
    pack_dataset(str(source), str(packed), video="hevc")
    temp = tmp_path / "tmp"
    temp.mkdir()
    endings: dict[str, list[str]] = {"pack": [], "verify": []}
    for limit_mib in LIMITS_MIB:
        out = tmp_path / f"out-{limit_mib}"
        done = _under_limit(limit_mib, ["pack", str(source), str(out), "--video", "hevc"], temp)
        if done.returncode == 0:
            endings["pack"].append("packed")
        else:
            _one_limit_line(done, f"pack under {limit_mib} MiB")
            endings["pack"].append("refused")
        done = _under_limit(limit_mib, ["verify", str(packed), "--decode"], temp)
        if done.returncode == 0:
            endings["verify"].append("verified")
        else:
            line = _one_limit_line(done, f"verify under {limit_mib} MiB")
            assert "--workers" not in line, f"verify has no --workers: {line}"
            endings["verify"].append("refused")
    # The sweep spans both endings for each command: the limit bites at its low end, not above.
    for command, seen in endings.items():
        assert seen[0] == "refused" and seen[-1] != "refused", (command, dict(zip(LIMITS_MIB, seen, strict=True)))
    assert not list(temp.iterdir()), f"left in the temp folder: {sorted(p.name for p in temp.iterdir())}"


@pytest.mark.parametrize(
    "raised,said",
    [
        (RuntimeError("can't start new thread"), "could not start a thread"),
        (ImportError("libx265.so.216: failed to map segment from shared object", name="av._core"), "out of memory"),
        (MemoryError(), "out of memory"),
    ],
)
def test_a_limit_is_one_line_whose_advice_fits_the_command(monkeypatch, tmp_path, raised, said):
    from lerobot_shards.packer.mixture import create as mixture_create
    from lerobot_shards.packer.run import pack as pack_run
    from lerobot_shards.tools import summary

    def hit(*args, **kwargs):
        raise raised

    monkeypatch.setattr(summary, "summarize", hit)
    monkeypatch.setattr(pack_run, "pack_dataset", hit)
    monkeypatch.setattr(mixture_create, "create_mixture", hit)
    source = tmp_path / "src"
    write_sample_dataset(source, SampleSpec(episodes=1, seed=1))
    runs = {
        "info": ["info", str(tmp_path)],
        "pack": ["pack", str(source), str(tmp_path / "out")],
        "mixture create": ["mixture", "create", str(tmp_path)],  # a nested group's command
    }
    # A real limit, far above what the commands take, so the line has one to name.
    held = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(1 << 40, held[1]) if held[1] != resource.RLIM_INFINITY else 1 << 40, held[1]))
    try:
        results = {name: CliRunner().invoke(cli, args) for name, args in runs.items()}
    finally:
        resource.setrlimit(resource.RLIMIT_AS, held)
    for name, result in results.items():
        lines = result.output.splitlines()
        assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith(f"Error: {said}"), (name, result.output)
        assert "ulimit -v" in lines[0] and "pip install" not in lines[0], (name, lines)
        assert ("--workers" in lines[0]) == (name == "pack"), (name, lines)


def test_an_odd_error_at_the_limit_is_the_limit_and_elsewhere_a_bug():
    """CPython compiling an unchanged module under 275 MiB raised SyntaxError: at the limit the
    limit is the report (no bug report, no traceback); with room the same error is a bug."""
    script = """
import resource
from lerobot_shards.cli.boundary import error_line
err = SyntaxError("expected ':'")
print("ROOM", error_line(err, workers=False))
with open("/proc/self/status") as status:
    mapped = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024
resource.setrlimit(resource.RLIMIT_AS, (mapped + (16 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
print("LIMIT", error_line(err, workers=False))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said["ROOM"].startswith("internal error, a bug in lerobot-shards: SyntaxError"), said
    assert said["LIMIT"].startswith("out of memory (this process may address") and "--workers" not in said["LIMIT"], said
