"""Under an address-space limit the command line's allocators reserve what they use.

pyarrow's mimalloc reserves a 1 GiB arena at its first allocation and glibc a 64 MiB heap per
allocating thread: in the field fuzzer's worker (3 GiB) they held ~1.75 GiB of address space,
and x265, starting last, found no room for its threads. ``lerobot_shards.cli`` fits both to the
limit as it loads (``core/address_space.py``); without a limit nothing changes.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from lerobot_shards.core.address_space import GLIBC_ARENAS, has_room

# What the child does: what the `lerobot-shards` script does first, then load pyarrow, then
# allocate in eight threads; it reports how much address space that took.
CHILD = """
import json, os, resource, sys, threading
limit = int(sys.argv[1])
if limit:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

def mapped():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) * 1024

from lerobot_shards.core.address_space import fit_reservations_to_limit
fit_reservations_to_limit()  # as the lerobot-shards script does first
import pyarrow as pa
before = mapped()
table = pa.table({"x": list(range(100_000))})
after_arrow = mapped()
held = []
together = threading.Barrier(8)
def allocate():
    together.wait()  # all eight alive at once: each would get a heap of its own
    held.append([bytearray(64 << 10) for _ in range(16)])  # below glibc's mmap threshold: heap memory
    together.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"arrow": after_arrow - before, "threads": mapped() - after_arrow,
                  "arena_max": os.environ.get("MALLOC_ARENA_MAX"), "reserve": os.environ.get("MIMALLOC_ARENA_RESERVE")}))
"""
MIB = 1 << 20


FITTED = ("MIMALLOC_ARENA_RESERVE", "MALLOC_ARENA_MAX", "OPENBLAS_NUM_THREADS")


def _child(limit: int) -> dict:
    """The child's figures under ``limit`` bytes of address space (0: none), started without
    the variables the fit sets, whatever this process has."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    if hard != resource.RLIM_INFINITY and (limit == 0 or limit > hard):
        pytest.skip(f"this process runs under a hard address-space limit ({hard} bytes)")

    def unlimited() -> None:
        if limit == 0:
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    env = {k: v for k, v in os.environ.items() if k not in FITTED}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(limit)], capture_output=True, text=True, timeout=300, env=env, preexec_fn=unlimited
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_under_a_limit_the_allocators_reserve_what_they_use_and_without_one_nothing_changes():
    limited = _child(3 << 30)
    free = _child(0)
    # Without a limit, mimalloc's 1 GiB arena and a heap per thread are there: the child sees
    # what the limit guards against, so the limited figures below can fail.
    assert free["arrow"] >= 1024 * MIB and free["threads"] >= 4 * 64 * MIB, free
    assert free["arena_max"] is None and free["reserve"] is None, free
    assert limited["arrow"] < 256 * MIB, limited
    assert limited["threads"] <= GLIBC_ARENAS * 64 * MIB + 64 * MIB, limited
    assert limited["arena_max"] == str(GLIBC_ARENAS) and limited["reserve"] == "64MiB", limited


def test_room_is_the_kernels_verdict_under_the_limit():
    script = (
        "import resource; from lerobot_shards.core.address_space import has_room\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.getrlimit(resource.RLIMIT_AS)[1]))\n"
        "print(has_room(1 << 20), has_room(2 << 30))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]
    assert has_room(1 << 20)
