"""Progress as plain log lines, for output that is not a terminal (SLURM logs, pipes).

A long command prints ``[label] 3/10 shards (30%), <note>, ETA 0:02:10`` on stderr at most
every ``interval_s`` seconds (``LEROBOT_SHARDS_PROGRESS_S``, default 30; 0 prints every
update) and once more when it closes, so a log shows the job is alive and how far it got.
"""

from __future__ import annotations

import os
import sys
import time


def _clock(seconds: float) -> str:
    hours, rest = divmod(int(seconds + 0.5), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def eta_text(done: int, total: int, seconds: float) -> str:
    """``ETA H:MM:SS`` from the rate so far; ``done in H:MM:SS`` once nothing remains; ``""``
    before anything is done."""
    if done <= 0 or seconds <= 0:
        return ""
    if done >= total:
        return f"done in {_clock(seconds)}"
    return f"ETA {_clock(max(total - done, 0) * seconds / done)}"


def progress_text(done: int, total: int, unit: str, note: str, seconds: float, *, started_done: int = 0) -> str:
    """``3/10 shards (30%), <note>, ETA 0:02:10``; the ETA from the ``done - started_done``
    items of this run (items done by an earlier run, e.g. resumed shards, cost nothing)."""
    parts = [
        f"{done}/{total} {unit} ({100 * done / total if total else 100:.0f}%)",
        note,
        eta_text(done - started_done, total - started_done, seconds),
    ]
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
        self.seconds: float | None = None
        self.printed: tuple[int, int, str] | None = None
        self.lines = 0

    def update(self, done: int, total: int, *, note: str = "", seconds: float | None = None) -> None:
        """Record the state; print it if ``interval_s`` passed. ``seconds``: the work's own
        clock (from when it started, not from this log's first line), else this log's."""
        self.state = (done, total, note)
        self.seconds = seconds
        if time.perf_counter() - self.last >= self.interval_s:
            self._emit()

    def _emit(self) -> None:
        if self.state is None:
            return
        done, total, note = self.state
        seconds = self.seconds if self.seconds is not None else time.perf_counter() - self.started
        text = progress_text(done, total, self.unit, note, seconds, started_done=self.started_done)
        print(f"[{self.label}] {text}", file=self.stream, flush=True)
        self.last, self.lines, self.printed = time.perf_counter(), self.lines + 1, self.state

    def close(self) -> None:
        """Print the final state (if it was not the last line printed)."""
        if self.state != self.printed:
            self._emit()


def progress_line(done: int, total: int, bytes_in: int, seconds: float, *, started_done: int = 0) -> str:
    """``12/40 episodes (30%), 30.1 MB in, 5.2 MB/s, ETA 0:01:20``: the rate and ETA from the
    episodes done in this run (resumed ones cost nothing)."""
    return progress_text(
        done, total, "episodes", _bytes_note(bytes_in, seconds, done - started_done), seconds, started_done=started_done
    )


def _bytes_note(bytes_in: int, seconds: float, ran: int) -> str:
    rate = f", {bytes_in / 1e6 / seconds:.1f} MB/s" if seconds > 0 and ran > 0 else ""
    return f"{bytes_in / 1e6:.1f} MB in{rate}"


class PackProgressBar:
    """A rich bar for a terminal: episodes done (resumed ones included), source MB read, MB
    written and MB/s; fed ``lerobot_shards.packer.run.pack.PackProgress`` values."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]packing"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("episodes"),
            TextColumn("{task.fields[mb_in]:.1f} MB in, {task.fields[mb_out]:.1f} MB out, {task.fields[rate]:.1f} MB/s"),
            TimeElapsedColumn(),
        )
        self.task = None

    def __call__(self, state) -> None:
        rate = state.bytes_in / 1e6 / state.seconds if state.seconds > 0 else 0.0
        fields = {"mb_in": state.bytes_in / 1e6, "mb_out": state.bytes_out / 1e6, "rate": rate}
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task("pack", total=state.episodes_total, completed=state.episodes_done, **fields)
        else:
            self.progress.update(self.task, completed=state.episodes_done, **fields)

    def close(self) -> None:
        if self.task is not None:
            self.progress.stop()


class PackProgressLog:
    """For output that is not a terminal (a SLURM log, a pipe): ``ProgressLog`` lines with the
    source bytes read (``LEROBOT_SHARDS_PROGRESS_S``, default every 30 s, and at the end)."""

    def __init__(self, stream=None) -> None:
        self.log: ProgressLog | None = None
        self.stream = stream
        self.last = None

    def __call__(self, state) -> None:
        if self.log is None:
            self.log = ProgressLog("pack", unit="episodes", started_done=state.episodes_before, stream=self.stream)
        self.last = state
        note = _bytes_note(state.bytes_in, state.seconds, state.episodes_done - state.episodes_before)
        # The pack's own clock: this log is made at the first update, which comes when the first
        # episode is done (its own clock would start there and read ETA 0:00:00).
        self.log.update(state.episodes_done, state.episodes_total, note=note, seconds=state.seconds)

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


def pack_progress(terminal: bool) -> PackProgressBar | PackProgressLog:
    """The pack progress display for stderr: a bar on a terminal, log lines otherwise."""
    return PackProgressBar() if terminal else PackProgressLog()
