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
# What every entry point may use on a hostile input (docs/SECURITY.md, "Bounds").
HOSTILE_PEAK_BYTES = 1 << 30

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
    )
    lines = result.stdout.splitlines()
    outcome = next((line.removeprefix("OUTCOME ") for line in lines if line.startswith("OUTCOME ")), None)
    peak = next((int(line.split()[1]) * 1024 for line in lines if line.startswith("PEAK_KB ")), None)
    if outcome is None or peak is None:
        raise AssertionError(
            f"the child did not finish (exit {result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
    return Measured(result.stdout, result.stderr, outcome, peak)
