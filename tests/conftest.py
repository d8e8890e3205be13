"""Test-session setup shared by every test module."""

import atexit
import os
import shutil
import tempfile

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
import pytest  # noqa: E402

SYSTEM_FIXTURES = frozenset({"s3_server", "s3_bucket", "faulty_s3", "hub"})
SYSTEM_MODULES = frozenset({
    "test_clean_exit", "test_hub_http", "test_mixture_scale", "test_slurm_cluster", "test_slurm_mixture", "test_slurm_scripts",
    "test_tiers", "test_torchrun_resume", "test_torchrun_split", "test_train",
})


# Calls in a test's own code that start processes: a child measuring memory, a CLI or trainer
# run, DataLoader workers. Only the test function's source is read: a module whose helpers start
# processes for its tests belongs in SYSTEM_MODULES.
SYSTEM_CALLS = ("run_measured(", "subprocess.", "num_workers=1", "num_workers=2", "num_workers=3", "num_workers=4", "Process(")


def _starts_processes(item) -> bool:
    import inspect

    function = getattr(item, "function", None)
    try:
        source = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        return False
    return any(call in source for call in SYSTEM_CALLS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
        if (SYSTEM_FIXTURES & set(getattr(item, "fixturenames", ())) or module in SYSTEM_MODULES or item.get_closest_marker("slow")
                or _starts_processes(item)):
            item.add_marker(pytest.mark.system)
