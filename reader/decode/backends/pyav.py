"""PyAV (FFmpeg) on the CPU: the decoder every install has; frames bit-identical to torchcodec's."""

from __future__ import annotations

from reader.decode.backends.base import DecodeBackend, Job, Opened, frame_size, write_rows
from reader.decode.frames import CpuDecodeStage, FrameSpec
from reader.decode.wire import EncodedFrames


class PyAVBackend(DecodeBackend):
    name = "pyav"
    device_type = "cpu"

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import av  # noqa: F401
        except ImportError as err:
            return f"PyAV cannot be imported ({err}); pip install av"
        return None

    def __init__(self, device, **options):
        super().__init__(device, **options)
        self._decoders = CpuDecodeStage("pyav")

    def open(self, member: EncodedFrames, spec: FrameSpec | None) -> Opened:
        decoder = self._decoders.open(member.data, where=member.member_id, spec=spec)
        return Opened(self, decoder, *frame_size(member, spec))

    def decode(self, jobs: list[Job]) -> None:
        for job in jobs:
            write_rows(job, self._decoders.decode(job.opened.handle, list(job.wanted), where=job.member.member_id))
