"""PyAV (FFmpeg) on the CPU: the decoder every install has; frames bit-identical to torchcodec's.
Also what decodes depth videos to their 12-bit codes, whatever the backend (as LeRobot does)."""

from __future__ import annotations

import bisect
import io

import numpy as np
import torch

from lerobot_shards.core.errors import DecodeError
from lerobot_shards.reader.decode.backends.cpu import CpuDecoderBackend
from lerobot_shards.reader.decode.spec import EpisodeDecoder, FrameSpec, check_frame_spec


class PyAVDecoder:
    """PyAV fallback: frame j is decoded from the keyframe at or before it (the GOP bound of
    ``check_mp4`` caps that cost), not from the start of the member. ``pixel_format`` is what
    frames are converted to: ``rgb24`` (uint8 ``(T, 3, H, W)``) or ``gray12le`` (a depth
    video's codes, uint16 ``(T, 1, H, W)``, as LeRobot decodes depth)."""

    def __init__(self, data: bytes, spec: FrameSpec | None, pixel_format: str = "rgb24"):
        import av

        self._data = data
        self._spec = spec
        self._format = pixel_format
        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            packets = [(p.pts, p.is_keyframe) for p in container.demux(stream) if p.size]
            check_frame_spec((stream.codec_context.height, stream.codec_context.width, len(packets)), spec)
        if any(pts is None for pts, _ in packets):
            self._pts, self._keys = None, None  # no timestamps to seek by: decode from the start
        else:
            self._pts = sorted(pts for pts, _ in packets)  # frame j is the j-th presentation time
            self._keys = sorted(pts for pts, key in packets if key)

    def _check_frame(self, frame, position) -> None:
        if self._spec is not None and (frame.height, frame.width) != (self._spec.height, self._spec.width):
            raise DecodeError(
                f"frame {position} is {frame.height}x{frame.width}, expected {self._spec.height}x{self._spec.width}"
            )

    def _from_start(self, container, wanted: list[int], found: dict[int, np.ndarray]) -> None:
        container.seek(0)
        for position, frame in enumerate(container.decode(video=0)):
            self._check_frame(frame, position)
            if position in wanted:
                found[position] = frame.to_ndarray(format=self._format)
            if position >= wanted[-1]:
                break

    def frames(self, indices: list[int]) -> torch.Tensor:
        import av

        wanted = sorted(set(indices))
        if self._pts is not None and wanted and (wanted[0] < 0 or wanted[-1] >= len(self._pts)):
            raise IndexError(f"frames {[i for i in wanted if not 0 <= i < len(self._pts)]} beyond the end of the video")
        found: dict[int, np.ndarray] = {}
        with av.open(io.BytesIO(self._data)) as container:
            stream = container.streams.video[0]
            if self._pts is None:
                self._from_start(container, wanted, found)
            else:
                position_of = {pts: j for j, pts in enumerate(self._pts)}
                groups: dict[int, list[int]] = {}
                for j in wanted:
                    key = self._keys[max(bisect.bisect_right(self._keys, self._pts[j]) - 1, 0)]
                    groups.setdefault(key, []).append(j)
                for key, members in sorted(groups.items()):
                    container.seek(key, stream=stream, backward=True, any_frame=False)
                    last = self._pts[members[-1]]
                    for frame in container.decode(stream):
                        position = position_of.get(frame.pts)
                        self._check_frame(frame, position)
                        if position in members:
                            found[position] = frame.to_ndarray(format=self._format)
                        if frame.pts is None or frame.pts >= last:
                            break
                missing = [i for i in wanted if i not in found]
                if missing:  # a stream the seek did not land as expected on: decode from the start
                    self._from_start(container, missing, found)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise IndexError(f"frames {missing} beyond the end of the video")
        stacked = torch.from_numpy(np.stack([found[i] for i in indices]))
        if stacked.dim() == 3:  # one plane (gray formats): (T, H, W) -> (T, 1, H, W)
            return stacked.unsqueeze(1)
        return stacked.permute(0, 3, 1, 2).contiguous()


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
