"""The fast tier (`make test-fast`) leaves out exactly what starts real servers or processes
(tests/conftest.py marks them `system` from their fixtures, modules and calls)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _collected(marker: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def test_system_tests_are_out_of_the_fast_tier_and_nothing_is_lost():
    fast, system = _collected("not system"), _collected("system")
    everything = _collected("system or not system")
    assert fast and system and not (fast & system) and fast | system == everything
    assert any(t.startswith("tests/core/test_s3.py::") for t in system) and not any(
        t.startswith("tests/core/test_s3.py::") for t in fast
    )
    assert any(t.startswith("tests/packer/test_slurm_cluster.py::") for t in system)
    assert (
        "tests/contracts/test_tiers.py::test_system_tests_are_out_of_the_fast_tier_and_nothing_is_lost" in system
    )  # it starts pytest
    # A pure planning test stays in the inner loop.
    assert any(t.startswith("tests/reader/test_epoch_plan.py::") for t in fast)
    assert not any(t.startswith("tests/reader/test_epoch_plan.py::") for t in system)


def test_the_unit_tier_is_the_pure_layers_alone():
    unit, fast = _collected("unit"), _collected("not system")
    assert unit and unit <= fast  # pure tests start nothing
    modules = {t.split("::")[0] for t in unit}
    assert {"tests/reader/test_epoch_plan.py", "tests/reader/test_pool_schedule.py", "tests/reader/test_resume.py"} <= modules
    # Anything that makes packs, reads files or decodes is not a unit test.
    assert not modules & {
        "tests/reader/test_batch_loader.py",
        "tests/reader/test_decode_stage.py",
        "tests/reader/test_reader_split.py",
    }
