"""Test-session setup shared by every test module."""

import atexit
import os
import shutil
import tempfile

# The pack journal (packer.run.journal) lives outside the destination, by default in the
# user's cache. Tests (and the CLI, SLURM and torchrun processes they start, which inherit
# the environment) get one private journal for the session, so no run reads or leaves
# records in ~/.cache.
if not os.environ.get("LEROBOT_SHARDS_JOURNAL"):
    _journal = tempfile.mkdtemp(prefix="lerobot-shards-journal-")
    os.environ["LEROBOT_SHARDS_JOURNAL"] = _journal
    atexit.register(shutil.rmtree, _journal, ignore_errors=True)
