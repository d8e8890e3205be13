"""Decode outside the DataLoader workers: workers ship compressed frames, one stage decodes.

The shape NVDEC needs: DataLoader workers cannot each own a CUDA context cheaply, so with
``PackedDataset(..., decode_device=...)`` workers put each camera's *compressed* episode
member (once per admission) and the frame indices a sample needs into the batch
(``lerobot_shards/reader/decode/wire.py``), and ``DecodeStage`` decodes them in the training process on
``device``. Output keys, shapes, dtypes and values equal the in-worker CPU path's.

``DecodeStage`` is the scheduler; decoding is a backend's (``lerobot_shards/reader/decode/backends``, one
table). Per batch it plans each camera (``batch_plan``: each member's distinct frames and
the output rows each fills), opens the members it does not hold (kept exactly while a worker
reads them: ``member_cache``), allocates one ``(B * T, ...)`` buffer per camera, lets
``threads`` threads decode shares of the members balanced by frames, converts NV12 to RGB
for the whole camera at once (``colour``), and reshapes to (B, [T,] 3, H, W), float on the
device unless the samples asked for uint8. On ``"cpu"`` the same scheduler runs the CPU
backends: what CI tests.

    loader = DataLoader(ds, batch_size=64, num_workers=2, collate_fn=lerobot_shards.reader.decode.stage.collate)
    stage = DecodeStage(device="cuda")
    for batch in stage.wrap(loader):     # or: batch = stage(batch) inside the loop
        ...
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from lerobot_shards.core.address_space import usable_cores
from lerobot_shards.core.errors import DecodeError, DecodeStageError, FormatError
from lerobot_shards.reader.decode.backends import DecodeBackend, Job, Opened, backend_class
from lerobot_shards.reader.decode.batch_plan import CameraPlan, balance, plan_camera
from lerobot_shards.reader.decode.colour import ColourSpec, nv12_to_rgb
from lerobot_shards.reader.decode.member_cache import MemberCache
from lerobot_shards.reader.decode.spec import FrameSpec
from lerobot_shards.reader.decode.unit_float import to_unit_float
from lerobot_shards.reader.decode.wire import ENCODED_KEY, EncodedFrames, collate

# Decode threads on CUDA: on an H100 frames/s grew up to 4 threads and stayed flat at 8 (docs/BENCHMARKS.md).
_CUDA_THREADS = 8


class DecodeStage:
    """Decode a batch's encoded video on ``device``, each member once per batch.

    Args:
        device: ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
        backend: a name from ``lerobot_shards.reader.decode.backends.backend_names()``: ``"auto"`` (CUDA: ``"nvdec"``;
            CPU: torchcodec, else PyAV), ``"nvdec"`` (CUDA), ``"torchcodec"`` (CPU, or a CUDA
            build on CUDA) or ``"pyav"`` (CPU).
        threads: members decoded at once; default 8 on CUDA, the usable cores (at most 4) on CPU.
        cache_size: opened members kept (LRU) when batches carry no admission flags (batches
            built by hand); members a loader's workers ship are kept exactly while read.
        max_held: at most this many members held for live admissions (a bound for loops left
            early; a worker's pool never needs more than its pool size x cameras).
        allow_cpu_fallback: where the GPU cannot decode (no NVDEC, an AV1 member), decode
            on the CPU and move the frames to ``device`` instead of raising; counted per
            member in ``stats()['cpu_fallbacks']``.
        backend_options: options of the chosen backend (``nvdec``: ``colour="exact"|"nvdec"``).

    Raises:
        DecodeStageError: CUDA without a CUDA device or NVDEC (the reason and what to do),
            and later an AV1 member on the GPU (repack with ``--video hevc``), or a frame
            the decoder returns out of order.
        ValueError: an unknown backend (the allowed names listed), or one that decodes on
            another kind of device.
    """

    def __init__(
        self,
        device: str = "cuda",
        *,
        backend: str = "auto",
        threads: int | None = None,
        cache_size: int = 64,
        max_held: int = 16384,
        allow_cpu_fallback: bool = False,
        backend_options: dict | None = None,
    ):
        self.device = torch.device(device)
        self.allow_cpu_fallback = allow_cpu_fallback
        chosen = backend_class(backend, self.device.type)
        if self.device.type == "cpu":
            missing = chosen.unavailable()
            if missing is not None:
                raise DecodeStageError(f"backend {chosen.name!r} cannot decode here: {missing}")
            self._cpu: DecodeBackend = chosen(self.device, **(backend_options or {}))
            self._backend, self.backend = self._cpu, self._cpu.name
            self.unavailable: str | None = None
        else:
            # The CPU decoders: the fallback on CUDA (and the whole stage when CUDA cannot decode).
            self._cpu = backend_class("auto", "cpu")(torch.device("cpu"))
            self.unavailable = chosen.unavailable()
            if self.unavailable is not None:  # why the GPU cannot decode (with allow_cpu_fallback)
                if not allow_cpu_fallback:
                    raise DecodeStageError(f"{self.unavailable}; use device 'cpu' or allow_cpu_fallback=True")
                self._backend, self.backend = self._cpu, "cpu"
            else:
                self._backend = chosen(self.device, **(backend_options or {}))
                self.backend = self._backend.name
        # Where frames land: the device, or the CPU when a fallback stage has no CUDA at all.
        self._target = self.device if self.device.type == "cpu" or torch.cuda.is_available() else torch.device("cpu")
        self._stream = torch.cuda.Stream(device=self._target) if self._target.type == "cuda" else None
        self.cache = MemberCache(loose=cache_size, limit=max_held)
        self.counters = {
            "frames_decoded": 0,
            "decode_seconds": 0.0,
            "cpu_fallbacks": 0,
            "batches": 0,
            "members_in_batches": 0,
            "members_opened": 0,
        }
        self.threads = threads or (_CUDA_THREADS if self.device.type == "cuda" else min(4, usable_cores()))
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="lerobot-shards-decode") if self.threads > 1 else None

    def stats(self) -> dict:
        """Counters: batches and the distinct members in them (``members_in_batches``),
        members opened (``members_opened``), cache hits and misses (``decoder_hits``,
        ``decoder_misses``), admissions and retirements seen, members held now and at most,
        members dropped at ``max_held``, frames asked for (``frames_decoded``) and, with NVDEC,
        fed to it (``frames_fed``, GOP lead-ins included), members decoded on the CPU instead
        of the GPU, seconds in ``__call__``."""
        cache = self.cache.counters
        counters = dict(self.counters)
        counters.update(
            decoder_hits=cache["hits"],
            decoder_misses=cache["misses"],
            admissions=cache["admissions"],
            retirements=cache["retirements"],
            members_held=self.cache.held,
            max_members_held=cache["max_held"],
            forced_evictions=cache["forced_evictions"],
        )
        for backend in {id(b): b for b in (self._backend, self._cpu)}.values():
            for name, value in backend.counters().items():
                counters[name] = counters.get(name, 0) + value
        return counters

    def reset(self) -> None:
        """Forget every opened member: for a new loader, whose workers ship each member again."""
        self.cache.reset()

    def close(self) -> None:
        """Stop the decode threads (their NVDEC sessions go with them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for backend in {id(b): b for b in (self._backend, self._cpu)}.values():
            backend.close()

    # -- members ----------------------------------------------------------------------------------

    def _open(self, member: EncodedFrames) -> Opened:
        """Open ``member`` with the stage's backend, or the CPU where the GPU cannot and that is
        allowed. Checks the member against what the dataset records first."""
        backend = self._backend
        refused = backend.refuses(member)
        if refused is not None:
            if not self.allow_cpu_fallback:
                raise DecodeStageError(f"{member.member_id}: {refused}")
            backend = self._cpu
        spec = (
            FrameSpec(*member.frame_size, member.frames) if member.frame_size is not None and member.frames is not None else None
        )
        try:
            return backend.open(member, spec)
        except (DecodeError, FormatError) as err:
            raise DecodeStageError(f"{member.member_id}: {err}") from err

    def _members(self, plans: list[tuple[dict, CameraPlan]]) -> dict[str, Opened]:
        """Every member the batch reads, opened: held ones from the cache, the others opened
        (in the thread pool) and kept. Admissions are counted here, before decoding."""
        opened: dict[str, Opened] = {}
        missing: dict[str, EncodedFrames] = {}
        admits: dict[str, int] = {}
        for payload, plan in plans:
            holds = payload.get("holds")
            for job in plan.jobs:
                member = payload["members"][job.member]
                if holds is not None:
                    admits[member.member_id] = holds[job.member][0]
                cached = self.cache.get(member.member_id)
                if cached is not None:
                    opened[member.member_id] = cached
                elif member.data is None:
                    raise DecodeStageError(
                        f"{member.member_id} arrives without its bytes and the stage does not hold it: every batch of a loader "
                        f"must pass through one DecodeStage, in order (held now {self.cache.held}, max_held "
                        f"{self.cache.limit}, dropped at the limit so far {self.cache.counters['forced_evictions']})"
                    )
                else:
                    missing[member.member_id] = member
        if missing:
            fresh = self._map(self._open, list(missing.values()))
            for member, value in zip(missing.values(), fresh):
                opened[member.member_id] = value
                self.cache.put(member.member_id, value, held=admits.get(member.member_id, 0) > 0)
                if value.backend is self._cpu and self.device.type == "cuda":
                    self.counters["cpu_fallbacks"] += 1
            self.counters["members_opened"] += len(missing)
        for member_id, count in admits.items():
            self.cache.admit(member_id, count)
        return opened

    # -- a batch ----------------------------------------------------------------------------------

    def __call__(self, batch: dict) -> dict:
        """Decode ``batch``'s encoded video in place of ``ENCODED_KEY``; returns the batch.

        Raises:
            DecodeStageError: a member the device cannot decode or that does not hold what the
                dataset records (named), frame indices beyond a member, samples of one camera
                with different window lengths, or a member that arrives without its bytes
                while the stage does not hold it.
        """
        encoded = batch.pop(ENCODED_KEY, None)
        if not encoded:
            return batch
        started = time.perf_counter()
        plans = [(payload, plan_camera(key, payload)) for key, payload in encoded.items()]  # all checked before any decode
        # The stream the caller reads the batch on: outputs are recorded on it before reuse.
        consumer = torch.cuda.current_stream(self._target) if self._stream is not None else None
        try:
            self._decode(batch, plans, consumer)
        finally:  # a failed batch still ends its admissions that end here (the worker moves on)
            for payload, plan in plans:
                holds = payload.get("holds")
                if holds is not None:
                    for job in plan.jobs:
                        self.cache.retire(payload["members"][job.member].member_id, holds[job.member][1])
        self.counters["batches"] += 1
        self.counters["decode_seconds"] += time.perf_counter() - started
        return batch

    def _decode(self, batch: dict, plans: list[tuple[dict, CameraPlan]], consumer) -> None:
        with self._on_stream():
            opened = self._members(plans)
            jobs: list[Job] = []
            outputs = []
            for payload, plan in plans:
                members = [payload["members"][job.member] for job in plan.jobs]
                handles = [opened[m.member_id] for m in members]
                rgb, nv12 = self._allocate(plan, handles)
                outputs.append((plan, rgb, nv12, [(job, handle) for job, handle in zip(plan.jobs, handles)]))
                for job, member, handle in zip(plan.jobs, members, handles):
                    jobs.append(
                        Job(
                            member=member,
                            opened=handle,
                            wanted=job.wanted,
                            rows=job.rows,
                            out=nv12 if handle.output == "nv12" else rgb,
                        )
                    )
            groups = balance([len(job.wanted) for job in jobs], self.threads)
            try:
                self._map(self._decode_share, [[jobs[p] for p in group] for group in groups])
            except DecodeError as err:
                raise DecodeStageError(str(err)) from err
            for plan, rgb, nv12, handled in outputs:
                batch[plan.key] = self._finish(plan, rgb, nv12, handled)
            for _, plan in plans:
                self.counters["frames_decoded"] += plan.samples * plan.length
                self.counters["members_in_batches"] += len(plan.jobs)
            if self._stream is not None:
                self._stream.synchronize()  # the batch is complete; the caller's stream may read it
                for plan, *_ in outputs:
                    batch[plan.key].record_stream(consumer)

    def _allocate(self, plan: CameraPlan, handles: list[Opened]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The camera's RGB output rows, and NV12 rows if a backend writes NV12."""
        sizes = {(h.height, h.width) for h in handles}
        if len(sizes) > 1:
            raise DecodeStageError(f"{plan.key}: members of one batch decode to different frame sizes {sorted(sizes)}")
        height, width = sizes.pop()
        rows = plan.samples * plan.length
        rgb = torch.empty((rows, 3, height, width), dtype=torch.uint8, device=self._target)
        nv12 = None
        if any(h.output == "nv12" for h in handles):
            nv12 = torch.empty((rows, height * 3 // 2, width), dtype=torch.uint8, device=self._target)
        return rgb, nv12

    def _decode_share(self, jobs: list[Job]) -> None:
        """One thread's share of a batch, by backend (a CPU fallback's members apart)."""
        by_backend: dict[int, tuple[DecodeBackend, list[Job]]] = {}
        for job in jobs:
            by_backend.setdefault(id(job.opened.backend), (job.opened.backend, []))[1].append(job)
        for backend, share in by_backend.values():
            backend.decode(share)

    def _finish(self, plan: CameraPlan, rgb: torch.Tensor, nv12: torch.Tensor | None, handled: list) -> torch.Tensor:
        """NV12 rows converted into ``rgb`` (one conversion per colour space in the batch), then
        the camera's (B, [T,] 3, H, W) tensor, float in [0, 1] unless uint8 was asked for."""
        if nv12 is not None:
            by_colour: dict[ColourSpec, list[int]] = {}
            for job, handle in handled:
                if handle.output == "nv12":
                    if handle.colour is None:  # a backend's bug: NV12 rows need their colour space to convert
                        raise DecodeStageError(f"{handle.backend.name} wrote NV12 frames without their colour space")
                    by_colour.setdefault(handle.colour, []).extend(row for rows in job.rows for row in rows)
            for spec, rows in by_colour.items():
                if len(rows) == rgb.shape[0]:
                    nv12_to_rgb(nv12, spec, out=rgb)
                else:
                    index = torch.tensor(rows, device=rgb.device)
                    rgb.index_copy_(0, index, nv12_to_rgb(nv12.index_select(0, index), spec))
        out = rgb.view(plan.samples, plan.length, *rgb.shape[1:])
        if plan.squeeze:
            out = out.squeeze(1)
        if plan.as_float:
            out = to_unit_float(out)
        return out

    def _on_stream(self):
        return torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext()

    def _map(self, function, items: list) -> list:
        """``function`` over ``items`` in the thread pool; every call has finished when this
        returns or raises (the first error), so nothing still writes into a batch's buffers."""
        if self._pool is None or len(items) < 2:
            return [function(item) for item in items]

        def on_stream(item):  # a pool thread's current stream is its own: use the stage's
            with self._on_stream():
                return function(item)

        futures = [self._pool.submit(on_stream, item) for item in items]
        concurrent.futures.wait(futures)
        return [future.result() for future in futures]

    def wrap(self, loader, *, ahead: int = 1):
        """Iterate ``loader`` with each batch decoded in a background thread, ``ahead``
        batches in advance, so decoding overlaps the training step on the previous batch
        (the decoders release the GIL). A decode error is re-raised here. The stage forgets
        the members it holds first: the loader's workers ship each one again.

        Leaving the loop early (``break``, an exception, the iterator collected, or the
        interpreter exiting) stops the thread and waits for it: a thread still inside the
        decoder when Python finalizes aborts the process ("terminate called without an active
        exception"; 13 of 16 runs of ``tests/scripts/decode_stage_exit.py`` did).
        """
        results: queue.Queue = queue.Queue(maxsize=max(ahead, 1))
        done = object()
        stop = threading.Event()
        self.reset()

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    results.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for batch in loader:
                    if stop.is_set() or not put(("ok", self(batch))):
                        return
                put(("ok", done))
            except BaseException as err:  # delivered to the consumer, never swallowed
                put(("error", err))

        thread = threading.Thread(target=produce, name="lerobot-shards-decode", daemon=True)
        _running.add((thread, stop))
        thread.start()
        try:
            while True:
                kind, value = results.get()
                if kind == "error":
                    raise value
                if value is done:
                    return
                yield value
        finally:
            _stop_and_join(thread, stop)


# Decode threads of live ``wrap`` iterators: stopped and joined at interpreter exit, before
# finalization could catch one inside the decoder.
_running: set[tuple[threading.Thread, threading.Event]] = set()
_JOIN_TIMEOUT_S = 120.0


def _stop_and_join(thread: threading.Thread, stop: threading.Event) -> None:
    stop.set()
    if thread is not threading.current_thread():
        # The thread finishes at most the batch it is on; the bound only keeps a loader that
        # never returns from hanging the exit.
        thread.join(timeout=_JOIN_TIMEOUT_S)
    _running.discard((thread, stop))


@atexit.register
def _stop_all() -> None:
    for thread, stop in list(_running):
        _stop_and_join(thread, stop)


__all__ = ["ENCODED_KEY", "DecodeStage", "EncodedFrames", "collate"]
