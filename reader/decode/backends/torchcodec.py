"""torchcodec (FFmpeg) on the CPU: LeRobot's own decoder, so its frames are LeRobot's."""

from __future__ import annotations

from reader.decode.backends.base import DecodeBackend, Job, Opened, frame_size, write_rows
from reader.decode.frames import CpuDecodeStage, FrameSpec, available_backend
from reader.decode.wire import EncodedFrames


class TorchCodecBackend(DecodeBackend):
    name = "torchcodec"
    device_type = "cpu"

    @classmethod
    def unavailable(cls) -> str | None:
        if available_backend() != "torchcodec":
            return "torchcodec cannot be imported (it needs FFmpeg's shared libraries); pip install torchcodec"
        return None

    def __init__(self, device, **options):
        super().__init__(device, **options)
        self._decoders = CpuDecodeStage("torchcodec")

    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        decoder = self._decoders.open(member.data, where=member.member_id, spec=spec)
        return Opened(self, decoder, *frame_size(member, spec))

    def decode(self, jobs: list[Job]) -> None:
        for job in jobs:
            write_rows(job, self._decoders.decode(job.opened.handle, list(job.wanted), where=job.member.member_id))
