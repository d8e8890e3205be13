"""The public face (issue 43): ``lerobot_shards`` names what a user needs, lazily at run time and
statically for IDEs and type checkers; every error a public docstring names is importable from
it; test helpers live in ``lerobot_shards.testing``, not in the face."""

from __future__ import annotations

import ast
import builtins
import inspect
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import lerobot_shards
import lerobot_shards.testing

ROOT = Path(__file__).resolve().parents[2]
FACE = ROOT / "lerobot_shards" / "__init__.py"


def static_names(source: str) -> set[str]:
    """The names the face's ``if TYPE_CHECKING:`` block imports (what static tools see)."""
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), "the static block only imports"
                for alias in stmt.names:
                    # `X as X` is PEP 484's explicit re-export: without it a checker treats the name as private.
                    assert alias.asname == alias.name, f"write `{alias.name} as {alias.name}`"
                    names.add(alias.name)
    return names


def test_the_static_face_names_exactly_the_runtime_face():
    static = static_names(FACE.read_text())
    assert static == set(lerobot_shards.__all__), (
        sorted(static - set(lerobot_shards.__all__)),
        sorted(set(lerobot_shards.__all__) - static),
    )
    # ... and each static import names the module the lazy table loads it from.
    modules = {
        alias.name: stmt.module
        for node in ast.parse(FACE.read_text()).body
        if isinstance(node, ast.If)
        for stmt in node.body
        for alias in stmt.names
    }
    table = {name: module for module, names in lerobot_shards._EXPORTS.items() for name in names}
    assert modules == table


def test_the_face_is_small_and_holds_no_test_helpers():
    assert len(lerobot_shards.__all__) <= 80
    assert not set(lerobot_shards.__all__) & set(lerobot_shards.testing.__all__)
    assert {"write_sample_dataset", "tiny_member", "write_tabular_pack"} <= set(lerobot_shards.testing.__all__)


ERROR_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Warning|Interrupted))\b")


def errors_named_but_not_exported(objects: dict[str, object], exported: set[str]) -> dict[str, set[str]]:
    """``{error name: {public names whose docstrings name it}}`` for each error a docstring of
    ``objects`` (or of a class's methods) names that neither ``exported`` nor builtins hold."""
    missing: dict[str, set[str]] = {}
    for name, obj in objects.items():
        docs = [inspect.getdoc(obj) or ""]
        if inspect.isclass(obj):
            docs += [member.__doc__ for member in vars(obj).values() if callable(member) and member.__doc__]
        for doc in docs:
            for error in ERROR_NAME.findall(doc):
                if error not in exported and not hasattr(builtins, error):
                    missing.setdefault(error, set()).add(name)
    return missing


def test_every_error_a_public_docstring_names_is_exported():
    objects = {name: getattr(lerobot_shards, name) for name in lerobot_shards.__all__}
    assert "ArgumentError" in (inspect.getdoc(lerobot_shards.PackedDataset) or "") + str(
        lerobot_shards.PackedDataset.__init__.__doc__
    )
    assert errors_named_but_not_exported(objects, set(lerobot_shards.__all__)) == {}

    def documented():
        """Raises:
        GhostError: never exported."""

    assert errors_named_but_not_exported({"documented": documented}, set(lerobot_shards.__all__)) == {
        "GhostError": {"documented"}
    }


def test_a_type_checker_resolves_the_public_names(tmp_path):
    """pyright, as an IDE runs it, sees the classes and the function's signature (not Unknown)."""
    pyright = shutil.which("pyright", path=str(Path(sys.executable).parent))
    assert pyright, "pyright is part of the test extra (pip install -e '.[test]')"
    (tmp_path / "use.py").write_text(
        "from lerobot_shards import ArgumentError, BatchLoader, PackedDataset, pack_dataset\n"
        "reveal_type(PackedDataset)\nreveal_type(BatchLoader)\nreveal_type(pack_dataset)\nreveal_type(ArgumentError)\n"
    )
    # The checkout on the search path, as an editable install's source would be for an IDE.
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({"extraPaths": [str(ROOT)], "pythonVersion": "3.11"}))
    result = subprocess.run(
        [pyright, "--outputjson", "--pythonpath", sys.executable, "use.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(result.stdout)
    said = {d["range"]["start"]["line"]: d["message"] for d in report["generalDiagnostics"]}
    errors = [d["message"] for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert not errors, errors
    assert said[1] == 'Type of "PackedDataset" is "type[PackedDataset]"'
    assert said[2] == 'Type of "BatchLoader" is "type[BatchLoader]"'
    assert said[3].startswith('Type of "pack_dataset" is "(src: str | None, dst: str') and said[3].endswith('-> PackReport"')
    assert said[4] == 'Type of "ArgumentError" is "type[ArgumentError]"'
