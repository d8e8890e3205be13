"""Decode outside the DataLoader workers: workers ship compressed frames, one stage decodes.

The shape NVDEC needs: DataLoader workers cannot each own a CUDA context cheaply, so with
``PackedDataset(..., decode_device=...)`` workers put each camera's *compressed* episode
member and the frame indices a sample needs into the batch (``collate`` dedupes members
shared by samples of a batch), and ``DecodeStage`` decodes them in the training process on
``device``. Output keys, shapes, dtypes and value scale equal the in-worker CPU path.

Per batch, each member is decoded once for the union of its samples' frames, members in a
pool of ``threads`` threads; each camera's frames land in one (B, [T,] 3, H, W) tensor on
the device, converted to float there. Backends: ``"nvdec"`` (``reader/decode/nvdec.py``:
PyNvVideoCodec's core decoder fed only the samples a batch needs, the default on CUDA),
``"torchcodec"`` (its CUDA or CPU decoder) and ``"pyav"`` (CPU). On ``"cpu"`` the stage is
the same code with the reader's CPU decoders: what CI tests.

    loader = DataLoader(ds, batch_size=64, num_workers=2, collate_fn=reader.decode.stage.collate)
    stage = DecodeStage(device="cuda")
    for batch in stage.wrap(loader):     # or: batch = stage(batch) inside the loop
        ...
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import torch
from torch.utils.data import default_collate

from reader.decode.annexb import elementary_stream, stream_config
from reader.decode.frames import CpuDecodeStage, FrameSpec, TorchCodecDecoder, check_frame_spec
from reader.decode.nvdec import MemberStream, NvdecSession, nvdec_unavailable
from reader.errors import DecodeError, DecodeStageError, FormatError
from reader.format import check_mp4

ENCODED_KEY = "__encoded_video__"

# NVDEC on A100/H100 decodes H.264 and HEVC, not AV1 (packs made with --video copy keep AV1).
_NVDEC_CODECS = {"hevc", "h264"}
# Decode threads on CUDA: on an H100 frames/s grew up to 4 threads and stayed flat at 8 (docs/BENCHMARKS.md).
_CUDA_THREADS = 8
Backend = Literal["auto", "nvdec", "torchcodec", "pyav"]


@dataclass(frozen=True)
class EncodedFrames:
    """What a worker ships for one camera of one sample instead of decoded frames."""

    member_id: str  # unique per (dataset, shard, episode, camera)
    data: bytes
    codec: str
    indices: tuple[int, ...]
    squeeze: bool  # a one-element video window has no T axis (LeRobot)
    as_float: bool
    frame_size: tuple[int, int] | None = None  # (height, width) the manifest records
    frames: int | None = None  # frames the index records for the member


def collate(samples: list[dict]) -> dict:
    """``default_collate`` for everything but encoded video, whose members are deduplicated."""
    encoded = [s.pop(ENCODED_KEY, {}) for s in samples]
    batch = default_collate(samples)
    if any(encoded):
        per_key: dict[str, dict] = {}
        for key in encoded[0]:
            members: OrderedDict[str, EncodedFrames] = OrderedDict()
            refs = []
            for item in encoded:
                frames = item[key]
                members.setdefault(frames.member_id, frames)
                refs.append((list(members).index(frames.member_id), frames.indices))
            per_key[key] = {"members": list(members.values()), "refs": refs}
        batch[ENCODED_KEY] = per_key
    return batch


class DecodeStage:
    """Decode a batch's encoded video on ``device``, each member once per batch.

    Args:
        device: ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
        backend: ``"auto"`` (CUDA: ``"nvdec"``; CPU: torchcodec, else PyAV), ``"nvdec"``
            (CUDA only), ``"torchcodec"`` or ``"pyav"`` (CPU only).
        threads: members decoded at once; default 8 on CUDA, the usable cores (at most 4) on CPU.
        cache_size: opened members kept (LRU), i.e. episodes x cameras.
        allow_cpu_fallback: where the GPU cannot decode (no NVDEC, an AV1 member), decode
            on the CPU and move the frames to ``device`` instead of raising; counted per
            member in ``stats()['cpu_fallbacks']``.

    Raises:
        DecodeStageError: CUDA without a CUDA device or NVDEC (the reason and what to do),
            and later an AV1 member on the GPU (repack with ``--video hevc``), or a frame
            the decoder returns out of order.
        ValueError: an unknown backend, or ``"nvdec"`` on the CPU.
    """

    def __init__(self, device: str = "cuda", *, backend: Backend = "auto", threads: int | None = None,
                 cache_size: int = 64, allow_cpu_fallback: bool = False):
        if backend not in ("auto", "nvdec", "torchcodec", "pyav"):
            raise ValueError(f"backend {backend!r} is not one of 'auto', 'nvdec', 'torchcodec', 'pyav'")
        self.device = torch.device(device)
        self.cache_size = cache_size
        self.allow_cpu_fallback = allow_cpu_fallback
        self.counters = {"decoder_hits": 0, "decoder_misses": 0, "frames_decoded": 0, "frames_fed": 0,
                         "decode_seconds": 0.0, "cpu_fallbacks": 0, "flushes": 0}
        # The CPU decoders: the stage's own on "cpu", the fallback on CUDA.
        self._cpu = CpuDecodeStage("auto" if backend == "nvdec" else backend)
        self._opened: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._sessions: list = []
        self.unavailable: str | None = None  # why the GPU cannot decode (with allow_cpu_fallback)
        if self.device.type == "cpu":
            if backend == "nvdec":
                raise ValueError("backend 'nvdec' decodes on a CUDA device; use 'torchcodec' or 'pyav' on the CPU")
            self.backend = self._cpu.backend
        else:
            self.backend = self._gpu_backend(backend)
        # Where frames land: the device, or the CPU when a fallback stage has no CUDA at all.
        self._target = self.device if self.device.type == "cpu" or torch.cuda.is_available() else torch.device("cpu")
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self.threads = threads or (_CUDA_THREADS if self.device.type == "cuda" else max(1, min(4, usable)))
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="lerobot-shards-decode") if self.threads > 1 else None

    def _gpu_backend(self, backend: Backend) -> str:
        if backend == "pyav":
            raise ValueError("backend 'pyav' decodes on the CPU; use device='cpu'")
        if backend == "torchcodec":
            if not torch.cuda.is_available():
                self._no_gpu("decode_device='cuda' but torch sees no CUDA device")
            return "torchcodec"
        reason = nvdec_unavailable()
        if reason is not None:
            self._no_gpu(f"NVDEC cannot decode here: {reason}")
            return "cpu"
        return "nvdec"

    def _no_gpu(self, reason: str) -> None:
        if not self.allow_cpu_fallback:
            raise DecodeStageError(f"{reason}; use device 'cpu' or allow_cpu_fallback=True")
        self.unavailable = reason

    def stats(self) -> dict:
        """Counters: members opened (misses) and reused (hits), frames asked for
        (``frames_decoded``) and fed to NVDEC (``frames_fed``, GOP lead-ins included),
        members decoded on the CPU instead of the GPU, seconds in ``__call__``."""
        counters = dict(self.counters)
        for session in list(self._sessions):
            for name in ("frames_fed", "flushes", "driver_copies"):
                counters[name] = counters.get(name, 0) + session.counters[name]
        return counters

    def close(self) -> None:
        """Stop the decode threads (their NVDEC sessions go with them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # -- one member -------------------------------------------------------------------------------

    def _open(self, member: EncodedFrames):
        """What decodes ``member``: ``("nvdec", MemberStream)`` or ``("cpu"|"torchcodec", decoder)``;
        opened once and kept (LRU). Checks the member against what the dataset records first."""
        with self._lock:
            opened = self._opened.get(member.member_id)
            if opened is not None:
                self._opened.move_to_end(member.member_id)
                self.counters["decoder_hits"] += 1
                return opened
            self.counters["decoder_misses"] += 1
        where = member.member_id
        spec = FrameSpec(*member.frame_size, member.frames) if member.frame_size is not None and member.frames is not None else None
        kind = self.backend if self.device.type == "cuda" else "cpu"
        if kind == "nvdec" and member.codec not in _NVDEC_CODECS:
            if not self.allow_cpu_fallback:
                raise DecodeStageError(
                    f"{where}: codec {member.codec!r} cannot be decoded by NVDEC on A100/H100; "
                    "repack with `lerobot-shards pack --video hevc` (or h264)"
                )
            kind = "cpu"
        if kind == "cpu" and self.device.type == "cuda":
            with self._lock:
                self.counters["cpu_fallbacks"] += 1
        try:
            opened = (kind, self._open_as(kind, member, spec))
        except (DecodeError, FormatError) as err:
            raise DecodeStageError(f"{where}: {err}") from err
        with self._lock:
            self._opened[member.member_id] = opened
            while len(self._opened) > self.cache_size:
                self._opened.popitem(last=False)
        return opened

    def _open_as(self, kind: str, member: EncodedFrames, spec: FrameSpec | None):
        where = member.member_id
        if kind == "cpu":
            return self._cpu.open(member.data, where=where, spec=spec)
        height, width = member.frame_size if member.frame_size is not None else (None, None)
        layout = check_mp4(member.data, where=where, frames=member.frames, height=height, width=width)
        check_frame_spec((layout.height, layout.width, layout.samples), spec)
        if kind == "torchcodec":
            return TorchCodecDecoder(member.data, spec, device=str(self.device))
        if not layout.in_order:
            raise DecodeStageError(f"{where}: frames are stored out of presentation order (B-frames); "
                                   "repack with `lerobot-shards pack --video hevc` for GPU decode")
        config = stream_config(layout.codec, layout.codec_config, where=where)
        return MemberStream(where=where, layout=layout, stream=elementary_stream(member.data, layout, config, where=where))

    def _session(self, layout):
        """This thread's NVDEC session for the layout's codec and frame size."""
        sessions = getattr(self._local, "sessions", None)
        if sessions is None:
            sessions = self._local.sessions = {}
        key = (layout.codec, layout.height, layout.width)
        if key not in sessions:
            sessions[key] = NvdecSession(*key, self.device)
            with self._lock:
                self._sessions.append(sessions[key])
        return sessions[key]

    def _decode_member(self, member: EncodedFrames, wanted: list[int], opened: tuple | None = None) -> torch.Tensor:
        """Frames ``wanted`` (distinct, ascending) of ``member`` on the CPU or torchcodec's CUDA
        decoder: (len(wanted), 3, H, W) uint8 on the stage's device."""
        kind, opened = opened or self._open(member)
        try:
            if kind == "torchcodec":  # torchcodec's CUDA decoder: frames already on the device
                return opened.frames(wanted)
            frames = self._cpu.decode(opened, wanted, where=member.member_id)
        except DecodeError as err:
            raise DecodeStageError(f"{member.member_id}: {err}" if kind == "torchcodec" else str(err)) from err
        return frames.to(self._target)

    def _decode_group(self, group: list[tuple[EncodedFrames, list[int]]]) -> list[torch.Tensor]:
        """One decode thread's share of a batch: NVDEC members back to back through this
        thread's sessions (one end-of-stream per session), the rest one by one; complete
        when this returns."""
        results: list[torch.Tensor | None] = [None] * len(group)
        by_session: dict[object, list[int]] = {}
        opened = []
        for position, (member, wanted) in enumerate(group):
            kind, stream = self._open(member)
            opened.append(stream)
            if kind == "nvdec":
                by_session.setdefault(self._session(stream.layout), []).append(position)
            else:
                results[position] = self._decode_member(member, wanted, (kind, stream))
        for session, positions in by_session.items():
            outs = session.decode([(opened[p], group[p][1]) for p in positions])
            session.stream.synchronize()
            for position, out in zip(positions, outs):
                results[position] = out
        return results

    # -- a batch ----------------------------------------------------------------------------------

    def wrap(self, loader, *, ahead: int = 1):
        """Iterate ``loader`` with each batch decoded in a background thread, ``ahead``
        batches in advance, so decoding overlaps the training step on the previous batch
        (torchcodec releases the GIL while decoding). A decode error is re-raised here.

        Leaving the loop early (``break``, an exception, the iterator collected, or the
        interpreter exiting) stops the thread and waits for it: a thread still inside the
        decoder when Python finalizes aborts the process ("terminate called without an active
        exception"; 13 of 16 runs of ``tests/scripts/decode_stage_exit.py`` did).
        """
        results: queue.Queue = queue.Queue(maxsize=max(ahead, 1))
        done = object()
        stop = threading.Event()

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

    def __call__(self, batch: dict) -> dict:
        """Decode ``batch``'s encoded video in place of ``ENCODED_KEY``; returns the batch.

        Raises:
            DecodeStageError: a member the device cannot decode or that does not hold what the
                dataset records (named), frames indices beyond a member, or samples of one
                camera with different window lengths.
        """
        encoded = batch.pop(ENCODED_KEY, None)
        if not encoded:
            return batch
        started = time.perf_counter()
        jobs = []  # (key, member index, wanted frames)
        for key, payload in encoded.items():
            lengths = {len(indices) for _, indices in payload["refs"]}
            if len(lengths) > 1:
                raise DecodeStageError(f"{key}: samples of one batch ask for windows of {sorted(lengths)} frames; one length per camera")
            wanted: dict[int, set[int]] = {}
            for member_index, indices in payload["refs"]:
                wanted.setdefault(member_index, set()).update(indices)
            for member_index, frames in wanted.items():
                member = payload["members"][member_index]
                if member.frames is not None and (min(frames) < 0 or max(frames) >= member.frames):
                    raise DecodeStageError(f"{member.member_id}: frames {sorted(f for f in frames if not 0 <= f < member.frames)} "
                                           f"are outside its {member.frames} frames")
                jobs.append((key, member_index, sorted(frames)))

        members = [(encoded[key]["members"][member_index], wanted) for key, member_index, wanted in jobs]
        if self.backend == "nvdec":
            # Each thread takes a share of the members, balanced by the frames it will feed.
            groups: list[list[int]] = [[] for _ in range(min(self.threads, len(jobs)))]
            load = [0] * len(groups)
            for position in sorted(range(len(jobs)), key=lambda p: -len(jobs[p][2])):
                lightest = load.index(min(load))
                groups[lightest].append(position)
                load[lightest] += len(jobs[position][2])
            parts = self._map(self._decode_group, [[members[p] for p in group] for group in groups])
            results: list = [None] * len(jobs)
            for group, outs in zip(groups, parts):
                for position, out in zip(group, outs):
                    results[position] = out
            current = torch.cuda.current_stream(self.device)
            for frames in results:
                frames.record_stream(current)  # allocated on a decode thread's stream; used here
        else:
            results = self._map(lambda item: self._decode_member(*item), members)
        decoded = {(key, member_index): (frames, wanted) for (key, member_index, wanted), frames in zip(jobs, results)}
        for key, payload in encoded.items():
            batch[key] = self._assemble(payload, {m: decoded[(k, m)] for (k, m) in decoded if k == key})
            self.counters["frames_decoded"] += sum(len(indices) for _, indices in payload["refs"])
        self.counters["decode_seconds"] += time.perf_counter() - started
        return batch

    def _map(self, function, items: list) -> list:
        if self._pool is None or len(items) < 2:
            return [function(item) for item in items]
        return list(self._pool.map(function, items))

    def _assemble(self, payload: dict, decoded: dict[int, tuple[torch.Tensor, list[int]]]) -> torch.Tensor:
        """One camera's (B, T, 3, H, W) tensor (T dropped for one-frame windows), float in [0, 1]
        unless the samples asked for uint8: one gather per member."""
        refs, members = payload["refs"], payload["members"]
        first_frames = decoded[refs[0][0]][0]
        length = len(refs[0][1])
        out = torch.empty((len(refs), length, *first_frames.shape[1:]), dtype=torch.uint8, device=first_frames.device)
        rows: dict[int, tuple[list[int], list[int], list[int]]] = {}
        for sample, (member_index, indices) in enumerate(refs):
            frames, wanted = decoded[member_index]
            position = {j: i for i, j in enumerate(wanted)}
            samples, steps, sources = rows.setdefault(member_index, ([], [], []))
            for step, j in enumerate(indices):
                samples.append(sample)
                steps.append(step)
                sources.append(position[j])
        for member_index, (samples, steps, sources) in rows.items():
            frames = decoded[member_index][0]
            index = torch.tensor(sources, device=frames.device)
            out[torch.tensor(samples, device=out.device), torch.tensor(steps, device=out.device)] = frames.index_select(0, index)
        if members[refs[0][0]].squeeze:
            out = out.squeeze(1)
        if members[refs[0][0]].as_float:
            out = out.to(torch.float32).div_(255.0)
        return out

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

