"""The fast tier (`make test-fast`) leaves out exactly what starts real servers or processes
(tests/conftest.py marks them `system` from their fixtures, modules and calls)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tiers(tmp_path) -> dict[str, set[str]]:
    """One collection of the whole suite: each test's tier markers (tests/conftest.py writes
    them when LEROBOT_SHARDS_TIERS_TO is set); a marker expression (-m) selects by the same."""
    listing = tmp_path / "tiers.tsv"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "LEROBOT_SHARDS_TIERS_TO": str(listing)},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line.split("\t") for line in listing.read_text().splitlines()]
    markers = {nodeid: set(filter(None, tiers.split(","))) for nodeid, tiers in rows}
    collected = {line.strip() for line in result.stdout.splitlines() if "::" in line}
    assert collected == set(markers), "the listing is the collection"
    return {
        "system": {t for t, m in markers.items() if "system" in m},
        "fast": {t for t, m in markers.items() if "system" not in m},
        "unit": {t for t, m in markers.items() if "unit" in m},
        "everything": set(markers),
    }


@pytest.fixture(scope="module")
def tiers(tmp_path_factory):
    return _tiers(tmp_path_factory.mktemp("tiers"))


def test_system_tests_are_out_of_the_fast_tier_and_nothing_is_lost(tiers):
    fast, system, everything = tiers["fast"], tiers["system"], tiers["everything"]
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


def test_the_unit_tier_is_the_pure_layers_alone(tiers):
    unit, fast = tiers["unit"], tiers["fast"]
    assert unit and unit <= fast  # pure tests start nothing
    modules = {t.split("::")[0] for t in unit}
    assert {"tests/reader/test_epoch_plan.py", "tests/reader/test_pool_schedule.py", "tests/reader/test_resume.py"} <= modules
    # Anything that makes packs, reads files or decodes is not a unit test.
    assert not modules & {
        "tests/reader/test_batch_loader.py",
        "tests/reader/test_decode_stage.py",
        "tests/reader/test_reader_split.py",
    }


def test_a_helper_that_starts_processes_puts_its_tests_in_the_system_tier(tiers):
    """The lint tests start ruff and pyright through the module's `_run` helper (issue 56 row 18:
    they ran in the fast tier); tests with DataLoader workers beyond 4 count too."""
    assert "tests/contracts/test_lint.py::test_the_package_type_checks" in tiers["system"]
