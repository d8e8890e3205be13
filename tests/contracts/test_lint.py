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


# Library code raises; only the command line prints and picks exit codes (cli/boundary.py).
# The trainer's module prints its own --help (it stands in for lerobot-train's); a pool worker
# whose parent died leaves with os._exit (no user reads it).
LIBRARY_LAYERS = ("core", "reader", "packer", "tools")


def speaks_or_exits(paths) -> list[str]:
    """``file:line what`` of every ``print(...)``, ``sys.exit(...)``, ``raise SystemExit`` and
    write to ``sys.stdout``/``sys.stderr`` in ``paths``."""
    import ast

    found = []
    for path in paths:
        for node in ast.walk(ast.parse(Path(path).read_text())):
            what = ""
            if isinstance(node, ast.Call):
                func = ast.unparse(node.func)
                if func in ("print", "sys.exit", "exit") or func.startswith(("sys.stdout.", "sys.stderr.")):
                    what = func
            elif isinstance(node, ast.Raise) and node.exc is not None and "SystemExit" in ast.unparse(node.exc):
                what = "raise SystemExit"
            if what:
                found.append((node.lineno, f"{path}:{node.lineno} {what}"))
    return [line for _, line in sorted(found)]


def test_library_code_raises_and_never_prints_or_exits(tmp_path):
    package = [p for layer in LIBRARY_LAYERS for p in sorted((ROOT / "lerobot_shards" / layer).rglob("*.py"))]
    spoken = speaks_or_exits(package)
    assert not spoken, "raise an error of ours (or return a result) and let the CLI print:\n" + "\n".join(spoken)
    speaker = tmp_path / "speaker.py"
    speaker.write_text("import sys\nprint('x')\nsys.stderr.write('y')\nraise SystemExit(2)\n")
    assert speaks_or_exits([speaker]) == [f"{speaker}:2 print", f"{speaker}:3 sys.stderr.write", f"{speaker}:4 raise SystemExit"]
