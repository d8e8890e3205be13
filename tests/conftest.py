"""Test-session setup shared by every test module."""

import atexit
import gc
import multiprocessing.util
import os
import re
import shutil
import tempfile

import pytest

# Nothing left behind (issue 55 row 9): the session's temp folder is a private one, inherited by
# the xdist workers and every process a test starts (CLI, SLURM, torchrun), so whatever a run
# leaves there is the session's own, whoever else shares /tmp. At the end the controller lists
# what is left besides pytest's own tmp_path folders and the two below and fails the session
# when anything is; on success the folder goes, on failure it stays for a look. Not ours and so
# not judged: torch's compile cache, which importing torchcodec makes (torch._dynamo at import);
# torchrun's log folders (torchelastic_*, which torch leaves by design); Python multiprocessing's
# per-process folder (pymp-*), removed at a clean exit and left by the processes tests kill on
# purpose (our pool makes none: its queue is a pipe, and the staging folders are judged).
SESSION_TEMP_KEEP = (
    "pytest-of-",
    "lerobot-shards-journal-",
    "lerobot-shards-fuzz-counts-",
    "torchinductor_",
    "torchelastic_",
    "pymp-",
)
# Only the process that made the folder judges and removes it: pytest sessions a test starts
# (tests/contracts/test_tiers.py) inherit the variables, and one that removed the folder at its
# end took the running session's temp folder with it.
if not os.environ.get("LEROBOT_SHARDS_TEST_TEMP"):
    os.environ["LEROBOT_SHARDS_TEST_TEMP"] = tempfile.mkdtemp(prefix="lerobot-shards-tests-")
    os.environ["LEROBOT_SHARDS_TEST_TEMP_OWNER"] = str(os.getpid())
    os.environ["TMPDIR"] = os.environ["LEROBOT_SHARDS_TEST_TEMP"]
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


# Python's own probe: the first gettempdir() in a process writes b"blat" to a file of 8 random
# letters, digits or underscores in TMPDIR and removes it. A process a test kills on purpose in
# its first milliseconds (a killed pack's worker, a scancelled job) can die between the two, and
# CI once failed on exactly that file. Recognised by name and content, so a file of ours is judged.
_PROBE_NAME = re.compile(r"[a-z0-9_]{8}")


def _python_temp_probe(folder: str, name: str) -> bool:
    path = os.path.join(folder, name)
    if not _PROBE_NAME.fullmatch(name) or os.path.islink(path) or not os.path.isfile(path):
        return False
    with open(path, "rb") as handle:
        return handle.read(5) == b"blat"


def session_leftovers(folder: str) -> list[str]:
    """What a test session left in its temp folder (names, sorted), less what is not ours."""
    return sorted(
        name for name in os.listdir(folder) if not name.startswith(SESSION_TEMP_KEEP) and not _python_temp_probe(folder, name)
    )


# The pack journal (lerobot_shards.packer.run.journal) lives outside the destination, by default in the
# user's cache. Tests (and the CLI, SLURM and torchrun processes they start, which inherit
# the environment) get one private journal for the session, so no run reads or leaves
# records in ~/.cache.
if not os.environ.get("LEROBOT_SHARDS_JOURNAL"):
    _journal = tempfile.mkdtemp(prefix="lerobot-shards-journal-")
    os.environ["LEROBOT_SHARDS_JOURNAL"] = _journal
    atexit.register(shutil.rmtree, _journal, ignore_errors=True)


# -- tiers ----------------------------------------------------------------------------------------
# `make test` runs everything. `make test-fast` leaves out the system tier: tests that start real
# servers or processes (an S3 server, a Hub server, a SLURM cluster, torchrun, CLI and trainer
# subprocesses) and the long end-to-end ones. What puts a test there is what it uses, read from
# its fixtures and module, so a new test lands in the right tier without anyone marking it.

