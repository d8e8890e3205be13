"""What a process and its children hold and do, read from ``/proc`` (Linux): for benchmarks
that measure DataLoader workers. Self-contained (standard library only): the mixture start-up
benchmark loads it by path into code that runs against another checkout."""

from __future__ import annotations

import os
import time


def status_kb(pid: int | str, field: str) -> int:
    """A ``/proc/<pid>/status`` field in kB (``VmRSS``, ``VmHWM``...) or a count (``Threads``)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def private_kb(pid: int | str) -> int:
    """Private (clean + dirty) memory of a process in kB: what it does not share with its parent."""
    total = 0
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total


def children() -> list[int]:
    """Process ids whose parent is this process."""
    me, out = os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                out.append(int(name))
    return out


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process, in clock ticks."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def wait_idle(pids: list[int], quiet_s: float = 1.0, limit_s: float = 60) -> None:
    """Return once no process of ``pids`` used CPU for ``quiet_s`` (workers that have filled
    their queues and prefetch budgets), or after ``limit_s``."""
    deadline, last, quiet = time.monotonic() + limit_s, None, time.monotonic()
    while time.monotonic() < deadline:
        now = [cpu_ticks(p) for p in pids if os.path.exists(f"/proc/{p}")]
        if now != last:
            last, quiet = now, time.monotonic()
        elif time.monotonic() - quiet > quiet_s:
            return
        time.sleep(0.1)


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running after a wait (a short-lived helper child may be gone)."""
    out = []
    for pid in pids:
        try:
            private_kb(pid)
        except OSError:
            continue
        out.append(pid)
    return out
