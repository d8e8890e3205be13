"""Check a video member's mp4 box structure before any decoder sees it.

FFmpeg builds a member's sample index when it opens it, sized by what the sample tables
claim: a member under 1 KB whose ``stsz`` claims 85M samples of a constant size costs
gigabytes and tens of seconds before a single frame count can be compared. And decoding
frame j of a member whose only keyframe is frame 0 costs j decodes. So, before a member is
handed to a decoder, this module walks its boxes (bounded in count and depth) and checks
what its sample tables expand to: one non-fragmented video track whose sample count is the
number of frames the dataset records, tables that fit in their boxes and agree with each
other, samples that fit in the file, a keyframe first, and a longest GOP whose decode cost
(GOP length x frame pixels) is within ``MAX_GOP_PIXELS``.

The layout it returns also locates every sample's bytes and the codec configuration box
(``avcC``/``hvcC``): the GPU decode stage feeds NVDEC exactly the samples a batch needs
from them, with no demuxer in between (``reader/decode/annexb.py``).

Pure: bytes in, an ``Mp4Layout`` or a ``FormatError`` out; no I/O, no decoder.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from reader.errors import EpisodeDataError, FormatError
from reader.format.limits import (
    MAX_EDIT_ENTRIES,
    MAX_FRAME_PIXELS,
    MAX_FRAME_SIDE,
    MAX_GOP_PIXELS,
    MAX_MP4_BOXES,
    MAX_MP4_DEPTH,
    MAX_SAMPLE_ENTRY_BOXES,
    MAX_TRACK_SAMPLES,
)

# Boxes whose payload is a list of boxes and that lead to the sample tables.
_CONTAINERS = frozenset({b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"})
# Fragmented mp4: samples described outside moov's tables, which this check cannot bound.
_FRAGMENTED = frozenset({b"moof", b"mvex", b"mfra", b"sidx", b"traf"})
_TABLES = (b"stsd", b"stts", b"ctts", b"stsc", b"stsz", b"stz2", b"stco", b"co64", b"stss", b"elst", b"hdlr", b"mdhd", b"mvhd")
_VISUAL_ENTRIES = {b"avc1": "h264", b"avc3": "h264", b"hvc1": "hevc", b"hev1": "hevc", b"av01": "av1",
                   b"vp09": "vp9", b"mp4v": "mpeg4"}
# The box inside a sample entry that configures its decoder.
_CONFIG_BOXES = {"h264": b"avcC", "hevc": b"hvcC", "av1": b"av1C", "vp9": b"vpcC"}
# A visual sample entry's fixed fields before its child boxes (ISO 14496-12 8.5.2): 6 reserved,
# data_reference_index, 16 pre-defined/reserved, width, height, resolutions, reserved,
# frame_count, compressorname, depth, pre-defined.
_VISUAL_ENTRY_FIELDS = 78


@dataclass(frozen=True)
class Mp4Layout:
    """What a checked member holds.

    Attributes:
        samples: video samples (frames).
        keyframes: 0-based frame numbers of the sync samples, ascending (frame 0 first).
        longest_gop: most frames decoded to reach any one frame (from the keyframe before it).
        codec: ``"h264"``, ``"hevc"``, ``"av1"``, ... from the sample entry.
        height, width: from the sample entry.
        sample_offsets, sample_sizes: each sample's bytes in the member, in decode order
            (checked to lie inside it).
        codec_config: the payload of the sample entry's decoder configuration box (``avcC``,
            ``hvcC``, ...), ``b""`` when it has none.
        in_order: presentation order is decode order (no ``ctts``, or one constant offset),
            so sample j is frame j.
        colour_boxes: the payloads of the sample entry's ``colr`` boxes (colour signalling
            that FFmpeg may apply where the stream's own is silent).
    """

    samples: int
    keyframes: tuple[int, ...]
    longest_gop: int
    codec: str
    height: int
    width: int
    sample_offsets: tuple[int, ...] = ()
    sample_sizes: tuple[int, ...] = ()
    codec_config: bytes = b""
    in_order: bool = True
    colour_boxes: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Mp4Track:
    """Everything ``read_track`` validated about a file's one video track: what a member's
    layout holds (``Mp4Layout``) plus the timing a packer needs to cut episodes out of a
    concatenated source file by byte ranges.

    Attributes:
        sample_entry: the whole ``stsd`` sample entry box (header included), copied verbatim
            into members cut from this file.
        timescale: ticks per second of the track (``mdhd``); ``movie_timescale`` of ``mvhd``.
        durations: each sample's duration in ticks (``stts``, expanded).
        composition: each sample's composition offset in ticks (``ctts``), or None.
        edits: the edit list's ``(segment duration in movie ticks, media time, rate)`` entries.
    """

    layout: Mp4Layout
    sample_entry: bytes
    timescale: int
    movie_timescale: int
    durations: tuple[int, ...]
    composition: tuple[int, ...] | None
    edits: tuple[tuple[int, int, float], ...]


def longest_gop(keyframes: list[int] | tuple[int, ...], frames: int) -> int:
    """Most frames decoded to reach one frame: the longest run from a keyframe to the next
    (or to the end). ``keyframes`` are ascending 0-based frame numbers starting at 0."""
    bounds = list(keyframes) + [frames]
    return max((b - a for a, b in zip(bounds, bounds[1:])), default=0)


def gop_within_bound(gop: int, height: int, width: int) -> bool:
    """Whether reaching any frame of such a GOP costs at most ``MAX_GOP_PIXELS`` decoded pixels."""
    return gop * height * width <= MAX_GOP_PIXELS


def check_gop(gop: int, height: int, width: int, *, where: str) -> None:
    """Raise unless reaching any frame costs at most ``MAX_GOP_PIXELS`` decoded pixels.

    Raises:
        FormatError: names the GOP, the frame size and the bound.
    """
    if not gop_within_bound(gop, height, width):
        raise FormatError(
            f"{where}: a GOP of {gop} frames of {height}x{width} costs {gop * height * width:,} decoded pixels to reach one "
            f"frame; at most {MAX_GOP_PIXELS:,} are allowed (repack with --video hevc for short GOPs)"
        )


class _Payload:
    """A box's payload with bounded big-endian reads."""

    def __init__(self, data: memoryview, kind: str, where: str):
        self.data, self.kind, self.where, self.pos = data, kind, where, 0

    def bad(self, what: str) -> FormatError:
        return FormatError(f"{self.where}: mp4 box {self.kind}: {what}")

    def take(self, size: int) -> memoryview:
        if self.pos + size > len(self.data):
            raise self.bad(f"truncated ({len(self.data)} bytes)")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def full_header(self) -> int:
        version = self.u8()
        self.take(3)
        return version

    def table(self, count: int, entry_bytes: int) -> memoryview:
        """``count`` entries of ``entry_bytes``, which must fit in what is left of the box."""
        if count * entry_bytes > len(self.data) - self.pos:
            raise self.bad(f"claims {count:,} entries of {entry_bytes} bytes; the box holds {len(self.data) - self.pos:,} bytes")
        return self.take(count * entry_bytes)


