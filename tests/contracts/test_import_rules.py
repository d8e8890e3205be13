"""The layers of ``reader`` and ``packer`` hold at the import level (docs/ARCHITECTURE.md).

Every ``import`` in both packages is read (module level, inside functions and under
``TYPE_CHECKING`` alike) and checked against ``RULES``: which layers each layer may import,
and which third-party libraries it may not. Also: ``reader`` never imports ``packer``, no
module imports its own package's public face, and no two modules import each other, however
indirectly. The checker itself is tested on a tree with an arrow against the rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The layer of a module: the longest prefix in this table that names it. The package's folders
# are its layers: core (what both halves share), reader, packer, train (LeRobot's trainer),
# cli, testing (synthetic data); a layer's sub-packages are layers of their own.
P = "lerobot_shards"
LAYERS = {
    f"{P}.core.errors": "core.errors",
    f"{P}.core.exports": "core.exports",
    f"{P}.core.option_fields": "core.option_fields",
    f"{P}.core.format": "core.format",
    f"{P}.core.storage": "core.storage",
    f"{P}.core.windows": "core.windows",
    f"{P}.core.pack": "core.pack",
    f"{P}.core.address_space": "core.address_space",
    f"{P}.core": "core.face",
    f"{P}.reader.read_options": "reader.read_options",
    f"{P}.reader.plan": "reader.plan",
    f"{P}.reader.fetch": "reader.fetch",
    f"{P}.reader.decode": "reader.decode",
    f"{P}.reader.runtime": "reader.runtime",
    f"{P}.reader": "reader.api",  # reader/__init__, dataset, mixture, loader, epoch_stream, lerobot_meta
    f"{P}.packer.errors": "packer.base",
    f"{P}.packer.version": "packer.base",
    f"{P}.packer.options": "packer.options",
    f"{P}.packer.plan": "packer.plan",
    f"{P}.packer.source": "packer.source",
    f"{P}.packer.shard": "packer.shard",
    f"{P}.packer.run": "packer.run",
    f"{P}.packer.verify_pack": "packer.verify",
    f"{P}.packer.mixture": "packer.mixture",
    f"{P}.packer": "packer.face",  # packer/__init__: lazy names only
    f"{P}.tools": "tools",
    f"{P}.testing": "testing",
    f"{P}.train.__main__": "face",  # an entry point: `python -m lerobot_shards.train` runs the CLI's `train`
    f"{P}.train": "train",
    f"{P}.cli": "cli",
    P: "face",  # lerobot_shards/__init__ and __main__
}

CORE = {
    "core.errors",
    "core.exports",
    "core.option_fields",
    "core.format",
    "core.storage",
    "core.windows",
    "core.pack",
    "core.address_space",
}
READER = {"reader.read_options", "reader.plan", "reader.fetch", "reader.decode", "reader.runtime", "reader.api"}
PACKER = {
    "packer.base",
    "packer.options",
    "packer.plan",
    "packer.source",
    "packer.shard",
    "packer.run",
    "packer.verify",
    "packer.mixture",
}

# What each layer may import (besides its own modules). Everything else of ours is an arrow
# against the layering, with no exception: the table is a DAG (checked below), no layer reaches
# back up, the core imports neither half, the reader never the packer and the packer never the
# reader (what both read of a pack is core.pack's, window math core.windows'); the tools that
# decode sit above both.
RULES: dict[str, set[str]] = {
    "core.errors": set(),
    "core.exports": set(),
    "core.option_fields": {"core.errors"},
    "core.format": {"core.errors", "core.address_space"},
    "core.storage": {"core.errors", "core.format", "core.address_space"},
    "core.windows": {"core.errors"},
    "core.pack": {"core.errors", "core.format", "core.storage", "core.windows"},
    "core.address_space": {"core.errors"},  # this process's limits: its cores, RLIMIT_AS and the allocators under it
    "core.face": set(),
    "reader.read_options": {
        "core.errors",
        "core.format",
        "core.option_fields",
        "core.storage",
        "reader.decode",
    },  # decoder names, pins
    "reader.plan": {"core.errors"},
    "reader.fetch": {"core.errors", "core.format", "core.storage", "core.pack"},
    "reader.decode": {"core.errors", "core.format", "core.address_space"},  # decode threads sized to the usable cores
    "reader.runtime": {
        "core.address_space",  # camera threads sized to the usable cores
        "core.errors",
        "core.format",
        "core.storage",
        "core.windows",
        "core.pack",
        "reader.plan",
        "reader.fetch",
        "reader.decode",
        "reader.read_options",
    },
    "reader.api": CORE | {"reader.read_options", "reader.plan", "reader.fetch", "reader.decode", "reader.runtime"},
    "packer.base": {"core.errors"},
    "packer.options": {"packer.base", "core.errors", "core.option_fields", "core.format", "core.storage", "core.windows"},
    "packer.plan": {"packer.base", "packer.options", "core.errors", "core.format"},
    "packer.source": {"packer.base", "core.errors", "core.format", "core.storage", "core.address_space"},
    "packer.shard": {"packer.base", "packer.options", "packer.source", "core.errors", "core.format", "core.address_space"},
    "packer.run": {
        "packer.base",
        "packer.options",
        "packer.plan",
        "packer.source",
        "packer.shard",
        "core.errors",
        "core.option_fields",
        "core.format",
        "core.storage",
        "core.windows",
        "core.pack",
    },
    "packer.verify": {
        "packer.base",
        "packer.options",
        "core.errors",
        "core.format",
        "core.storage",
        "core.windows",
        "core.pack",
        "core.address_space",
    },
    "packer.mixture": {
        "core.address_space",  # scan processes sized to the usable cores
        "packer.base",
        "packer.options",
        "core.option_fields",  # scan_datasets/create_mixture take MixtureScan by name, as pack_dataset takes PackOptions
        "packer.run",
        "packer.verify",
        "core.errors",
        "core.format",
        "core.storage",
        "core.pack",
    },
    "packer.face": set(),
    "testing": {"packer.base", "packer.source", "packer.shard", "core.errors", "core.format"},
    "tools": CORE | READER,  # reads packs and decodes their frames; never the packer
    "train": CORE | READER,
    "cli": CORE | PACKER | {"testing", "train", "tools"},
    "face": CORE | READER | PACKER | {"tools", "cli"},  # __init__ names the public face (statically too); __main__ runs the CLI
}

# Every package face is a lazy table (``core.exports.lazy_exports``): any layer may use it.
for _layer, _allowed in RULES.items():
    if _layer != "core.exports":
        _allowed.add("core.exports")

# Libraries a layer may not import: planning is pure (no I/O, no processes, no torch); shard
# building has no storage and no processes; packing nodes never load torch.
_IO = {
    "fsspec",
    "s3fs",
    "botocore",
    "aiobotocore",
    "aiohttp",
    "boto3",
    "av",
    "torchcodec",
    "duckdb",
    "huggingface_hub",
    "requests",
    "socket",
    "subprocess",
    "multiprocessing",
    "concurrent",
    "threading",
    "pyarrow.parquet",
    "tempfile",
}
FORBIDDEN_LIBRARIES: dict[str, set[str]] = {
    "reader.plan": _IO | {"torch", "pyarrow"},
    "core.windows": _IO | {"torch", "pyarrow"},
    "core.pack": {"torch", "av", "torchcodec"},
    "core.errors": _IO | {"torch", "pyarrow"},
    "core.option_fields": _IO | {"torch", "pyarrow"},
    "cli": {"torch"},
    "packer.plan": _IO | {"torch", "pyarrow"},
    "packer.options": _IO | {"torch"},
    "packer.shard": {"fsspec", "s3fs", "botocore", "aiohttp", "multiprocessing", "concurrent", "subprocess", "torch"},
    "packer.source": {"torch"},
    "packer.run": {"torch"},
    "packer.mixture": {"torch"},
    "core.format": {"torch", "fsspec", "av", "torchcodec"},
    "core.storage": {"torch", "av", "torchcodec", "pyarrow"},
}


@dataclass(frozen=True)
class Arrow:
    source: str  # importing module
    target: str  # imported module (ours) or library
    line: int


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def read_arrows(files: dict[str, str], known: set[str]) -> list[Arrow]:
    """Every import of every module (``{module name: source}``), resolved to our modules where
    it names one (``from a.b import c`` is ``a.b.c`` when that is a module, else ``a.b``)."""
    arrows = []
    for module, source in files.items():
        package = module if module in known and _is_package(module, known) else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                arrows += [Arrow(module, alias.name, node.lineno) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    arrows.append(Arrow(module, full if full in known else base, node.lineno))
    return arrows


def _is_package(module: str, known: set[str]) -> bool:
    return any(other.startswith(module + ".") for other in known)


def layer_of(module: str) -> str | None:
    best = None
    for prefix in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return LAYERS[best] if best is not None else None


def violations(files: dict[str, str]) -> list[str]:
    """Every arrow against the rules, the library bans, or the face rule, as text."""
    known = set(files)
    problems = []
    for arrow in read_arrows(files, known):
        source_layer = layer_of(arrow.source)
        if arrow.target.split(".")[0] == P:
            target_layer = layer_of(arrow.target)
            own_face = arrow.target == arrow.source.rpartition(".")[0] and _is_package(arrow.target, known)
            if own_face and not arrow.source.endswith(".__main__"):
                problems.append(f"{arrow.source}:{arrow.line} imports its own package's face {arrow.target}")
            if target_layer == source_layer:
                continue
            if target_layer not in RULES.get(source_layer, set()):
                problems.append(f"{arrow.source}:{arrow.line} ({source_layer}) imports {arrow.target} ({target_layer})")
            continue
        banned = FORBIDDEN_LIBRARIES.get(source_layer, set())
        if any(arrow.target == lib or arrow.target.startswith(lib + ".") for lib in banned):
            problems.append(f"{arrow.source}:{arrow.line} ({source_layer}) imports {arrow.target}, which this layer may not")
    return problems


def cycles(files: dict[str, str]) -> list[list[str]]:
    """Circles of modules importing each other (package faces excepted: a face imports its own
    modules by design, and nothing may import its own face)."""
    known = set(files)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for arrow in read_arrows(files, known):
        if arrow.target in known and arrow.target != arrow.source and not _is_package(arrow.source, known):
            graph[arrow.source].add(arrow.target)
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def project_files() -> dict[str, str]:
    files = {}
    for path in sorted((ROOT / P).rglob("*.py")):
        files[module_name(path, ROOT)] = path.read_text()
    return files


def test_every_module_has_a_layer_with_rules():
    files = project_files()
    unplaced = [m for m in files if layer_of(m) not in RULES]
    assert not unplaced, f"modules without a layer in LAYERS/RULES: {unplaced}"


def test_the_rules_form_a_dag():
    state: dict[str, int] = {}

    def visit(layer: str, path: list[str]) -> None:
        assert state.get(layer) != 1, f"the rules have a circle: {' -> '.join(path + [layer])}"
        if state.get(layer) == 2:
            return
        state[layer] = 1
        for nxt in RULES[layer]:
            visit(nxt, path + [layer])
        state[layer] = 2

    for layer in RULES:
        visit(layer, [])


def test_imports_follow_the_layers():
    problems = violations(project_files())
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_no_module_circles():
    found = cycles(project_files())
    assert not found, "modules importing each other:\n" + "\n".join(" -> ".join(c) for c in found)


def test_reader_never_imports_packer():
    files = project_files()
    arrows = read_arrows(files, set(files))
    bad = [
        f"{a.source}:{a.line} imports {a.target}"
        for a in arrows
        if a.source.startswith(f"{P}.reader") and a.target.startswith(f"{P}.packer")
    ]
    assert not bad, bad


def test_the_checker_reports_an_arrow_against_the_rules():
    """The checks above can fail: an upward arrow, a banned library, a circle and a face
    import in a copy of the tree are each reported."""
    files = project_files()
    files["lerobot_shards.packer.plan.shard_plan"] += "\nfrom lerobot_shards.packer.run.pack import pack_dataset\nimport fsspec\n"
    files["lerobot_shards.reader.plan.world"] += "\ndef later():\n    from lerobot_shards.reader.dataset import PackedDataset\n"
    files["lerobot_shards.reader.fetch.prefetch"] += "\nfrom lerobot_shards.packer.errors import PackError\n"
    files["lerobot_shards.packer.shard.build"] += "\nfrom lerobot_shards.packer.shard import cut_episode\n"
    problems = "\n".join(violations(files))
    assert (
        "lerobot_shards.packer.plan.shard_plan" in problems and "imports lerobot_shards.packer.run.pack (packer.run)" in problems
    )
    assert "imports fsspec, which this layer may not" in problems
    assert "lerobot_shards.reader.plan.world" in problems and "imports lerobot_shards.reader.dataset (reader.api)" in problems
    assert "lerobot_shards.reader.fetch.prefetch" in problems and "imports lerobot_shards.packer.errors (packer.base)" in problems
    assert (
        "lerobot_shards.packer.shard.build" in problems
        and "imports its own package's face lerobot_shards.packer.shard" in problems
    )
    files = project_files()
    files["lerobot_shards.core.format.layout"] += "\nfrom lerobot_shards.core.format.manifest import Manifest\n"
    assert any("lerobot_shards.core.format.layout" in c and "lerobot_shards.core.format.manifest" in c for c in cycles(files))


# -- public faces: what tests, scripts and benchmarks may import -------------------------------
# A face is a package's ``__init__`` (a lazy ``_EXPORTS`` table) or the one module of a
# one-module layer (errors, options, the trainer integration). Tests, scripts and benchmarks
# import names a face lists, or a face's submodule as a module object (to patch its globals).
MODULE_FACES = {
    "lerobot_shards.core.address_space",
    "lerobot_shards.core.errors",
    "lerobot_shards.core.option_fields",
    "lerobot_shards.core.windows",
    "lerobot_shards.reader.read_options",
    "lerobot_shards.train.lerobot_train",
    "lerobot_shards.packer.errors",
    "lerobot_shards.packer.version",
    "lerobot_shards.packer.options",
}
OURS = (P,)


def face_names(files: dict[str, str]) -> dict[str, set[str]]:
    """Every face and the names it offers (a package: its ``_EXPORTS``; a module face: its
    public top-level names)."""
    faces: dict[str, set[str]] = {}
    known = set(files)
    for module, source in files.items():
        tree = ast.parse(source)
        if _is_package(module, known) or module in OURS:
            names: set[str] = set()
            for node in tree.body:
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
                    if isinstance(node.value, ast.Dict):
                        names |= {e.value for v in node.value.values if isinstance(v, ast.List) for e in v.elts}
            faces[module] = names
        elif module in MODULE_FACES:
            faces[module] = {
                n.id
                for node in tree.body
                if isinstance(node, (ast.Assign, ast.AnnAssign))
                for n in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(n, ast.Name) and not n.id.startswith("_")
            }
            faces[module] |= {
                node.name
                for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")
            }
            faces[module] |= {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom) for a in node.names}
    return faces


def face_violations(users: dict[str, str], files: dict[str, str]) -> list[str]:
    """Imports of ours in ``users`` (``{path: source}``) that go past a face."""
    faces, known = face_names(files), set(files)
    problems = []
    for path, source in users.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module.split(".")[0] in OURS:
                if node.module not in faces:
                    problems.append(f"{path}:{node.lineno} imports from {node.module}, not a face")
                    continue
                for alias in node.names:
                    if alias.name not in faces[node.module] and f"{node.module}.{alias.name}" not in known:
                        problems.append(f"{path}:{node.lineno} {node.module} does not list {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in OURS and alias.name not in faces:
                        problems.append(f"{path}:{node.lineno} imports {alias.name}, not a face")
    return problems


def test_tests_scripts_and_benchmarks_import_public_faces_only():
    files = project_files()
    users = {
        str(p.relative_to(ROOT)): p.read_text()
        for folder in ("tests", "scripts", "benchmarks")
        for p in sorted((ROOT / folder).rglob("*.py"))
    }
    problems = face_violations(users, files)
    assert not problems, "imports past a public face:\n" + "\n".join(problems)
    # The check can fail: a deep module path, a name a face does not list, a module import.
    bad = {
        "t.py": "from lerobot_shards.reader.plan.epoch_plan import plan_epoch\nfrom lerobot_shards.reader.plan import EpochPlanX\nimport lerobot_shards.reader.dataset\n"
    }
    assert len(face_violations(bad, files)) == 3


def test_every_package_face_is_one_lazy_table():
    """Every ``__init__.py``: a docstring, then ``_EXPORTS`` made lazy by ``lazy_exports`` and
    nothing defined; every name it lists exists in the module it names, and none is also the
    name of one of its submodules."""
    import importlib

    for path in sorted((ROOT / P).rglob("__init__.py")):
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), f"{path}: say what the package is"
        kinds = [type(node).__name__ for node in tree.body[1:]]
        assert not {"FunctionDef", "ClassDef", "AnnAssign"} & set(kinds), f"{path}: a face defines nothing"
        source = path.read_text()
        if "_EXPORTS" not in source:
            continue
        assert "lazy_exports(__name__, _EXPORTS)" in source, f"{path}: the table is made lazy"
        face = importlib.import_module(module_name(path, ROOT))
        submodules = {p.stem for p in path.parent.glob("*.py")} | {p.parent.name for p in path.parent.glob("*/__init__.py")}
        for module, names in face._EXPORTS.items():
            # A submodule of the same name would replace the name once it is imported.
            assert not submodules & set(names), f"{path}: lists {submodules & set(names)}, also its submodules"
            target = importlib.import_module(module)
            missing = [n for n in names if not hasattr(target, n)]
            assert not missing, f"{path}: {module} has no {missing}"
