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
    of the whole tree (``peak``), of its largest single process (``peak_process``) and of its
    largest descendant (``peak_worker``: a DataLoader worker). Shared memory that two processes
    map counts in both."""

    def __init__(self, interval_s: float = 0.05):
        self.interval_s, self.peak, self.peak_process, self.peak_worker = interval_s, 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sizes = tree_rss_bytes()
            self.peak = max(self.peak, sum(sizes.values()))
            self.peak_process = max(self.peak_process, max(sizes.values(), default=0))
            me = os.getpid()  # the largest DataLoader worker (any descendant): what one worker holds
            self.peak_worker = max(self.peak_worker, max((v for k, v in sizes.items() if k != me), default=0))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _touch(batch) -> tuple[int, int, set]:
    """Read every tensor lightly, as a trainer that ships the batch to its GPU would (one byte
    per 4 KiB page of each storage: every page is faulted in, no full-size conversion on the CPU
    that would measure this loop instead of the loader); returns (samples, frames, episodes).

    Pages are read through each storage, not the tensor: ``reshape(-1)`` of BatchLoader's
    channels-last frames is a full transposing copy (15 MB per batch of 16 480x640 frames),
    which charged the loader for this loop's work (issue 57)."""
    frames, seen = 0, set()
    for value in batch.values():
        if isinstance(value, torch.Tensor):
            storage = value.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                pages = torch.empty(0, dtype=torch.uint8).set_(storage)
                pages[::4096].sum().item()
            if value.dim() >= 4:  # (B, C, H, W) or (B, T, C, H, W)
                frames += value.shape[0] * (value.shape[1] if value.dim() == 5 else 1)
    return len(batch["index"]), frames, set(batch["episode_index"].tolist())


def _stage_seconds(loader) -> dict | None:
    """The reader's own counters of time spent per stage so far, summed over its consumers (the
    dataset's ``stats()``; None for other loaders)."""
    stats = getattr(getattr(loader, "dataset", None), "stats", None)
    if stats is None:
        return None
    values = stats()
    if "decode_seconds" not in values:
        return None
    return {k: float(values.get(k, 0.0)) for k in ("decode_seconds", "fetch_seconds")}


def _stage_split(start: dict | None, end: dict | None, samples: int, seconds: float, workers: int) -> dict:
    """Per sample, in milliseconds of a consumer's time: decoding, fetching, and the rest (sample
    building, batching, the hand-over to the training process, waiting): a consumer has
    ``workers / samples_per_s`` seconds per sample."""
    if start is None or end is None or not samples:
        return {}
    decode = (end["decode_seconds"] - start["decode_seconds"]) / samples * 1e3
    fetch = (end["fetch_seconds"] - start["fetch_seconds"]) / samples * 1e3
    per_sample = max(workers, 1) * seconds / samples * 1e3
    return {
        "stage_ms_per_sample": {
            "decode": round(decode, 3),
            "fetch": round(fetch, 3),
            "rest": round(per_sample - decode - fetch, 3),
            "consumer": round(per_sample, 3),
        }
    }


def measure_loader(make_loader: Callable, *, warmup: int, max_batches: int, workers: int = 1, record: list | None = None) -> dict:
    """Iterate up to ``max_batches`` batches and report throughput and latency numbers.

    ``record``, when given, receives ``(episode_index, frame_index)`` of every measured sample
    in the order the loader delivered them (the decode ceiling then decodes the same frames).

    Raises:
        RuntimeError: nothing was measured (0 samples after warm-up): a benchmark that
            measured nothing must fail loudly.
    """
    latencies, distinct = [], []
    samples = frames = 0
    stats_start = None
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
                stats_start = _stage_seconds(loader)
            elif count + 1 > warmup:
                samples += n
                frames += f
                if record is not None:
                    record += zip(batch["episode_index"].tolist(), batch["frame_index"].tolist())
        steady_s = (last - steady_start) if steady_start is not None else 0.0
        cpu_s = tree_cpu_seconds() - cpu_start if steady_start is not None else 0.0
        stats_end = _stage_seconds(loader) if steady_start is not None else None
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
        "peak_worker_rss_mb": rss.peak_worker / 1e6,
        "distinct_episodes_per_batch": statistics.mean(distinct),
        "cpu_cores": cpu_s / steady_s,  # the process tree's CPU seconds per second, workers included
        "measured_samples": samples,
        "measured_s": steady_s,
        **_stage_split(stats_start if steady_start is not None else None, stats_end, samples, steady_s, workers),
    }
