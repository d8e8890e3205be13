"""The wheel (issue 33): built from the repository, installed into a fresh venv, it runs its CLI
and streams a pack outside the checkout through the one import name, ``lerobot_shards``; the
benchmarks are not installed (``benchmarks`` would collide with any other project's)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STREAM = """
import lerobot_shards
from lerobot_shards import BatchLoader, PackedDataset, LeRobotShardsError, PackError
from lerobot_shards.testing import write_tabular_pack
assert "site-packages" in lerobot_shards.__file__, lerobot_shards.__file__
assert issubclass(PackError, LeRobotShardsError)
write_tabular_pack("pack", episodes=6, length=5)
batch = next(iter(BatchLoader(PackedDataset("pack", seed=0), batch_size=8, num_workers=0)))
print("batch", len(batch["index"]))
try:
    import benchmarks
except ImportError:
    print("no benchmarks")
"""


def test_a_wheel_installs_and_streams_outside_the_checkout(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("lerobot_shards-*.whl")
    # One top-level package: `reader` and `packer` are other PyPI projects' names.
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"lerobot_shards"}, tops
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = venv / "bin" / "python"
    # Dependencies (torch, pyarrow, ...) from this environment's site-packages as a plain path:
    # its .pth files (the checkout's editable finder among them) are not run, so reader and
    # packer can only come from the wheel.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    outside = tmp_path / "work"
    outside.mkdir()
    cli = subprocess.run(
        [str(venv / "bin" / "lerobot-shards"), "--help"], cwd=outside, capture_output=True, text=True, timeout=300
    )
    assert cli.returncode == 0 and "pack" in cli.stdout, cli.stderr[-2000:]
    run = subprocess.run([str(python), "-c", STREAM], cwd=outside, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "batch 8" in run.stdout and "no benchmarks" in run.stdout, run.stdout
    installed = {p.name for p in Path(site).iterdir() if not p.name.endswith((".dist-info", ".pth")) and p.name != "__pycache__"}
    assert "lerobot_shards" in installed and not {"reader", "packer"} & installed, installed