def _walk(data: memoryview, where: str) -> dict[bytes, list[memoryview]]:
    """Every box on the path to the sample tables, by type (payloads), bounded in count and
    depth; boxes of other types are skipped unread."""
    found: dict[bytes, list[memoryview]] = {}
    count = 0
    stack = [(data, 0)]
    while stack:
        region, depth = stack.pop()
        pos = 0
        while pos < len(region):
            count += 1
            if count > MAX_MP4_BOXES:
                raise FormatError(f"{where}: more than {MAX_MP4_BOXES:,} mp4 boxes")
            if len(region) - pos < 8:
                raise FormatError(f"{where}: truncated mp4 box header at byte {pos}")
            size, kind = struct.unpack(">I4s", region[pos : pos + 8])
            header = 8
            if size == 1:
                if len(region) - pos < 16:
                    raise FormatError(f"{where}: truncated mp4 box header at byte {pos}")
                size = struct.unpack(">Q", region[pos + 8 : pos + 16])[0]
                header = 16
            elif size == 0:
                size = len(region) - pos
            if size < header or pos + size > len(region):
                raise FormatError(f"{where}: mp4 box {kind!r} of {size} bytes does not fit its parent ({len(region) - pos} left)")
            payload = region[pos + header : pos + size]
            if kind in _FRAGMENTED:
                raise FormatError(f"{where}: fragmented mp4 ({kind.decode('latin-1')!r} box); members are plain mp4")
            if kind in _CONTAINERS:
                if depth + 1 > MAX_MP4_DEPTH:
                    raise FormatError(f"{where}: mp4 boxes nested deeper than {MAX_MP4_DEPTH}")
                found.setdefault(kind, []).append(payload)
                stack.append((payload, depth + 1))
            elif kind in _TABLES:
                found.setdefault(kind, []).append(payload)
            pos += size
    return found


