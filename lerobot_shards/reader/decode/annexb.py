"""Feed a hardware decoder exactly the samples a batch needs, as an H.264/HEVC elementary stream.

A member is an mp4 whose samples are length-prefixed NAL units; its decoder configuration
(``avcC``/``hvcC``) holds the parameter sets. NVDEC's parser takes Annex-B: NAL units behind
start codes, parameter sets in band. Instead of a demuxer that seeks (and flushes the
decoder) for every random access, the GPU stage plans, per member and batch, the runs of
samples to decode (each wanted frame's GOP from its keyframe up to the last wanted frame in
it), and sends each run as parameter sets + the run's samples converted to Annex-B. Frame j
is sample j because the stage only takes this path for members whose presentation order is
their decode order (``Mp4Layout.in_order``).

Pure: bytes and numbers in, bytes and plans out; no decoder. Every length read from the
untrusted member is checked against the bytes it claims to describe.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.limits import MAX_PARAMETER_SET_BYTES, MAX_PARAMETER_SETS
from lerobot_shards.core.format.mp4 import Mp4Layout

START_CODE = b"\x00\x00\x00\x01"
# NAL unit types that are parameter sets: H.264 SPS, PPS, SPS extension; HEVC VPS, SPS, PPS.
_H264_PARAMETER_SETS = frozenset({7, 8, 13})
_HEVC_PARAMETER_SETS = frozenset({32, 33, 34})
_SPS = {"h264": 7, "hevc": 33}
CODECS = ("h264", "hevc")


@dataclass(frozen=True)
class StreamConfig:
    """What a member's decoder configuration box says about its elementary stream.

    Attributes:
        codec: ``"h264"`` or ``"hevc"``.
        sequence_parameter_sets: the SPS NAL units among the parameter sets.
        length_size: bytes of each NAL unit's length prefix in a sample (1, 2 or 4).
        parameter_sets: Annex-B bytes of every parameter set, sent before each run.
    """

    codec: str
    length_size: int
    parameter_sets: bytes
    sequence_parameter_sets: tuple[bytes, ...] = ()  # the SPS NAL units among them (headers included)


class _Reader:
    def __init__(self, data: bytes, where: str):
        self.data, self.pos, self.where = memoryview(data), 0, where

    def take(self, size: int) -> memoryview:
        if size < 0 or self.pos + size > len(self.data):
            raise FormatError(f"{self.where}: decoder configuration truncated ({len(self.data)} bytes)")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return struct.unpack(">H", self.take(2))[0]


def _nal_type(codec: str, nal: memoryview) -> int:
    return (nal[0] >> 1) & 0x3F if codec == "hevc" else nal[0] & 0x1F


def stream_config(codec: str, config: bytes, *, where: str) -> StreamConfig:
    """Parse an ``avcC`` (H.264) or ``hvcC`` (HEVC) payload.

    Raises:
        FormatError: another codec, a configuration that is truncated, claims more parameter
            sets than ``MAX_PARAMETER_SETS``, an invalid length size, or holds none.
    """
    if codec not in CODECS:
        raise FormatError(f"{where}: codec {codec!r} has no elementary-stream path (h264 or hevc)")
    reader = _Reader(config, where)
    nals: list[memoryview] = []

    def add(count: int) -> None:
        if len(nals) + count > MAX_PARAMETER_SETS:
            raise FormatError(f"{where}: decoder configuration claims more than {MAX_PARAMETER_SETS} parameter sets")
        for _ in range(count):
            size = reader.u16()
            if size == 0:
                raise FormatError(f"{where}: decoder configuration holds an empty parameter set")
            nals.append(reader.take(size))

    if codec == "h264":
        if reader.u8() != 1:
            raise FormatError(f"{where}: avcC version is not 1")
        reader.take(3)  # profile, compatibility, level
        length_size = (reader.u8() & 0x3) + 1
        add(reader.u8() & 0x1F)  # SPS
        add(reader.u8())  # PPS
        # High profiles may append chroma/bit-depth fields and SPS extensions: the SPS carries
        # the same information, so they are not needed to decode.
    else:
        reader.take(21)  # version, profile/tier/level, constraint flags, chroma, bit depths, frame rate
        length_size = (reader.u8() & 0x3) + 1
        for _ in range(reader.u8()):  # arrays of NAL units by type
            reader.u8()
            add(reader.u16())
    if length_size == 3:
        raise FormatError(f"{where}: NAL length size 3 is not allowed")
    wanted = _HEVC_PARAMETER_SETS if codec == "hevc" else _H264_PARAMETER_SETS
    sets = [nal for nal in nals if _nal_type(codec, nal) in wanted]
    if not sets:
        raise FormatError(f"{where}: decoder configuration holds no parameter sets")
    parameter_sets = b"".join(START_CODE + bytes(n) for n in sets)
    if len(parameter_sets) > MAX_PARAMETER_SET_BYTES:
        raise FormatError(
            f"{where}: {len(parameter_sets):,} bytes of parameter sets; at most {MAX_PARAMETER_SET_BYTES:,} are sent"
        )
    sps = tuple(bytes(n) for n in sets if _nal_type(codec, n) == _SPS[codec])
    return StreamConfig(codec=codec, length_size=length_size, parameter_sets=parameter_sets, sequence_parameter_sets=sps)


def to_annexb(sample: bytes | memoryview, length_size: int, *, where: str, codec: str = "", sps: list | None = None) -> bytes:
    """One sample's length-prefixed NAL units behind start codes; with ``sps`` (a list) and
    ``codec``, every sequence parameter set found in the sample is appended to it.

    Raises:
        FormatError: a NAL unit's length runs past the sample, or a NAL unit is empty.
    """
    view = memoryview(sample)
    out = bytearray()
    pos = 0
    while pos < len(view):
        if len(view) - pos < length_size:
            raise FormatError(f"{where}: sample ends inside a NAL length prefix")
        size = int.from_bytes(view[pos : pos + length_size], "big")
        pos += length_size
        if size == 0 or size > len(view) - pos:
            raise FormatError(f"{where}: a NAL unit of {size:,} bytes does not fit the sample ({len(view) - pos:,} left)")
        out += START_CODE
        out += view[pos : pos + size]
        if sps is not None and _nal_type(codec, view[pos : pos + size]) == _SPS[codec]:
            sps.append(bytes(view[pos : pos + size]))
        pos += size
    if not out:
        raise FormatError(f"{where}: empty sample")
    return bytes(out)


def decode_runs(keyframes: Sequence[int] | np.ndarray, wanted: Sequence[int], frames: int) -> list[tuple[int, int]]:
    """The runs of samples ``(first, last)``, inclusive and ascending, that decode every frame
    in ``wanted``: for each keyframe before a wanted frame, from it to the last wanted frame
    of its GOP. Decoding them costs ``sum(last - first + 1)`` frames.

    Raises:
        IndexError: a wanted frame outside ``[0, frames)``.
    """
    distinct = sorted(set(wanted))
    if distinct and (distinct[0] < 0 or distinct[-1] >= frames):
        raise IndexError(f"frames {[j for j in distinct if not 0 <= j < frames]} are outside the member's {frames} frames")
    keys = np.asarray(keyframes, dtype=np.int64)
    starts = keys[np.searchsorted(keys, distinct, side="right") - 1].tolist() if distinct else []
    runs: dict[int, int] = {}
    for key, j in zip(starts, distinct):
        runs[key] = j  # ascending: the last wins
    return sorted(runs.items())


@dataclass(frozen=True)
class ElementaryStream:
    """A whole member as one Annex-B buffer: sample j is ``data[starts[j]:starts[j + 1]]``.
    Built once per member (at most 3x its bytes: each NAL unit's length prefix of 1 or more
    bytes becomes a 4-byte start code); feeding a sample copies nothing. The parameter sets go
    before the first sample of each run (``packet``), not into the buffer: a member of only
    keyframes would otherwise carry them once per frame."""

    data: bytes
    starts: tuple[int, ...]  # samples + 1 offsets
    parameter_sets: bytes
    # Sequence parameter sets inside samples that differ from the configuration's: a stream
    # that changes its SPS mid-way may change what its pictures mean (size, colour).
    foreign_sps: bool = False

    def packet(self, j: int, *, first: bool) -> bytes:
        """Sample j's bytes, behind the parameter sets when it starts a run."""
        sample = self.data[self.starts[j] : self.starts[j + 1]]
        return self.parameter_sets + sample if first else sample


