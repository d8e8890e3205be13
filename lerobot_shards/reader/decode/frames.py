"""The decoders of the default path: frames decoded in the DataLoader workers, on the CPU.

``CpuDecoders`` takes its backend from the one decode table (``backends.table.BACKENDS``, the
rows on ``"cpu"``), as ``DecodeStage`` does for decoding outside the workers: a CPU backend added
there is a ``decoder=`` choice here at once. torchcodec (LeRobot's decoder) by default; PyAV
where torchcodec cannot be imported.
"""

from __future__ import annotations

import warnings

import torch

from lerobot_shards.core.errors import ArgumentError, DecoderFallbackWarning
from lerobot_shards.reader.decode.backends.base import DecodeBackend
from lerobot_shards.reader.decode.backends.cpu import CpuDecoderBackend, decode_frames, open_member
from lerobot_shards.reader.decode.backends.table import AUTO, BACKENDS, backend_class, backend_names
from lerobot_shards.reader.decode.spec import EpisodeDecoder, FrameSpec


def cpu_decoder_names() -> tuple[str, ...]:
    """What ``decoder=`` may name: ``"auto"`` and every CPU row of the decode table."""
    return tuple(n for n in backend_names() if n == "auto" or (n, "cpu") in BACKENDS)


_FALLBACK_SAID = False
# Measured with benchmarks/bench_decoders.py (docs/BENCHMARKS.md, "CPU decoders"): what a user
# whose torchcodec does not import gets, one process, 4 cameras of 480x640 AV1, single frames.
PYAV_RATE_VS_TORCHCODEC = "0.86x"


def _say_fallback(preferred: type[DecodeBackend], chosen: type[DecodeBackend]) -> None:
    """Warn once per process that ``decoder="auto"`` fell back (why, and what it costs)."""
    global _FALLBACK_SAID
    if _FALLBACK_SAID:
        return
    _FALLBACK_SAID = True
    warnings.warn(
        f"decoding with {chosen.name}: {preferred.unavailable()}. The frames are the same; {chosen.name} gives "
        f"{PYAV_RATE_VS_TORCHCODEC} of {preferred.name}'s samples/s (docs/BENCHMARKS.md, CPU decoders)",
        DecoderFallbackWarning,
        stacklevel=4,
    )


def _cpu_backend(cls: type[DecodeBackend], name: str) -> type[CpuDecoderBackend]:
    if not issubclass(cls, CpuDecoderBackend):  # a CPU row whose backend decodes only batches (DecodeStage)
        raise ArgumentError(f"decoder {name!r} decodes batches in a DecodeStage, not samples in the workers")
    return cls


class CpuDecoders:
    """Opens decoders on member bytes and decodes frame indices on the CPU, in the consumer.

    ``backend``: a name of ``cpu_decoder_names()``; ``"auto"`` is the table's first CPU
    backend that can run here (torchcodec, bit-identical to LeRobot's default decode, else
    PyAV). ``decoders.backend`` says which is used.

    Raises:
        ArgumentError: a name not in the table (the allowed names listed).
    """

    def __init__(self, backend: str = "auto"):
        self._colour = _cpu_backend(backend_class(backend, "cpu"), backend)
        if backend == "auto" and self._colour.name != AUTO["cpu"][0]:
            _say_fallback(BACKENDS[(AUTO["cpu"][0], "cpu")], self._colour)
        self.backend = self._colour.name
        self._depth = (
            self._colour
            if self._colour.depth
            else _cpu_backend(
                next(cls for (_, device), cls in BACKENDS.items() if device == "cpu" and getattr(cls, "depth", False)),
                "depth",
            )
        )

    def open(self, data: bytes, *, where: str, spec: FrameSpec | None = None, depth: bool = False) -> EpisodeDecoder:
        """A decoder over one member's bytes; ``spec`` (frames and size it must hold) is
        checked before any frame is decoded. ``depth``: the member is a depth video, decoded
        to its 12-bit codes (uint16 ``(T, 1, H, W)``) by a backend that can (PyAV), as LeRobot
        decodes depth (torchcodec gives only RGB).

        Raises:
            FormatError: the member's mp4 boxes claim more than the format allows (named).
            DecodeError: the member does not open, or holds other frames than ``spec``.
        """
        return open_member(self._depth if depth else self._colour, data, where=where, spec=spec, depth=depth)

    @staticmethod
    def decode(decoder: EpisodeDecoder, indices: list[int], *, where: str) -> torch.Tensor:
        """``decoder``'s frames at ``indices``, errors naming ``where``."""
        return decode_frames(decoder, indices, where=where)


__all__ = ["CpuDecoders", "cpu_decoder_names", "FrameSpec"]