def _one(found: dict[bytes, list[memoryview]], kind: bytes, where: str, *, required: bool = True) -> _Payload | None:
    boxes = found.get(kind, [])
    if len(boxes) > 1:
        raise FormatError(f"{where}: {len(boxes)} mp4 {kind.decode()!r} boxes; a member holds one video track")
    if not boxes:
        if required:
            raise FormatError(f"{where}: no mp4 {kind.decode()!r} box")
        return None
    return _Payload(boxes[0], kind.decode(), where)


def _sample_entry(box: _Payload) -> tuple[str, int, int, bytes, tuple[bytes, ...]]:
    """The one video sample entry: codec, height, width, its configuration box's payload and
    its ``colr`` boxes' payloads."""
    box.full_header()
    if box.u32() != 1:
        raise box.bad("a member's track has exactly one sample description")
    size = box.u32()
    kind = bytes(box.take(4))
    if kind not in _VISUAL_ENTRIES:
        raise box.bad(f"sample entry {kind!r} is not a video codec the reader decodes")
    if not 36 <= size <= len(box.data) - box.pos + 8:
        raise box.bad(f"a sample entry of {size:,} bytes does not fit the box")
    body = box.data[box.pos : box.pos + size - 8]
    entry = box.take(28)  # reserved(6) data_reference_index(2) pre_defined/reserved(16) width(2) height(2)
    width, height = struct.unpack(">HH", entry[24:28])
    if not (0 < width <= MAX_FRAME_SIDE and 0 < height <= MAX_FRAME_SIDE and width * height <= MAX_FRAME_PIXELS):
        raise box.bad(f"frame size {height}x{width} is beyond {MAX_FRAME_SIDE} per side / {MAX_FRAME_PIXELS:,} pixels")
    codec = _VISUAL_ENTRIES[kind]
    config = _CONFIG_BOXES.get(codec)
    children = _child_boxes(body, (config, b"colr"), box)
    configs = children.get(config, [])
    if len(configs) > 1:
        raise box.bad(f"two {config.decode('latin-1')!r} boxes in the sample entry")
    return codec, height, width, configs[0] if configs else b"", tuple(children.get(b"colr", []))


def _child_boxes(entry: memoryview, wanted: tuple[bytes | None, ...], box: _Payload) -> dict[bytes, list[bytes]]:
    """The payloads of the sample entry's child boxes of the ``wanted`` kinds, in order (absent
    kinds left out); children are walked bounded in count and must tile the entry."""
    pos, count, found = _VISUAL_ENTRY_FIELDS, 0, {}
    while pos < len(entry):
        count += 1
        if count > MAX_SAMPLE_ENTRY_BOXES:
            raise box.bad(f"a sample entry with more than {MAX_SAMPLE_ENTRY_BOXES} child boxes")
        if len(entry) - pos < 8:
            raise box.bad("truncated box in the sample entry")
        size, kind = struct.unpack(">I4s", entry[pos : pos + 8])
        if size < 8 or pos + size > len(entry):
            raise box.bad(f"sample entry child {kind!r} of {size} bytes does not fit the entry")
        if kind in wanted:
            found.setdefault(kind, []).append(bytes(entry[pos + 8 : pos + size]))
        pos += size
    return found


def _run_lengths(box: _Payload, samples: int, *, exact: bool) -> list[int]:
    """``stts``/``ctts``: (count, value) runs whose counts sum to ``samples`` (``exact``) or at
    most it. Returns the value of each sample the runs describe."""
    version = box.full_header()
    entries = box.u32()
    table = box.table(entries, 8)
    runs = struct.unpack(f">{2 * entries}{'i' if version == 1 and box.kind == 'ctts' else 'I'}", table) if entries else ()
    total = sum(runs[0::2])
    if total > samples or (exact and total != samples):
        raise box.bad(f"describes {total:,} samples; the track has {samples:,}")
    values: list[int] = []
    for count, value in zip(runs[0::2], runs[1::2]):
        values += [value] * count
    return values


def _timescale(box: _Payload) -> int:
    """``mvhd``/``mdhd``: the timescale (ticks per second), which must be positive."""
    version = box.full_header()
    box.take(16 if version == 1 else 8)  # creation and modification times
    timescale = box.u32()
    if timescale == 0:
        raise box.bad("timescale 0")
    return timescale


