"""The session's guard against real-time scheduling it never asked for (tests/rt_guard.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests import rt_guard


def test_a_descendant_on_a_realtime_policy_is_put_back_and_others_are_left_alone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        # CI runs as root (SLURM and apt need it); setting a real-time policy needs CAP_SYS_NICE.
        os.sched_setscheduler(child.pid, os.SCHED_FIFO, os.sched_param(1))
        assert os.sched_getscheduler(child.pid) == os.SCHED_FIFO
        assert rt_guard.demote_once(child.pid) == [child.pid]  # root only: its own subtree
        assert os.sched_getscheduler(child.pid) == os.SCHED_OTHER
        assert rt_guard.demote_once(os.getpid()) == []  # nothing left to change
        assert stranger.pid in rt_guard._descendants(os.getpid())  # a new session is still a descendant
    finally:
        child.kill()
        stranger.kill()
