"""Building LeRobot-identical samples from an admitted episode (no I/O, decode via a stage).

Mirrors ``LeRobotDataset.__getitem__`` (lerobot 0.6.1): every column of the anchor row;
for each windowed key the rows at clamped offsets (``torch.stack`` gives a leading T axis,
kept even for one element) and ``<key>_is_pad``; camera frames as float32 CHW in [0, 1]
(``frames / 255.0``) or uint8, a video window stacked T first and squeezed when T == 1;
``task`` as a string.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from reader.decode.frames import CpuDecoders, EpisodeDecoder, FrameSpec
from reader.decode.wire import ENCODED_KEY, EncodedFrames
from reader.errors import EpisodeDataError
from reader.fetch.episode_pool import LoadedEpisode
from reader.plan.windows import query_frames


class SampleBuilder:
    """Turns (episode, anchor frame) into a sample dict."""

    def __init__(
        self,
        *,
        video_keys: list[str],
        offsets: dict[str, np.ndarray],
        tasks: dict[int, str],
        stage: CpuDecoders,
        return_uint8: bool = False,
        image_transforms: Callable | None = None,
        encoded_video: bool = False,
        member_prefix: str = "",
        frame_sizes: dict[str, tuple[int, int]] | None = None,
        decode_threads: int = 1,
    ):
        self.video_keys = list(video_keys)
        self.offsets = offsets
        self.tasks = tasks
        self.stage = stage
        self.return_uint8 = return_uint8
        self.image_transforms = image_transforms
        # Ship compressed members + frame indices for a DecodeStage outside the workers.
        self.encoded_video = encoded_video
        self.member_prefix = member_prefix
        # (height, width) per camera from the manifest: every member is checked against it.
        self.frame_sizes = dict(frame_sizes or {})
        # Cameras of a sample decode side by side (the decoder releases the GIL); made on first
        # use so a builder made before a fork has no threads in the parent.
        self.decode_threads = max(1, min(int(decode_threads), len(self.video_keys)))
        self._threads: ThreadPoolExecutor | None = None
        self.counters = {"decoder_hits": 0, "decoder_misses": 0, "decode_seconds": 0.0, "frames_decoded": 0}
        # Open decoders per held episode: they go when the pool drops the episode.
        self._decoders: weakref.WeakKeyDictionary[LoadedEpisode, dict[str, EpisodeDecoder]] = weakref.WeakKeyDictionary()
        # Admissions whose members were shipped (encoded_video): later draws ship none.
        self._shipped: weakref.WeakSet[LoadedEpisode] = weakref.WeakSet()

    def decoder(self, episode: LoadedEpisode, camera: str) -> EpisodeDecoder:
        """The episode's open decoder for a camera (opened on first use, kept while the pool
        holds the episode). The manifest's frame size and the member's recorded frame count
        are checked when the decoder opens."""
        decoders = self._decoders.setdefault(episode, {})
        decoder = decoders.get(camera)
        if decoder is None:
            size = self.frame_sizes.get(camera)
            spec = FrameSpec(size[0], size[1], episode.entry.cameras[camera].frames) if size else None
            decoder = decoders[camera] = self.stage.open(episode.video[camera], where=episode.where(camera), spec=spec)
        return decoder

    def _decode(self, episode: LoadedEpisode, key: str, wanted: list[int]) -> torch.Tensor:
        """One camera's frames of a sample, as the sample holds them (runs on a decode thread:
        it touches only this camera's decoder)."""
        decoded = self.stage.decode(self.decoder(episode, key), wanted, where=episode.where(key))
        if not self.return_uint8:
            # Bit-identical to LeRobot's (frames / 255.0).type(torch.float32) (both divide in
            # float32; checked for all 256 values) but ~5x faster: no mixed-dtype kernel.
            decoded = decoded.to(torch.float32).div_(255.0)
        return decoded.squeeze(0)

    def _decode_cameras(self, episode: LoadedEpisode, wanted: dict[str, list[int]]) -> dict[str, torch.Tensor]:
        """Every camera's frames, in ``wanted``'s order; side by side on ``decode_threads``."""
        held = self._decoders.setdefault(episode, {})
        opened = sum(key in held for key in wanted)
        self.counters["decoder_hits"] += opened
        self.counters["decoder_misses"] += len(wanted) - opened
        self.counters["frames_decoded"] += sum(len(rows) for rows in wanted.values())
        if self.decode_threads == 1 or len(wanted) == 1:
            return {key: self._decode(episode, key, rows) for key, rows in wanted.items()}
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.decode_threads, thread_name_prefix="lerobot-shards-decode")
        futures = {key: self._threads.submit(self._decode, episode, key, rows) for key, rows in wanted.items()}
        # In camera order: the first camera that failed raises, as one after another would.
        return {key: future.result() for key, future in futures.items()}

    def close(self) -> None:
        """Stop the decode threads (a later build starts them again)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None

    def build(self, episode: LoadedEpisode, frame: int, *, last: bool = False) -> dict:
        """The sample at ``frame`` of an admitted episode; ``last``: this is the admission's
        last draw (a ``DecodeStage`` may then drop its members)."""
        length = episode.entry.length
        item: dict = {}
        for name, values in episode.columns.items():
            # clone: a view would drag the whole episode column through worker IPC.
            item[name] = values[frame].clone() if isinstance(values, torch.Tensor) else values[frame]
        for key, key_offsets in self.offsets.items():
            rows, is_pad = query_frames(frame, length, key_offsets)
            item[f"{key}_is_pad"] = torch.from_numpy(is_pad)
            if key in self.video_keys:
                continue
            values = episode.columns[key]
            item[key] = values[torch.from_numpy(rows)] if isinstance(values, torch.Tensor) else [values[r] for r in rows]
        wanted_by_key: dict[str, list[int]] = {}
        encoded: dict[str, EncodedFrames] = {}
        # A member crosses to the stage with its admission's first draw only (reader/decode/wire.py).
        admits = self.encoded_video and episode not in self._shipped
        started = time.perf_counter()
        for key in self.video_keys:
            if key in self.offsets:
                rows, _ = query_frames(frame, length, self.offsets[key])
                wanted = rows.tolist()
            else:
                wanted = [frame]
            member = episode.entry.cameras[key]
            # --on-frame-mismatch pad: rows past a short video reuse its last frame.
            wanted = [min(r, member.frames - 1) for r in wanted]
            if self.encoded_video:
                encoded[key] = EncodedFrames(
                    member_id=f"{self.member_prefix}/{episode.where(key)}",
                    data=episode.video[key] if admits else None,
                    codec=member.codec,
                    indices=tuple(wanted),
                    squeeze=len(wanted) == 1,
                    as_float=not self.return_uint8,
                    frame_size=self.frame_sizes.get(key),
                    frames=member.frames,
                    admits=admits,
                    retires=last,
                )
                continue
            wanted_by_key[key] = wanted
        frames = self._decode_cameras(episode, wanted_by_key) if wanted_by_key else {}
        self.counters["decode_seconds"] += time.perf_counter() - started
        item = {**frames, **item}
        if encoded:
            item[ENCODED_KEY] = encoded
            if admits:
                self._shipped.add(episode)
        if self.image_transforms is not None:
            for key in self.video_keys:
                item[key] = self.image_transforms(item[key])
        task_index = int(item["task_index"])
        if task_index not in self.tasks:
            raise EpisodeDataError(
                f"{episode.where()}: task_index {task_index} is not in meta/tasks.parquet ({len(self.tasks)} tasks)"
            )
        item["task"] = self.tasks[task_index]
        return item