def _edits(box: _Payload) -> tuple[tuple[int, int, float], ...]:
    version = box.full_header()
    entries = box.u32()
    if entries > MAX_EDIT_ENTRIES:
        raise box.bad(f"more than {MAX_EDIT_ENTRIES} edits")
    fmt, size = (">QqhH", 20) if version == 1 else (">IihH", 12)
    out = []
    for _ in range(entries):
        duration, media_time, rate, fraction = struct.unpack(fmt, box.take(size))
        out.append((duration, media_time, rate + fraction / 65536))
    return tuple(out)


def _chunks(stsc: _Payload, offsets: list[int], samples: int, sizes: list[int], file_bytes: int) -> list[int]:
    """``stsc`` maps chunks to samples: it must describe exactly ``samples`` samples, and
    every chunk's samples must lie inside the file. Returns each sample's offset."""
    stsc.full_header()
    entries = stsc.u32()
    if entries > len(offsets):
        raise stsc.bad(f"{entries:,} entries for {len(offsets):,} chunks")
    raw = struct.unpack(f">{3 * entries}I", stsc.table(entries, 12)) if entries else ()
    runs = list(zip(raw[0::3], raw[1::3]))
    if runs and runs[0][0] != 1:
        raise stsc.bad("the first entry must start at chunk 1")
    sample = 0
    starts: list[int] = []
    for i, (first, per_chunk) in enumerate(runs):
        last = runs[i + 1][0] - 1 if i + 1 < len(runs) else len(offsets)
        if not (1 <= first <= last + 1 <= len(offsets) + 1) or per_chunk < 1 or per_chunk > samples:
            raise stsc.bad(f"entry {i} (first chunk {first}, {per_chunk} samples per chunk) is out of order or range")
        for chunk in range(first - 1, last):
            if sample + per_chunk > samples:
                raise stsc.bad(f"describes more than the track's {samples:,} samples")
            chunk_sizes = sizes[sample : sample + per_chunk]
            if offsets[chunk] + sum(chunk_sizes) > file_bytes:
                raise stsc.bad(f"chunk {chunk + 1} ({sum(chunk_sizes):,} bytes at {offsets[chunk]:,}) lies beyond the member's {file_bytes:,} bytes")
            position = offsets[chunk]
            for size in chunk_sizes:
                starts.append(position)
                position += size
            sample += per_chunk
    if sample != samples:
        raise stsc.bad(f"describes {sample:,} samples; the track has {samples:,}")
    return starts


