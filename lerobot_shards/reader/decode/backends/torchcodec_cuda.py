"""torchcodec's CUDA decoder (a CUDA build of torchcodec; the PyPI wheel is CPU-only).

It decodes through FFmpeg's demuxer with NVDEC underneath: a random access is a seek and a
decoder flush, which kept NVDEC 70-80% idle on an H100 (docs/DESIGN_NOTES.md section 6), so
``"nvdec"`` is the default on CUDA; this backend is for machines without PyNvVideoCodec.
"""

from __future__ import annotations

import torch

from lerobot_shards.core.errors import DecodeError
from lerobot_shards.core.format import check_mp4
from lerobot_shards.reader.decode.backends.base import DecodeBackend, Job, Opened, frame_size, write_rows
from lerobot_shards.reader.decode.backends.torchcodec import TorchCodecDecoder
from lerobot_shards.reader.decode.spec import FrameSpec, check_frame_spec
from lerobot_shards.reader.decode.wire import EncodedFrames


class TorchCodecCudaBackend(DecodeBackend):
    name = "torchcodec"
    device_type = "cuda"
    codecs = ("hevc", "h264")  # torchcodec's CUDA decoder is NVDEC too

    @classmethod
    def unavailable(cls) -> str | None:
        if not torch.cuda.is_available():
            return "decode_device='cuda' but torch sees no CUDA device"
        return None

    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        height, width = member.frame_size if member.frame_size is not None else (None, None)
        layout = check_mp4(member.member_bytes(), where=member.member_id, frames=member.frames, height=height, width=width)
        check_frame_spec((layout.height, layout.width, layout.samples), spec)
        return Opened(
            self, TorchCodecDecoder(member.member_bytes(), spec, device=str(self.device)), *frame_size(member, spec, layout)
        )

    def decode(self, jobs: list[Job]) -> None:
        for job in jobs:
            try:
                frames = job.opened.handle.frames(list(job.wanted))
            except Exception as err:
                raise DecodeError(
                    f"{job.member.member_id}: cannot decode frames {list(job.wanted)} ({type(err).__name__}: {err})"
                ) from err
            # torchcodec decodes on its own stream: wait for it before the copy reads the frames.
            torch.cuda.synchronize(self.device)
            write_rows(job, frames)