# The field fuzzer's workers (pytest-xdist processes inherit this) leave their counts here; the
# session's summary prints them (tests/contracts/test_field_fuzz.py).
if not os.environ.get("LEROBOT_SHARDS_FUZZ_COUNTS"):
    _counts = tempfile.mkdtemp(prefix="lerobot-shards-fuzz-counts-")
    os.environ["LEROBOT_SHARDS_FUZZ_COUNTS"] = _counts
    atexit.register(shutil.rmtree, _counts, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    """Fail the session when a test or a process it started left something in the temp folder."""
    if os.environ.get("LEROBOT_SHARDS_TEST_TEMP_OWNER") != str(os.getpid()):
        return  # an xdist worker, or a session a test started: the session that made the folder judges
    folder = os.environ["LEROBOT_SHARDS_TEST_TEMP"]
    left = session_leftovers(folder)
    if left:
        session.config._lerobot_shards_leftovers = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif exitstatus == 0:
        # After multiprocessing's own exit cleanup (priority -100), which removes the pymp-*
        # folder a fork server made in this process: removed first, that cleanup printed a traceback.
        multiprocessing.util.Finalize(None, shutil.rmtree, args=(folder,), kwargs={"ignore_errors": True}, exitpriority=-101)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The field fuzzer's mutations per file type and outcomes, summed over the processes."""
    import json
    from collections import Counter
    from pathlib import Path

    left = getattr(config, "_lerobot_shards_leftovers", None)
    if left:
        folder = os.environ["LEROBOT_SHARDS_TEST_TEMP"]
        terminalreporter.write_line(
            f"FAILED: the session left {len(left)} item(s) in its temp folder {folder}: {left[:10]}", red=True
        )
    counts, outcomes, seeds = Counter(), Counter(), set()
    for path in Path(os.environ["LEROBOT_SHARDS_FUZZ_COUNTS"]).glob("*.json"):
        record = json.loads(path.read_text())
        counts.update(record["counts"])
        outcomes.update(record["outcomes"])
        seeds.add(record.get("seed"))
    if counts:
        per_target = ", ".join(f"{target} {n}" for target, n in sorted(counts.items()))
        said = ", ".join(f"{kind} {n}" for kind, n in sorted(outcomes.items()))
        seed = ", ".join(str(s) for s in sorted(seeds, key=str))
        terminalreporter.write_line(
            f"field fuzz: {sum(counts.values())} mutations ({per_target}); outcomes: {said}; "
            f"seed {seed} (LEROBOT_SHARDS_FIELD_FUZZ_SEED={seed} reproduces the sweep)"
        )


SYSTEM_FIXTURES = frozenset({"s3_server", "s3_bucket", "faulty_s3", "hub"})
SYSTEM_MODULES = frozenset(
    {
        "test_clean_exit",
        "test_field_fuzz",
        "test_hub_http",
        "test_mixture_scale",
        "test_slurm_cluster",
        "test_slurm_mixture",
        "test_slurm_scripts",
        "test_tiers",
        "test_torchrun_resume",
        "test_torchrun_split",
        "test_train",
    }
)


# Calls that start processes: a child measuring memory, a CLI or trainer run, DataLoader
# workers. Read in the test function's source and in the module's own functions it names (its
# helpers, one level: a `_run` that calls subprocess); a module whose fixtures start processes
# for its tests belongs in SYSTEM_MODULES.
SYSTEM_CALLS = re.compile(r"run_measured\(|subprocess\.|num_workers=[1-9]|Process\(")


def _starts_processes(item) -> bool:
    import ast
    import inspect
    import textwrap

    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return False
    module = item.module
    try:
        named = {n.id for n in ast.walk(ast.parse(textwrap.dedent(source))) if isinstance(n, ast.Name)}
    except SyntaxError:
        named = set()
    for name in sorted(named):
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper.__module__ == getattr(module, "__name__", None) and helper is not function:
            source += inspect.getsource(helper)
    return SYSTEM_CALLS.search(source) is not None


# The unit tier (`make test-unit`): tests of the pure layers alone. A test is there when its
# module imports nothing of ours but those layers (planning, the option machinery and the
# options, the error hierarchy) and it takes no fixture that makes files or processes: pure
# functions on values, seconds for the whole tier.
PURE_LAYERS = (
    "lerobot_shards.reader.plan",
    "lerobot_shards.packer.plan",
    "lerobot_shards.core.option_fields",
    "lerobot_shards.core.errors",
    "lerobot_shards.packer.errors",
    "lerobot_shards.reader.read_options",
    "lerobot_shards.packer.options",
    "tests.work_counter",  # counts executed lines: no files, no processes
)
UNIT_FIXTURES = frozenset({"request", "monkeypatch", "capsys", "caplog", "recwarn", "_no_inherited_decoders"})
_PURE_MODULES: dict[str, bool] = {}


def _imports_only_pure_layers(module) -> bool:
    import ast
    import inspect

    name = module.__name__
    if name not in _PURE_MODULES:
        ours = set()
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ImportFrom) and node.module == "lerobot_shards":
                import lerobot_shards  # the face: each name counts as the module that defines it

                table = {n: m for m, names in lerobot_shards._EXPORTS.items() for n in names}
                ours |= {table.get(a.name, "lerobot_shards") for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                ours |= {node.module} if node.module.split(".")[0] in ("lerobot_shards", "tests") else set()
            elif isinstance(node, ast.Import):
                ours |= {a.name for a in node.names if a.name.split(".")[0] in ("lerobot_shards", "tests")}
        _PURE_MODULES[name] = bool(ours) and all(m.startswith(PURE_LAYERS) for m in ours)
    return _PURE_MODULES[name]


def _is_unit(item) -> bool:
    params = set(getattr(getattr(item, "callspec", None), "params", {}))
    fixtures = set(getattr(item, "fixturenames", ())) - params - UNIT_FIXTURES
    return item.module is not None and not fixtures and _imports_only_pure_layers(item.module)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_unit(item):
            item.add_marker(pytest.mark.unit)
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if (
            SYSTEM_FIXTURES & set(getattr(item, "fixturenames", ()))
            or module in SYSTEM_MODULES
            or item.get_closest_marker("slow")
            or _starts_processes(item)
        ):
            item.add_marker(pytest.mark.system)
    listing = os.environ.get("LEROBOT_SHARDS_TIERS_TO")
    if listing:  # tests/contracts/test_tiers.py: every collected test with its tier markers, one collection
        with open(listing, "w") as out:
            for item in items:
                tiers = [m for m in ("unit", "system") if item.get_closest_marker(m)]
                out.write(f"{item.nodeid}\t{','.join(tiers)}\n")


@pytest.fixture(autouse=True)
def _no_inherited_decoders(request):
    """Collect before each test that starts processes (the system tier: DataLoader workers, pools,
    CLI runs): its children must not inherit an earlier test's PyAV decoder left in a reference
    cycle. A child's collection then frees it without the decoder's threads (dav1d) and hangs in
    avcodec_free_context (seen: test_decode_stage's workers, after packs made in the same xdist
    worker). BatchLoader forks its workers from a frozen heap instead (reader/loader.py:
    start_workers). Only there: a full collection
    costs ~0.15 s with torch loaded."""
    if request.node.get_closest_marker("system") is not None:
        gc.collect()
    yield
