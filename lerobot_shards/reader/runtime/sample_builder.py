"""Building LeRobot-identical samples from an admitted episode (no I/O; frames from the CPU decoders, or shipped to a DecodeStage).

Mirrors ``LeRobotDataset.__getitem__`` (lerobot 0.6.1): every column of the anchor row;
for each windowed key the rows at clamped offsets (``torch.stack`` gives a leading T axis,
kept even for one element) and ``<key>_is_pad``; camera frames as float32 CHW in [0, 1]
(``frames / 255.0``) or uint8, a video window stacked T first and squeezed when T == 1;
``task`` as a string. Cameras stored as pictures (image features) are decoded from their row's
bytes as LeRobot decodes them (float32, or uint8 with ``return_uint8`` for 8-bit pictures; a
window keeps its T axis, as for any tabular key); depth videos are decoded to their 12-bit
codes and dequantized, depth pictures converted to the unit asked for (``depth_unit``), both
float32 whatever ``return_uint8`` says, as LeRobot returns them; image transforms apply to
every camera but depth ones; language columns come as LeRobot's lists of messages. With
``encoded_video`` only colour videos travel to the stage: pictures and depth are decoded here,
on the CPU (counted in ``images_decoded`` and ``depth_frames_decoded``).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from lerobot_shards.core.errors import EpisodeDataError
from lerobot_shards.core.format.features import LANGUAGE_COLUMNS, CameraGeometry, DepthQuantization, Features
from lerobot_shards.core.format.images import image_column_bytes
from lerobot_shards.core.windows import query_frames
from lerobot_shards.reader.decode.depth import convert_unit, dequantize
from lerobot_shards.reader.decode.frames import CpuDecoders
from lerobot_shards.reader.decode.images import decode_image
from lerobot_shards.reader.decode.spec import EpisodeDecoder, FrameSpec
from lerobot_shards.reader.decode.unit_float import to_unit_float
from lerobot_shards.reader.decode.wire import ENCODED_KEY, EncodedFrames
from lerobot_shards.reader.fetch.episode_pool import LoadedEpisode
from lerobot_shards.reader.runtime.language import language_value


class SampleBuilder:
    """Turns (episode, anchor frame) into a sample dict."""

    def __init__(
        self,
        *,
        video_keys: list[str],
        offsets: dict[str, np.ndarray],
        tasks: dict[int, str],
        decoders: CpuDecoders,
        return_uint8: bool = False,
        image_transforms: Callable | None = None,
        encoded_video: bool = False,
        member_prefix: str = "",
        frame_sizes: dict[str, tuple[int, int]] | None = None,
        decode_threads: int = 1,
        features: Features | None = None,
        depth_unit: str = "mm",
        copy_rows: bool = True,
    ):
        self.video_keys = list(video_keys)
        features = features if features is not None else Features()
        # Cameras stored as pictures in the rows, and their declared geometry (every picture has it).
        self.image_keys = features.image_keys
        self.image_cameras: dict[str, CameraGeometry] = {
            k: camera for k in self.image_keys if (camera := features[k].camera) is not None
        }
        # Depth cameras (video or picture): how their values map to depth (parsed with the manifest).
        self.depth: dict[str, DepthQuantization] = {
            k: q for k in (*self.video_keys, *self.image_keys) if (q := features[k].depth) is not None
        }
        self.depth_unit = depth_unit
        # A sample that crosses to another process alone must own its rows (a view would drag
        # the whole episode column through IPC); one copied into a batch at once need not.
        self.copy_rows = copy_rows
        self.cameras = [*self.video_keys, *self.image_keys]
        self.offsets = offsets
        # Each window's lowest and highest offset: whether a window lies inside its episode.
        self._bounds = {k: (int(o.min()), int(o.max())) for k, o in offsets.items() if len(o)}
        self.tasks = tasks
        self.decoders = decoders
        self.return_uint8 = return_uint8
        self.image_transforms = image_transforms
        # Ship compressed members + frame indices for a DecodeStage outside the workers.
        self.encoded_video = encoded_video
        self.member_prefix = member_prefix
        # (height, width) per camera from the manifest: every member is checked against it.
        self.frame_sizes = dict(frame_sizes or {})
        # Cameras of a sample decode side by side (the decoder releases the GIL); made on first
        # use so a builder made before a fork has no threads in the parent.
        self.decode_threads = max(1, min(int(decode_threads), len(self.cameras)))
        self._threads: ThreadPoolExecutor | None = None
        # Builds of different episodes may run side by side (runtime/side_by_side.py): what they
        # share (counters, the open decoders' table, the camera threads) changes under this lock.
        self._lock = threading.Lock()
        self.counters = {
            "decoder_hits": 0,
            "decoder_misses": 0,
            "decode_seconds": 0.0,
            "frames_decoded": 0,
            "images_decoded": 0,
            "depth_frames_decoded": 0,
        }
        # Open decoders per held episode: they go when the pool drops the episode.
        self._opened: weakref.WeakKeyDictionary[LoadedEpisode, dict[str, EpisodeDecoder]] = weakref.WeakKeyDictionary()
        # Admissions whose members were shipped (encoded_video): later draws ship none.
        self._shipped: weakref.WeakSet[LoadedEpisode] = weakref.WeakSet()

    def decoder(self, episode: LoadedEpisode, camera: str) -> EpisodeDecoder:
        """The episode's open decoder for a camera (opened on first use, kept while the pool
        holds the episode). The manifest's frame size and the member's recorded frame count
        are checked when the decoder opens."""
        with self._lock:
            decoders = self._opened.setdefault(episode, {})
        decoder = decoders.get(camera)
        if decoder is None:
            size = self.frame_sizes.get(camera)
            spec = FrameSpec(size[0], size[1], episode.entry.cameras[camera].samples) if size else None
            decoder = decoders[camera] = self.decoders.open(
                episode.video[camera], where=episode.where(camera), spec=spec, depth=camera in self.depth
            )
        return decoder

    def _decode_images(self, episode: LoadedEpisode, key: str, wanted: list[int]) -> torch.Tensor:
        """An image feature's pictures at ``wanted`` rows, as LeRobot's sample holds them: one
        picture ``(C, H, W)``, or a window stacked ``(T, C, H, W)`` (never squeezed: LeRobot
        stacks image keys like any tabular key)."""
        column, depth = episode.columns[key], key in self.depth
        pictures = []
        for row in wanted:
            where = f"{episode.where()} image {key} frame {row}"
            pictures.append(
                decode_image(
                    image_column_bytes(column[row]),
                    camera=self.image_cameras[key],
                    where=where,
                    # LeRobot's return_uint8 keeps only video frames uint8: its pictures are
                    # PIL images made tensors, float32 in [0, 1], whatever it says.
                    as_float=True,
                )
            )
        stacked = torch.stack(pictures) if key in self.offsets else pictures[0]
        if depth:
            stacked = convert_unit(stacked, self.depth[key].unit, self.depth_unit)
        return stacked

    def _decode(self, episode: LoadedEpisode, key: str, wanted: list[int]) -> torch.Tensor:
        """One camera's frames of a sample, as the sample holds them (runs on a decode thread:
        it touches only this camera's decoder)."""
        if key in self.image_cameras:
            return self._decode_images(episode, key, wanted)
        decoded = self.decoders.decode(self.decoder(episode, key), wanted, where=episode.where(key))
        if key in self.depth:
            return dequantize(decoded, self.depth[key], self.depth_unit).squeeze(0)
        if not self.return_uint8:
            decoded = to_unit_float(decoded)  # LeRobot's values (reader/decode/unit_float.py)
        return decoded.squeeze(0)

    def _decode_cameras(self, episode: LoadedEpisode, wanted: dict[str, list[int]]) -> dict[str, torch.Tensor]:
        """Every camera's frames, in ``wanted``'s order; side by side on ``decode_threads``."""
        videos = [key for key in wanted if key not in self.image_cameras]
        with self._lock:
            held = self._opened.setdefault(episode, {})
            opened = sum(key in held for key in videos)
            self.counters["decoder_hits"] += opened
            self.counters["decoder_misses"] += len(videos) - opened
            self.counters["frames_decoded"] += sum(len(rows) for rows in wanted.values())
            self.counters["images_decoded"] += sum(len(rows) for key, rows in wanted.items() if key in self.image_cameras)
            self.counters["depth_frames_decoded"] += sum(
                len(rows) for key, rows in wanted.items() if key in self.depth and key not in self.image_cameras
            )
        if self.decode_threads == 1 or len(wanted) == 1:
            return {key: self._decode(episode, key, rows) for key, rows in wanted.items()}
        with self._lock:
            if self._threads is None:
                self._threads = ThreadPoolExecutor(self.decode_threads, thread_name_prefix="lerobot-shards-decode")
        futures = {key: self._threads.submit(self._decode, episode, key, rows) for key, rows in wanted.items()}
        # In camera order: the first camera that failed raises, as one after another would.
        return {key: future.result() for key, future in futures.items()}

    def transform(self, item: dict) -> dict:
        """Apply the image transforms to a built sample's cameras, in place (LeRobot: every
        camera but depth maps); returns ``item``."""
        if self.image_transforms is not None:
            for key in self.cameras:
                if key in item and key not in self.depth:
                    item[key] = self.image_transforms(item[key])
        return item

    @property
    def open_decoders(self) -> int:
        """Decoders open now (each on an episode something still holds)."""
        return sum(len(held) for held in list(self._opened.values()))

    def close(self) -> None:
        """Stop the decode threads and close the open decoders (a later build starts and opens
        them again): none outlives its stream, even while its episode lives on (handed over)."""
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        with self._lock:
            self._opened.clear()

    def _window(self, key: str, frame: int, length: int) -> tuple[np.ndarray, torch.Tensor]:
        """``query_frames`` of one key's window: its rows and ``is_pad``. A window inside the
        episode (most are) needs no clipping: its rows are the offsets moved, nothing padded."""
        offsets = self.offsets[key]
        bounds = self._bounds.get(key)
        if bounds is not None and frame + bounds[0] >= 0 and frame + bounds[1] < length:
            return frame + offsets, torch.zeros(len(offsets), dtype=torch.bool)
        rows, is_pad = query_frames(frame, length, offsets)
        return rows, torch.from_numpy(is_pad)

    def build(self, episode: LoadedEpisode, frame: int, *, last: bool = False, transform: bool = True) -> dict:
        """The sample at ``frame`` of an admitted episode; ``last``: this is the admission's
        last draw (a ``DecodeStage`` may then drop its members). ``transform=False`` leaves the
        image transforms to ``transform`` (builds running side by side apply them afterwards,
        in draw order, so a random transform draws from torch's generator in that order).

        Safe to call from several threads at once for different episodes; one episode's builds
        run one at a time (its decoders are not thread-safe)."""
        length = episode.entry.length
        item: dict = {}
        for name, values in episode.columns.items():
            if name in self.image_cameras:
                continue  # decoded below with the other cameras
            if name in LANGUAGE_COLUMNS:
                item[name] = language_value(name, values[frame])
                continue
            row = values[frame]
            item[name] = row.clone() if self.copy_rows and isinstance(row, torch.Tensor) else row
        windows = {key: self._window(key, frame, length) for key in self.offsets}
        for key, (rows, is_pad) in windows.items():
            item[f"{key}_is_pad"] = is_pad
            if key in self.cameras:
                continue
            values = episode.columns[key]
            item[key] = values[torch.from_numpy(rows)] if isinstance(values, torch.Tensor) else [values[r] for r in rows]
        wanted_by_key: dict[str, list[int]] = {}
        encoded: dict[str, EncodedFrames] = {}
        # A member crosses to the stage with its admission's first draw only (lerobot_shards/reader/decode/wire.py).
        admits = self.encoded_video and episode not in self._shipped
        started = time.perf_counter()
        for key in self.cameras:
            if key in windows:
                wanted = windows[key][0].tolist()
            else:
                wanted = [frame]
            if key in self.image_cameras:
                wanted_by_key[key] = wanted
                continue
            member = episode.entry.cameras[key]
            # Past the member's pre-roll; rows past a short video (--on-frame-mismatch pad) reuse its last frame.
            wanted = [member.position(r) for r in wanted]
            if self.encoded_video and key not in self.depth:
                encoded[key] = EncodedFrames(
                    member_id=f"{self.member_prefix}/{episode.where(key)}",
                    data=episode.video[key] if admits else None,
                    codec=member.codec,
                    indices=tuple(wanted),
                    squeeze=len(wanted) == 1,
                    as_float=not self.return_uint8,
                    frame_size=self.frame_sizes.get(key),
                    frames=member.samples,
                    admits=admits,
                    retires=last,
                )
                continue
            wanted_by_key[key] = wanted
        frames = self._decode_cameras(episode, wanted_by_key) if wanted_by_key else {}
        with self._lock:
            self.counters["decode_seconds"] += time.perf_counter() - started
        item = {**frames, **item}
        if encoded:
            item[ENCODED_KEY] = encoded
            if admits:
                self._shipped.add(episode)
        if transform:
            self.transform(item)
        task_index = int(item["task_index"])
        if task_index not in self.tasks:
            raise EpisodeDataError(
                f"{episode.where()}: task_index {task_index} is not in meta/tasks.parquet ({len(self.tasks)} tasks)"
            )
        item["task"] = self.tasks[task_index]
        return item