def elementary_stream(data: bytes | memoryview, layout: Mp4Layout, config: StreamConfig, *, where: str) -> ElementaryStream:
    """Convert every sample of a checked member (``layout`` from ``check_mp4``) to Annex-B.

    Raises:
        FormatError: a sample whose NAL units do not fit it.
    """
    view = memoryview(data)
    parts: list[bytes] = []
    starts = [0]
    in_band: list[bytes] = []
    for j, (offset, size) in enumerate(zip(layout.sample_offsets.tolist(), layout.sample_sizes.tolist())):
        payload = to_annexb(
            view[offset : offset + size], config.length_size, where=f"{where} sample {j}", codec=config.codec, sps=in_band
        )
        parts.append(payload)
        starts.append(starts[-1] + len(payload))
    known = set(config.sequence_parameter_sets)
    return ElementaryStream(
        data=b"".join(parts),
        starts=tuple(starts),
        parameter_sets=config.parameter_sets,
        foreign_sps=any(nal not in known for nal in in_band),
    )


def packets(layout: Mp4Layout, wanted: Sequence[int]) -> Iterator[tuple[int, bool]]:
    """``(sample, starts a run)`` for every sample to send, in decode order, to decode every
    frame in ``wanted``: ``decode_runs(wanted)`` flattened (each run starts on a keyframe).

    Raises:
        IndexError: a wanted frame outside the member.
    """
    for first, last in decode_runs(layout.keyframes, wanted, layout.samples):
        for j in range(first, last + 1):
            yield j, j == first
