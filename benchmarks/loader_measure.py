"""Measuring a DataLoader the same way for every system (ours and LeRobot's).

Steady-state throughput is wall clock over the post-warm-up window (not summed inter-batch
gaps); latencies are per batch; peak RSS is sampled over the whole process tree (workers
included) from /proc. Kept dependency-free (torch + stdlib) so LeRobot's venv can run it.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable

import torch


def _children(pid: int) -> list[int]:
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                found += [int(c) for c in handle.read().split()]
    except OSError:
        pass
    return found


def tree_rss_bytes(pid: int | None = None) -> dict[int, int]:
    """Resident set size of a process and each of its descendants, ``{pid: bytes}``."""
    pid = pid or os.getpid()
    found, stack = {}, [pid]
    while stack:
        current = stack.pop()
        try:
            with open(f"/proc/{current}/statm") as handle:
                found[current] = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
        stack += _children(current)
    return found


def tree_cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process and its live descendants so far (/proc)."""
    pid = pid or os.getpid()
    ticks, stack, seen = 0, [pid], set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with open(f"/proc/{current}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        except (OSError, IndexError, ValueError):
            continue
        stack += _children(current)
    return ticks / os.sysconf("SC_CLK_TCK")


def delta_for(mode: str, cameras: list[str], fps: int) -> dict | None:
    """``single``: no window; ``chunk``: 50 future actions and the previous + current frame per camera."""
    if mode == "single":
        return None
    if mode == "chunk":
        return {"action": [i / fps for i in range(50)], **{key: [-1 / fps, 0.0] for key in cameras}}
    raise ValueError(f"unknown mode {mode!r}")


class PeakRss:
    """Samples the process tree's RSS every ``interval_s`` in a background thread: the peak
    of the whole tree (``peak``) and of its largest single process (``peak_process``). Shared
    memory that two processes map counts in both."""

    def __init__(self, interval_s: float = 0.05):
        self.interval_s, self.peak, self.peak_process = interval_s, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sizes = tree_rss_bytes()
            self.peak = max(self.peak, sum(sizes.values()))
            self.peak_process = max(self.peak_process, max(sizes.values(), default=0))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _touch(batch) -> tuple[int, int, set]:
    """Read every tensor lightly, as a trainer that ships the batch to its GPU would (one
    element per 4 KiB page: every page is faulted in, no full-size conversion on the CPU that
    would measure this loop instead of the loader); returns (samples, frames, episodes)."""
    frames = 0
    for value in batch.values():
        if isinstance(value, torch.Tensor):
            flat = value.reshape(-1)
            flat[:: max(1, 4096 // flat.element_size())].sum().item()
            if value.dim() >= 4:  # (B, C, H, W) or (B, T, C, H, W)
                frames += value.shape[0] * (value.shape[1] if value.dim() == 5 else 1)
    return len(batch["index"]), frames, set(batch["episode_index"].tolist())


def measure_loader(make_loader: Callable, *, warmup: int, max_batches: int) -> dict:
    """Iterate up to ``max_batches`` batches and report throughput and latency numbers.

    Raises:
        RuntimeError: nothing was measured (0 samples after warm-up): a benchmark that
            measured nothing must fail loudly.
    """
    latencies, distinct = [], []
    samples = frames = 0
    with PeakRss() as rss:
        started = time.perf_counter()
        loader = make_loader()
        iterator = iter(loader)
        steady_start = None
        last = started
        first_batch_s = None
        for count in range(max_batches):
            try:
                batch = next(iterator)
            except StopIteration:
                break
            n, f, episodes = _touch(batch)
            now = time.perf_counter()
            if first_batch_s is None:
                first_batch_s = now - started
            latencies.append(now - last)
            last = now
            distinct.append(len(episodes))
            if count + 1 == warmup:
                steady_start = now
                cpu_start = tree_cpu_seconds()
            elif count + 1 > warmup:
                samples += n
                frames += f
        steady_s = (last - steady_start) if steady_start is not None else 0.0
        cpu_s = tree_cpu_seconds() - cpu_start if steady_start is not None else 0.0
        del iterator
    if samples == 0 or steady_s <= 0:
        raise RuntimeError(f"measured 0 samples after {warmup} warm-up batches: increase --max-batches or the dataset")
    steady = sorted(latencies[warmup:]) or sorted(latencies)

    def pct(q: float) -> float:
        return steady[min(len(steady) - 1, int(q * len(steady)))]

    return {
        "samples_per_s": samples / steady_s,
        "frames_per_s": frames / steady_s,
        "first_batch_s": first_batch_s,
        "batch_p50_s": pct(0.50),
        "batch_p95_s": pct(0.95),
        "batch_p99_s": pct(0.99),
        "peak_rss_mb": rss.peak / 1e6,
        "peak_rss_process_mb": rss.peak_process / 1e6,
        "distinct_episodes_per_batch": statistics.mean(distinct),
        "cpu_cores": cpu_s / steady_s,  # the process tree's CPU seconds per second, workers included
        "measured_samples": samples,
        "measured_s": steady_s,
    }
