"""The mixture packing array without SLURM: each array task runs as SLURM would run it (same
module, same arguments), one source is broken, the rest complete and the final step reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from lerobot_shards.cli import main as cli
from lerobot_shards.testing import SampleSpec, write_sample_dataset

ROOT = Path(__file__).resolve().parents[2]


def test_array_packs_good_datasets_and_reports_the_broken_one(tmp_path):
    for name in ("alpha", "beta"):
        write_sample_dataset(tmp_path / "src" / name, SampleSpec(episodes=2, max_length=8))
    broken = tmp_path / "src" / "broken"
    broken.mkdir(parents=True)
    (tmp_path / "sources.txt").write_text(
        f"# a mixture\n{tmp_path / 'src' / 'alpha'}\n{broken}   # no meta/info.json\n\n{tmp_path / 'src' / 'beta'}\n"
    )
    dst = tmp_path / "mix"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for task in range(3):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "lerobot_shards.cli",
                "mixture",
                "task",
                str(dst),
                "--sources",
                str(tmp_path / "sources.txt"),
                "--index",
                str(task),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr  # a failure never fails the array task
    failure = json.loads((dst / "_failures" / "broken.json").read_text())
    assert "meta/info.json: missing" in failure["error"]
    runner = CliRunner()
    assert runner.invoke(cli, ["mixture", "create", str(dst)]).exit_code == 1  # broken is left out
    result = runner.invoke(cli, ["mixture", "create", str(dst), "--allow-partial"])
    assert result.exit_code == 0 and "2 datasets" in result.output
    assert "FAILED broken" in result.output
    spec = json.loads((dst / "mixture.json").read_text())
    assert [d["name"] for d in spec["datasets"]] == ["alpha", "beta"]
    from lerobot_shards import MixtureDataset

    assert len(MixtureDataset(str(dst / "mixture.json"))) == sum(d["anchors"] for d in spec["datasets"])
    strict = runner.invoke(cli, ["mixture", "create", str(dst), "--strict"])
    # Refused; the mixture.json a trainer reads is left as it was, and the message says what it holds.
    assert strict.exit_code != 0 and "the existing mixture.json is unchanged (it lists 2 datasets (alpha, beta)" in strict.output
    assert json.loads((dst / "mixture.json").read_text()) == spec and not (dst / "mixture.json.previous").exists()
    # Re-running a finished task skips the verified dataset.
    rerun = subprocess.run(
        [
            sys.executable,
            "-m",
            "lerobot_shards.cli",
            "mixture",
            "task",
            str(dst),
            "--sources",
            str(tmp_path / "sources.txt"),
            "--index",
            "0",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "already packed and verified" in rerun.stdout


def test_sbatch_scripts_parse():
    for script in sorted((ROOT / "slurm").glob("*.sbatch")):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script