def read_track(data: bytes | memoryview, *, where: str, frames: int | None = None, file_size: int | None = None) -> Mp4Track:
    """Check a file's boxes and its one video track's sample tables and return them.

    ``data`` is the whole file, or only its ``moov`` box when ``file_size`` gives the size of
    the file it came from (sample offsets are file offsets, checked against it). ``frames``:
    the number of samples the track must hold; without it at most ``MAX_TRACK_SAMPLES``.

    Raises:
        EpisodeDataError: the track holds another number of samples than ``frames``.
        FormatError: names the file, the box and what it claims against what is allowed.
    """
    view = memoryview(data)
    file_bytes = len(view) if file_size is None else file_size
    found = _walk(view, where)
    if len(found.get(b"moov", [])) != 1:
        raise FormatError(f"{where}: {len(found.get(b'moov', []))} mp4 'moov' boxes; a member holds exactly one")
    if len(found.get(b"trak", [])) != 1:
        raise FormatError(f"{where}: {len(found.get(b'trak', []))} mp4 tracks; a member holds exactly one video track")
    hdlr = _one(found, b"hdlr", where)
    hdlr.full_header()
    hdlr.u32()
    if bytes(hdlr.take(4)) != b"vide":
        raise hdlr.bad("the track is not a video track")
    stsd = _one(found, b"stsd", where)
    codec, entry_height, entry_width, codec_config, colour_boxes = _sample_entry(stsd)
    entry_size = struct.unpack(">I", stsd.data[8:12])[0]
    sample_entry = bytes(stsd.data[8 : 8 + entry_size])
    if b"stz2" in found:
        raise FormatError(f"{where}: compact sample sizes (stz2) are not used by members")

    stsz = _one(found, b"stsz", where)
    stsz.full_header()
    constant, samples = stsz.u32(), stsz.u32()
    if frames is not None and samples != frames:
        raise EpisodeDataError(f"{where}: mp4 box stsz: claims {samples:,} samples; the dataset records {frames:,} frames for this member")
    if frames is None and samples > MAX_TRACK_SAMPLES:  # before any per-sample list is made
        raise stsz.bad(f"claims {samples:,} samples; at most {MAX_TRACK_SAMPLES:,} are read without a recorded frame count")
    if constant == 0:
        sizes = list(struct.unpack(f">{samples}I", stsz.table(samples, 4))) if samples else []
    elif constant * samples > file_bytes:  # before a list of `samples` entries is made
        raise stsz.bad(f"{samples:,} samples claim more bytes than the member's {file_bytes:,}")
    else:
        sizes = [constant] * samples
    if sum(sizes) > file_bytes:
        raise stsz.bad(f"{samples:,} samples claim more bytes than the member's {file_bytes:,}")

    durations = _run_lengths(_one(found, b"stts", where), samples, exact=True)
    ctts = _one(found, b"ctts", where, required=False)
    composition = None if ctts is None else _run_lengths(ctts, samples, exact=False)
    # One composition offset for every sample keeps decode order; several reorder frames.
    in_order = composition is None or len(set(composition)) <= 1

    if b"stco" in found and b"co64" in found:
        raise FormatError(f"{where}: both stco and co64 chunk offset boxes")
    offsets_box = _one(found, b"stco" if b"stco" in found else b"co64", where)
    offsets_box.full_header()
    chunks = offsets_box.u32()
    if chunks > max(samples, 1):
        raise offsets_box.bad(f"{chunks:,} chunks for {samples:,} samples")
    entry_bytes = 4 if offsets_box.kind == "stco" else 8
    offsets = list(struct.unpack(f">{chunks}{'I' if entry_bytes == 4 else 'Q'}", offsets_box.table(chunks, entry_bytes)))
    starts = _chunks(_one(found, b"stsc", where), offsets, samples, sizes, file_bytes)

    stss = _one(found, b"stss", where, required=False)
    if stss is None:
        keyframes = tuple(range(samples))  # no sync sample table: every sample is a keyframe
    else:
        stss.full_header()
        entries = stss.u32()
        if entries > samples:
            raise stss.bad(f"{entries:,} sync samples for {samples:,} samples")
        numbers = struct.unpack(f">{entries}I", stss.table(entries, 4)) if entries else ()
        if any(b <= a for a, b in zip(numbers, numbers[1:])) or (numbers and not 1 <= numbers[-1] <= samples):
            raise stss.bad("sync samples must be ascending sample numbers of the track")
        keyframes = tuple(n - 1 for n in numbers)
    if samples and (not keyframes or keyframes[0] != 0):
        raise FormatError(f"{where}: the member does not start on a keyframe")
    elst = found.get(b"elst", [])
    if len(elst) > 1:
        raise FormatError(f"{where}: {len(elst)} edit lists; a track has at most one")
    edits = _edits(_Payload(elst[0], "elst", where)) if elst else ()
    mdhd, mvhd = _one(found, b"mdhd", where, required=False), _one(found, b"mvhd", where, required=False)
    layout = Mp4Layout(samples=samples, keyframes=keyframes, longest_gop=longest_gop(keyframes, samples), codec=codec,
                       height=entry_height, width=entry_width, sample_offsets=tuple(starts), sample_sizes=tuple(sizes),
                       codec_config=codec_config, in_order=in_order, colour_boxes=colour_boxes)
    return Mp4Track(layout=layout, sample_entry=sample_entry, timescale=_timescale(mdhd) if mdhd else 0,
                    movie_timescale=_timescale(mvhd) if mvhd else 0, durations=tuple(durations),
                    composition=None if composition is None else tuple(composition), edits=edits)


def check_mp4(data: bytes | memoryview, *, where: str, frames: int | None = None,
              height: int | None = None, width: int | None = None) -> Mp4Layout:
    """Check one member's boxes and sample tables (module docstring) and return its layout.

    ``frames``, ``height``, ``width`` are what the dataset records for the member: the track
    must hold exactly ``frames`` samples, and the GOP bound uses the recorded frame size
    (the sample entry's when not given).

    Raises:
        EpisodeDataError: the track holds another number of samples than ``frames``.
        FormatError: names the member, the box and what it claims against what is allowed.
    """
    layout = read_track(data, where=where, frames=frames).layout
    check_gop(layout.longest_gop, height or layout.height, width or layout.width, where=where)
    return layout
