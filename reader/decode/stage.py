"""Decode outside the DataLoader workers: workers ship compressed frames, one stage decodes.

The shape NVDEC needs: DataLoader workers cannot each own a CUDA context cheaply, so with
``PackedDataset(..., decode_device=...)`` workers put each camera's *compressed* episode
member and the frame indices a sample needs into the batch (``collate`` dedupes members
shared by samples of a batch), and ``DecodeStage`` decodes them in the training process on
``device``: ``"cuda"`` (torchcodec's NVDEC decoder) or ``"cpu"`` (the same code path, tested
in CI). Output keys, shapes, dtypes and value scale equal the in-worker CPU path.

    loader = DataLoader(ds, batch_size=64, num_workers=8, collate_fn=reader.decode.stage.collate)
    stage = DecodeStage(device="cuda")
    for batch in stage.wrap(loader):     # or: batch = stage(batch) inside the loop
        ...
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch.utils.data import default_collate

from reader.errors import DecodeStageError
from reader.format import check_mp4

ENCODED_KEY = "__encoded_video__"

# NVDEC on A100/H100 decodes H.264 and HEVC, not AV1 (packs made with --video copy keep AV1).
_NVDEC_CODECS = {"hevc", "h264"}


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
    """Decode a batch's encoded video on ``device`` with decoders cached per member.

    Args:
        device: ``"cuda"``, ``"cuda:N"`` or ``"cpu"``.
        cache_size: decoders kept open (LRU), i.e. episodes x cameras.
        allow_cpu_fallback: when CUDA decoding is impossible, decode on the CPU instead of
            raising; counted in ``stats()['cpu_fallbacks']``.

    Raises:
        DecodeStageError: CUDA requested without a CUDA device or a CUDA torchcodec build,
            or an AV1 member on the GPU (repack with ``--video hevc``).
    """

    def __init__(self, device: str = "cuda", *, cache_size: int = 64, allow_cpu_fallback: bool = False):
        self.device = torch.device(device)
        self.cache_size = cache_size
        self.allow_cpu_fallback = allow_cpu_fallback
        self._decoders: OrderedDict[tuple[str, str], object] = OrderedDict()
        self.counters = {"decoder_hits": 0, "decoder_misses": 0, "frames_decoded": 0, "decode_seconds": 0.0, "cpu_fallbacks": 0}
        if self.device.type == "cuda" and not allow_cpu_fallback:
            self._check_cuda()

    def _check_cuda(self) -> None:
        if not torch.cuda.is_available():
            raise DecodeStageError("decode_device='cuda' but torch sees no CUDA device; use 'cpu' or allow_cpu_fallback=True")
        try:
            from torchcodec.decoders import VideoDecoder  # noqa: F401
        except Exception as err:
            raise DecodeStageError(f"torchcodec cannot be imported ({err}); install a CUDA build of torchcodec") from err

    def stats(self) -> dict:
        return dict(self.counters)

    def _decoder(self, member: EncodedFrames):
        from torchcodec.decoders import VideoDecoder

        key = (member.member_id, str(self.device))
        decoder = self._decoders.get(key)
        if decoder is not None:
            self._decoders.move_to_end(key)
            self.counters["decoder_hits"] += 1
            return decoder, self.device
        self.counters["decoder_misses"] += 1
        device = self.device
        if device.type == "cuda" and member.codec not in _NVDEC_CODECS:
            if not self.allow_cpu_fallback:
                raise DecodeStageError(
                    f"{member.member_id}: codec {member.codec!r} cannot be decoded by NVDEC on A100/H100; "
                    "repack with `lerobot-shards pack --video hevc` (or h264)"
                )
            device = torch.device("cpu")
            self.counters["cpu_fallbacks"] += 1
        height, width = member.frame_size if member.frame_size is not None else (None, None)
        check_mp4(member.data, where=member.member_id, frames=member.frames, height=height, width=width)
        try:
            decoder = VideoDecoder(member.data, seek_mode="exact", device=str(device))
        except RuntimeError as err:
            if device.type == "cuda" and self.allow_cpu_fallback:
                self.counters["cpu_fallbacks"] += 1
                device = torch.device("cpu")
                decoder = VideoDecoder(member.data, seek_mode="exact")
            else:
                raise DecodeStageError(f"{member.member_id}: cannot open a decoder on {device} ({err})") from err
        _check_member(decoder, member)
        self._decoders[key] = decoder
        while len(self._decoders) > self.cache_size:
            self._decoders.popitem(last=False)
        return decoder, device

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
        encoded = batch.pop(ENCODED_KEY, None)
        if not encoded:
            return batch
        started = time.perf_counter()
        # With allow_cpu_fallback on a machine without CUDA, frames stay on the CPU.
        target = self.device if self.device.type == "cpu" or torch.cuda.is_available() else torch.device("cpu")
        for key, payload in encoded.items():
            members, refs = payload["members"], payload["refs"]
            frames = []
            for member_index, indices in refs:
                member = members[member_index]
                decoder, _ = self._decoder(member)
                decoded = decoder.get_frames_at(indices=list(indices)).data.to(target)
                self.counters["frames_decoded"] += len(indices)
                if member.as_float:
                    decoded = decoded.to(torch.float32).div_(255.0)
                frames.append(decoded.squeeze(0) if member.squeeze else decoded)
            batch[key] = torch.stack(frames)
        self.counters["decode_seconds"] += time.perf_counter() - started
        return batch


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


def _check_member(decoder, member: EncodedFrames) -> None:
    """A member must hold the frames and frame size the dataset records, before any decode."""
    metadata = decoder.metadata
    found = (metadata.height, metadata.width, metadata.num_frames)
    expected = (*member.frame_size, member.frames) if member.frame_size is not None else None
    if expected is not None and member.frames is not None and found != expected:
        raise DecodeStageError(
            f"{member.member_id}: holds {found[2]} frames of {found[0]}x{found[1]}; the dataset records "
            f"{expected[2]} frames of {expected[0]}x{expected[1]} (damaged or altered member)"
        )
