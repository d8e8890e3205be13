"""A guard against one failure of the machine, not of the code: on some CI and sandbox kernels
processes of the test session were found running SCHED_FIFO at priority 99 (pytest workers,
torchrun ranks, Chromium's zygotes, an x265 encode), which nothing here asks for. Two such
processes busy-waiting on 2 cores starve everything else, and the suite livelocks until its
hang guard fires (a test that runs in 20 s sat for 15 minutes).

``start()`` runs a daemon thread that, every ``PERIOD_S``, puts every process descended from
the session back on the normal scheduler (``SCHED_OTHER``) and says so on stderr. On a machine
without the problem it finds nothing and changes nothing.
"""

from __future__ import annotations

import os
import sys
import threading

PERIOD_S = 2.0
_REALTIME = {getattr(os, "SCHED_FIFO", -1), getattr(os, "SCHED_RR", -1)}


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2 :].split()[1])  # after "pid (comm) state": ppid


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _parent(int(entry))
            if parent is not None:
                parents[int(entry)] = parent
    out = []
    for pid in parents:
        seen, current = 0, pid
        while current in parents and seen < 64:
            if current == root:
                out.append(pid)
                break
            current, seen = parents[current], seen + 1
    return out


def demote_once(root: int) -> list[int]:
    """Put ``root`` and its descendants that run a real-time policy back on SCHED_OTHER;
    returns the pids changed."""
    changed = []
    for pid in [root, *_descendants(root)]:
        try:
            if os.sched_getscheduler(pid) in _REALTIME:
                os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
                changed.append(pid)
        except OSError:  # gone, or not ours to change
            continue
    return changed


def start(root: int | None = None) -> threading.Thread | None:
    """Start the guard for ``root`` (default: this process); None where there is no /proc."""
    if not hasattr(os, "sched_getscheduler") or not os.path.isdir("/proc"):
        return None
    root = os.getpid() if root is None else root

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(PERIOD_S):
            changed = demote_once(root)
            if changed:
                print(f"\n[rt_guard] {len(changed)} test process(es) were running a real-time scheduling policy the "
                      f"tests never set (pids {changed[:10]}); put back on SCHED_OTHER", file=sys.stderr, flush=True)

    thread = threading.Thread(target=watch, name="rt-guard", daemon=True)
    thread.start()
    return thread
