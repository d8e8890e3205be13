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


# The tail stays short (issue 67): a parser or a rule reads best as small named steps, so a new
# rule lands in a step of its own instead of growing the largest function. Test-data builders
# (lerobot_shards/testing) are exempt: they spell out datasets.
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 400


def oversized(paths) -> list[str]:
    """``file:name lines`` of every function longer than ``MAX_FUNCTION_LINES`` and every class
    longer than ``MAX_CLASS_LINES`` (AST extents, docstrings included), largest first."""
    import ast

    found = []
    for path in paths:
        for node in ast.walk(ast.parse(Path(path).read_text())):
            size = (getattr(node, "end_lineno", 0) or 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and size > MAX_FUNCTION_LINES:
                found.append((size, f"{path}:{node.name} {size} lines"))
            elif isinstance(node, ast.ClassDef) and size > MAX_CLASS_LINES:
                found.append((size, f"{path}:class {node.name} {size} lines"))
    return [line for _, line in sorted(found, reverse=True)]


def test_no_function_over_80_lines_and_no_class_over_400(tmp_path):
    package = [p for p in sorted((ROOT / "lerobot_shards").rglob("*.py")) if "testing" not in p.relative_to(ROOT).parts]
    too_long = oversized(package)
    assert not too_long, "split these into named steps:\n" + "\n".join(too_long)
    # The check can fail: a function of 81 lines is named.
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 80)
    assert oversized([long]) == [f"{long}:f 81 lines"]
