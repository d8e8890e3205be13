"""``make lint`` holds inside the suite too (so ``make test`` alone catches it): ruff's rules
(pyflakes, pycodestyle, import order, bugbear, pyupgrade; configured in pyproject.toml), the
formatter, and pyright over the whole package (pyproject.toml's ``[tool.pyright]``). An undefined name
in a rarely taken error path (a ``hashlib`` left out after a refactor) would otherwise surface
only when a user hits it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATHS = ["lerobot_shards", "scripts", "benchmarks", "tests"]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    assert found, f"{name} is part of the test extra (pip install -e '.[test]')"
    return found


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_rules_pass():
    result = _run(_tool("ruff"), "check", "--no-cache", "--output-format", "concise", *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_tree_is_formatted():
    result = _run(_tool("ruff"), "format", "--check", "--no-cache", *PATHS)
    assert result.returncode == 0, result.stdout + result.stderr + "\n(run: ruff format " + " ".join(PATHS) + ")"


def test_the_package_type_checks():
    # pyproject.toml's [tool.pyright] names what is checked; the environment is this Python's.
    result = _run(_tool("pyright"), "--pythonpath", sys.executable)
    assert result.returncode == 0 and "0 errors" in result.stdout, result.stdout[-4000:] + result.stderr
