"""PyAV (FFmpeg) on the CPU: the decoder every install has; frames bit-identical to torchcodec's.
Also what decodes depth videos to their 12-bit codes, whatever the backend (as LeRobot does)."""

from __future__ import annotations

import bisect
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import torch

from lerobot_shards.core.errors import DecodeError, FormatError
from lerobot_shards.core.format.features import is_depth_pixel_format
from lerobot_shards.reader.decode.backends.cpu import CpuDecoderBackend
from lerobot_shards.reader.decode.spec import EpisodeDecoder, FrameSpec, check_frame_spec

if TYPE_CHECKING:
    from av.video.frame import VideoFrame


class PyAVDecoder:
    """FFmpeg through PyAV over one member, kept open across calls as torchcodec's decoder is: the
    container and its codec context are opened once (one thread, like torchcodec's default), and
    a call continues decoding from where the last one stopped when that is no longer than seeking
    (frames asked in order, the usual case within an admitted episode), else seeks to the
    keyframe at or before the frame (the GOP bound of ``check_mp4`` caps that cost).
    ``pixel_format`` is what frames are converted to: ``rgb24`` (uint8 ``(T, 3, H, W)``) or
    ``gray12le`` (a depth video's codes, uint16 ``(T, 1, H, W)``, as LeRobot decodes depth).
    """

    def __init__(self, data: bytes, spec: FrameSpec | None, pixel_format: str = "rgb24"):
        import av
        from av.video.reformatter import VideoReformatter

        self._spec = spec
        # One converter kept with the decoder: it keeps its swscale context across frames, where
        # VideoFrame.to_ndarray(format=...) makes a new one per frame (1.00 vs 0.44 ms for a
        # 480x640 frame; the same bytes).
        self._reformatter = VideoReformatter()
        self._format = pixel_format
        self._container = av.open(io.BytesIO(data), mode="r")
        try:
            self._stream = self._container.streams.video[0]
            self._stream.codec_context.thread_count = 1  # workers are the parallelism; as torchcodec
            packets = [(p.pts, p.is_keyframe) for p in self._container.demux(self._stream) if p.size]
            context = self._stream.codec_context
            if pixel_format == "gray12le" and not is_depth_pixel_format(context.pix_fmt):
                # A depth member must be one plane of codes: a colour stream's luma would read as depth.
                raise FormatError(f"a depth member whose stream is {context.pix_fmt}, not one plane of depth codes")
            check_frame_spec((context.height, context.width, len(packets)), spec)
        except BaseException:
            self._container.close()
            raise
        timed = [(pts, key) for pts, key in packets if pts is not None]
        self._pts: list[int] | None = None  # None: no timestamps to seek by, decode from the start
        self._position_of: dict[int, int] = {}
        self._key_positions: list[int] = []
        if len(timed) == len(packets):
            self._pts = sorted(pts for pts, _ in timed)  # frame j is the j-th presentation time
            self._position_of = {pts: j for j, pts in enumerate(self._pts)}
            self._key_positions = sorted(self._position_of[pts] for pts, key in timed if key)
        self._frames: Iterator[VideoFrame] | None = (
            None  # the running decode (a generator kept across calls), None after a seek is due
        )
        self._last = -1  # position of the last frame it yielded
        # The last call's frames: a window slides by one anchor, so most of what it asks was just
        # converted (re-decoding it would need a seek back to its keyframe).
        self._recent: dict[int, np.ndarray] = {}

    def close(self) -> None:
        """Release the container and its decoder (also done when the object is collected)."""
        self._frames = None
        self._container.close()

    def _check_frame(self, frame, position) -> None:
        if self._spec is not None and (frame.height, frame.width) != (self._spec.height, self._spec.width):
            raise DecodeError(
                f"frame {position} is {frame.height}x{frame.width}, expected {self._spec.height}x{self._spec.width}"
            )

    def _to_array(self, frame) -> np.ndarray:
        return self._reformatter.reformat(frame, format=self._format).to_ndarray()

    def _key_before(self, position: int) -> int:
        """Position of the keyframe at or before ``position``."""
        return self._key_positions[max(bisect.bisect_right(self._key_positions, position) - 1, 0)]

    def _seek_to(self, position: int) -> Iterator[VideoFrame]:
        """Seek to the keyframe at or before ``position`` and return the decode from there."""
        key = self._key_before(position)
        target = self._pts[key] if self._pts is not None else 0
        self._container.seek(target, stream=self._stream, backward=True, any_frame=False)
        self._frames = self._container.decode(self._stream)
        self._last = -1
        return self._frames

    def _from_start(self, wanted: list[int], found: dict[int, np.ndarray]) -> None:
        self._container.seek(0)
        self._frames, self._last = None, -1  # the running decode is lost
        for position, frame in enumerate(self._container.decode(self._stream)):
            self._check_frame(frame, position)
            if position in wanted:
                found[position] = self._to_array(frame)
            if position >= wanted[-1]:
                break

    def frames(self, indices: list[int]) -> torch.Tensor:
        wanted = sorted(set(indices))
        if self._pts is not None and wanted and (wanted[0] < 0 or wanted[-1] >= len(self._pts)):
            raise IndexError(f"frames {[i for i in wanted if not 0 <= i < len(self._pts)]} beyond the end of the video")
        found = {j: self._recent[j] for j in wanted if j in self._recent}
        if len(found) < len(wanted):
            self._decode_into(wanted, found)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise IndexError(f"frames {missing} beyond the end of the video")
        self._recent = found
        stacked = torch.from_numpy(np.stack([found[i] for i in indices]))
        if stacked.dim() == 3:  # one plane (gray formats): (T, H, W) -> (T, 1, H, W)
            return stacked.unsqueeze(1)
        # (T, C, H, W) over channels-last memory, as torchcodec returns frames (a copy into CHW
        # order cost 0.5 ms per 480x640 frame; collation copies once anyway).
        return stacked.permute(0, 3, 1, 2)

    def _decode_into(self, wanted: list[int], found: dict[int, np.ndarray]) -> None:
        """Decode the frames of ``wanted`` (ascending) not yet in ``found`` into it."""
        if self._pts is None:
            self._from_start([j for j in wanted if j not in found], found)
        else:
            wanted_set = set(wanted)
            for j in wanted:
                if j in found:
                    continue
                # Decoding on from the last frame costs j - last frames; a seek costs j - key(j) and a
                # flush. Continue unless j lies behind, or a keyframe after the last frame is closer.
                frames = self._frames
                if frames is None or j <= self._last or self._key_before(j) > self._last + 1:
                    frames = self._seek_to(j)
                for frame in frames:
                    position = self._position_of.get(frame.pts) if frame.pts is not None else None
                    self._check_frame(frame, position)
                    if position is None:
                        break  # a frame the demuxed table does not know: decode from the start below
                    self._last = position
                    if position in wanted_set and position not in found:
                        found[position] = self._to_array(frame)
                    if position >= j:
                        break
                else:
                    self._frames = None  # the stream ended
            missing = [i for i in wanted if i not in found]
            if missing:  # a stream the seek did not land as expected on: decode from the start
                self._from_start(missing, found)


class PyAVBackend(CpuDecoderBackend):
    name = "pyav"
    depth = True

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import av  # noqa: F401
        except ImportError as err:
            return f"PyAV cannot be imported ({err}); pip install av"
        return None

    @classmethod
    def member_decoder(cls, data: bytes, spec: FrameSpec | None, *, depth: bool = False) -> EpisodeDecoder:
        return PyAVDecoder(data, spec, pixel_format="gray12le" if depth else "rgb24")
