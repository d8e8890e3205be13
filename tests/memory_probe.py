"""Peak memory of a snippet, measured in a fresh child process.

``ru_maxrss`` of a child started from a large test process starts at the parent's size (fork
copies it and exec keeps the count), so the child reads its own high-water mark (``VmHWM``
in /proc/self/status), which exec resets with the new address space.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The memory budget of every process that reads untrusted input (docs/SECURITY.md, "Bounds"):
# resident at most HOSTILE_PEAK_BYTES (measured: VmHWM), inside an address space of at most
# ADDRESS_SPACE_BYTES (enforced: RLIMIT_AS, so an allocation past it fails in the act, as on a
# cluster node under `ulimit -v`, instead of being read afterwards). Such a process (the fuzz
# worker) holds every decoder and the LeRobot oracle: torch, torchcodec (which maps each FFmpeg
# it tries), PyAV, pyarrow and DuckDB map ~1.5 GiB of address space and ~450 MiB resident.
# An honest command alone (pack, check, verify, a read, a mixture) fits HONEST_ADDRESS_SPACE_BYTES
# (tests/contracts/test_virtual_memory_limit.py).
HOSTILE_PEAK_BYTES = 1 << 30
ADDRESS_SPACE_BYTES = 3 << 30
HONEST_ADDRESS_SPACE_BYTES = 2 << 30


def limit_address_space(limit: int = ADDRESS_SPACE_BYTES) -> None:
    """``preexec_fn`` of a child process: its address space bounded at ``limit``."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


_WRAPPER = """
import sys, traceback
outcome = "ok"
try:
{body}
except BaseException as err:
    outcome = type(err).__name__ + ": " + str(err)
    if not isinstance(err, Exception) or type(err).__module__ == "builtins":
        traceback.print_exc()
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print("OUTCOME", outcome.replace("\\n", " | "))
print("PEAK_KB", peak)
"""


@dataclass(frozen=True)
class Measured:
    """What the child printed, how its code ended (``ok`` or ``Type: message``), its peak."""

    stdout: str
    stderr: str
    outcome: str
    peak_bytes: int


def run_measured(code: str, *args: str, timeout: float = 600, env: dict | None = None) -> Measured:
    """Run ``code`` (a snippet; ``sys.argv[1:]`` are ``args``) in a child Python and measure it.

    A Python exception ends the snippet (its type and message become ``outcome``); a traceback
    is printed to stderr only for built-in exceptions (a crash the caller should see).
    """
    script = _WRAPPER.format(body=textwrap.indent(textwrap.dedent(code), "    "))
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        preexec_fn=limit_address_space,
    )
    lines = result.stdout.splitlines()
    outcome = next((line.removeprefix("OUTCOME ") for line in lines if line.startswith("OUTCOME ")), None)
    peak = next((int(line.split()[1]) * 1024 for line in lines if line.startswith("PEAK_KB ")), None)
    if outcome is None or peak is None:
        raise AssertionError(
            f"the child did not finish (exit {result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
    return Measured(result.stdout, result.stderr, outcome, peak)
