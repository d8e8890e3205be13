"""What the CPU backends share: FFmpeg through the reader's CPU decoders (``lerobot_shards/reader/decode/frames.py``),
one member at a time, frames written to their rows (on the stage's device: the CPU, or the GPU
for a CUDA stage's fallback)."""

from __future__ import annotations

from typing import ClassVar

from lerobot_shards.reader.decode.backends.base import DecodeBackend, Job, Opened, frame_size, write_rows
from lerobot_shards.reader.decode.frames import CpuDecoders, FrameSpec
from lerobot_shards.reader.decode.wire import EncodedFrames


class CpuDecoderBackend(DecodeBackend):
    """A CPU backend decoding with ``CpuDecoders(self.decoder)``; subclasses name both."""

    device_type = "cpu"
    decoder: ClassVar[str]  # "pyav" or "torchcodec"

    def __init__(self, device, **options):
        super().__init__(device, **options)
        self._decoders = CpuDecoders(self.decoder)

    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        decoder = self._decoders.open(member.data, where=member.member_id, spec=spec)
        return Opened(self, decoder, *frame_size(member, spec))

    def decode(self, jobs: list[Job]) -> None:
        for job in jobs:
            write_rows(job, self._decoders.decode(job.opened.handle, list(job.wanted), where=job.member.member_id))
