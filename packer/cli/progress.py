"""Progress as plain log lines, for output that is not a terminal (SLURM logs, pipes).

A long command prints ``[label] 3/10 shards (30%), <note>, ETA 0:02:10`` on stderr at most
every ``interval_s`` seconds (``LEROBOT_SHARDS_PROGRESS_S``, default 30; 0 prints every
update) and once more when it closes, so a log shows the job is alive and how far it got.
"""

from __future__ import annotations

import os
import sys
import time


def eta_text(done: int, total: int, seconds: float) -> str:
    """``ETA H:MM:SS`` from the rate so far, or ``""`` before anything is done."""
    if done <= 0 or seconds <= 0:
        return ""
    remaining = max(total - done, 0) * seconds / done
    hours, rest = divmod(int(remaining + 0.5), 3600)
    return f"ETA {hours}:{rest // 60:02d}:{rest % 60:02d}"


def progress_text(done: int, total: int, unit: str, note: str, seconds: float, *, started_done: int = 0) -> str:
    """``3/10 shards (30%), <note>, ETA 0:02:10``; the ETA from the ``done - started_done``
    items of this run (items done by an earlier run, e.g. resumed shards, cost nothing)."""
    parts = [f"{done}/{total} {unit} ({100 * done / total if total else 100:.0f}%)", note,
             eta_text(done - started_done, total - started_done, seconds)]
    return ", ".join(p for p in parts if p)


class ProgressLog:
    """Periodic progress lines (see the module docstring); ``started_done`` items were done
    before this run started."""

    def __init__(self, label: str, *, unit: str, interval_s: float | None = None, stream=None, started_done: int = 0):
        self.label, self.unit, self.started_done = label, unit, started_done
        self.interval_s = float(os.environ.get("LEROBOT_SHARDS_PROGRESS_S", "30")) if interval_s is None else interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self.last = float("-inf")
        self.state: tuple[int, int, str] | None = None
        self.printed: tuple[int, int, str] | None = None
        self.lines = 0

    def update(self, done: int, total: int, *, note: str = "") -> None:
        self.state = (done, total, note)
        if time.perf_counter() - self.last >= self.interval_s:
            self._emit()

    def _emit(self) -> None:
        if self.state is None:
            return
        done, total, note = self.state
        text = progress_text(done, total, self.unit, note, time.perf_counter() - self.started, started_done=self.started_done)
        print(f"[{self.label}] {text}", file=self.stream, flush=True)
        self.last, self.lines, self.printed = time.perf_counter(), self.lines + 1, self.state

    def close(self) -> None:
        """Print the final state (if it was not the last line printed)."""
        if self.state != self.printed:
            self._emit()
