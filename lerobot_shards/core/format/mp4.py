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
from them, with no demuxer in between (``lerobot_shards/reader/decode/annexb.py``).

Pure: bytes in, an ``Mp4Layout`` or a ``FormatError`` out; no I/O, no decoder.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from lerobot_shards.core.errors import BoundExceededError, EpisodeDataError, FormatError
from lerobot_shards.core.format.limits import (
    MAX_EDIT_ENTRIES,
    MAX_FRAME_PIXELS,
    MAX_FRAME_SIDE,
    MAX_GOP_PIXELS,
    MAX_MP4_BOXES,
    MAX_MP4_DEPTH,
    MAX_SAMPLE_ENTRY_BOXES,
    MAX_SAMPLE_RAW_MULTIPLE,
    MAX_TRACK_SAMPLES,
    SAMPLE_SLACK_BYTES,
)

# Boxes FFmpeg's mov demuxer reads as lists of boxes, dispatching every child by its type
# wherever it sits (libavformat/mov.c: mov_read_default on these). A sample table or an edit
# list hidden in any of them (moov/udta, trak/udta, a sample entry) is honoured by FFmpeg: so
# every one of them is walked, and a table anywhere but its place is refused.
_CONTAINERS = frozenset(
    {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts", b"dinf", b"udta", b"tref", b"sinf", b"schi", b"ilst", b"wave"}
)
# Fragmented mp4: samples described outside moov's tables, which this check cannot bound.
_FRAGMENTED = frozenset({b"moof", b"mvex", b"mfra", b"sidx", b"traf", b"trex", b"trun", b"tfhd", b"tfdt"})
# Boxes FFmpeg turns into a movie (a compressed moov, QuickTime's 'hoov'): refused anywhere.
_MOVIES = frozenset({b"cmov", b"hoov"})
_STBL = (b"moov", b"trak", b"mdia", b"minf", b"stbl")
# Where each box that decides which bytes are which frame, and when, may sit (ISO 14496-12).
_PLACES: dict[bytes, tuple[bytes, ...]] = {
    b"moov": (),
    b"mvhd": (b"moov",),
    b"trak": (b"moov",),
    b"tkhd": (b"moov", b"trak"),
    b"edts": (b"moov", b"trak"),
    b"elst": (b"moov", b"trak", b"edts"),
    b"mdia": (b"moov", b"trak"),
    b"mdhd": (b"moov", b"trak", b"mdia"),
    b"hdlr": (b"moov", b"trak", b"mdia"),
    b"minf": (b"moov", b"trak", b"mdia"),
    b"stbl": (b"moov", b"trak", b"mdia", b"minf"),
    **dict.fromkeys(
        (
            b"stsd",
            b"stts",
            b"ctts",
            b"stsc",
            b"stsz",
            b"stz2",
            b"stco",
            b"co64",
            b"stss",
            b"stps",
            b"sdtp",
            b"sgpd",
            b"sbgp",
            b"cslg",
        ),
        _STBL,
    ),
}
_VISUAL_ENTRIES = {
    b"avc1": "h264",
    b"avc3": "h264",
    b"hvc1": "hevc",
    b"hev1": "hevc",
    b"av01": "av1",
    b"vp09": "vp9",
    b"mp4v": "mpeg4",
}
# The box inside a sample entry that configures its decoder.
_CONFIG_BOXES = {"h264": b"avcC", "hevc": b"hvcC", "av1": b"av1C", "vp9": b"vpcC"}
# A visual sample entry's fixed fields before its child boxes (ISO 14496-12 8.5.2): 6 reserved,
# data_reference_index, 16 pre-defined/reserved, width, height, resolutions, reserved,
# frame_count, compressorname, depth, pre-defined.
_VISUAL_ENTRY_FIELDS = 78


@dataclass(frozen=True, eq=False)
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
    keyframes: np.ndarray  # int64
    longest_gop: int
    codec: str
    height: int
    width: int
    sample_offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # int64, one per sample
    sample_sizes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    codec_config: bytes = b""
    in_order: bool = True
    colour_boxes: tuple[bytes, ...] = ()


@dataclass(frozen=True, eq=False)
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
    durations: np.ndarray  # int64
    composition: np.ndarray | None
    edits: tuple[tuple[int, int, float], ...]


def longest_gop(keyframes, frames: int) -> int:
    """Most frames decoded to reach one frame: the longest run from a keyframe to the next
    (or to the end). ``keyframes`` are ascending 0-based frame numbers starting at 0."""
    bounds = np.append(np.asarray(keyframes, dtype=np.int64), frames)
    return int(np.diff(bounds).max()) if len(bounds) > 1 else 0


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


def _boxes(region: memoryview, where: str, *, top: bool = False):
    """``(kind, payload)`` of each box tiling ``region``. Like FFmpeg, fewer than 8 bytes left
    at the end of a container are not a box (QuickTime ends user data with 4 zero bytes);
    unlike FFmpeg, a box that claims more than its parent holds is refused, not clamped.

    Raises:
        FormatError: a box that does not fit, or a truncated header at the top level.
    """
    pos = 0
    while pos < len(region):
        if len(region) - pos < 8:
            if top:
                raise FormatError(f"{where}: truncated mp4 box header at byte {pos}")
            return
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
        yield kind, region[pos + header : pos + size]
        pos += size


def _meta_children(payload: memoryview) -> memoryview | None:
    """Where FFmpeg starts reading a ``meta`` box's children: at the first ``hdlr`` found on a
    4-byte step (after a full box's version and flags, or right away in QuickTime's form)."""
    data = bytes(payload)
    at = data.find(b"hdlr", 4)
    while at != -1:
        if at % 4 == 0:
            return payload[at - 4 :]
        at = data.find(b"hdlr", at + 1)
    return None


def _walk(
    data: memoryview, where: str, *, path: tuple[bytes, ...] = (), top: bool = True, misplaced: list | None = None
) -> dict[bytes, list[memoryview]]:
    """The boxes that describe the track where ISO 14496-12 puts them, by type (payloads),
    from a walk of every box FFmpeg reads as a container (bounded in count and depth). Boxes
    that decide the track's samples or timing found anywhere else are appended to
    ``misplaced`` as ``(kind, parents, place, payload)`` (without the list: refused at once).

    Raises:
        FormatError: more boxes or depth than allowed, a fragmented or compressed movie, or
            (without ``misplaced``) a misplaced box.
    """
    found: dict[bytes, list[memoryview]] = {}
    collect = misplaced is not None
    misplaced = [] if misplaced is None else misplaced
    count = 0
    stack = [(data, path, top)]
    while stack:
        region, parents, is_top = stack.pop()
        for kind, payload in _boxes(region, where, top=is_top):
            count += 1
            if count > MAX_MP4_BOXES:
                raise FormatError(f"{where}: more than {MAX_MP4_BOXES:,} mp4 boxes")
            if kind in _FRAGMENTED:
                raise FormatError(f"{where}: fragmented mp4 ({kind.decode('latin-1')!r} box); members are plain mp4")
            if kind in _MOVIES:
                raise FormatError(f"{where}: a {kind.decode('latin-1')!r} box (a movie FFmpeg would read in place of moov)")
            place = _PLACES.get(kind)
            inside_meta = kind == b"hdlr" and parents and parents[-1] == b"meta"  # a metadata handler, not the track's
            if place is not None and parents != place and not inside_meta:
                misplaced.append((kind, parents, place, payload))
            elif place is not None and not inside_meta:
                found.setdefault(kind, []).append(payload)
            children = payload if kind in _CONTAINERS else _meta_children(payload) if kind == b"meta" else None
            if children is not None:
                if len(parents) + 1 > MAX_MP4_DEPTH:
                    raise FormatError(f"{where}: mp4 boxes nested deeper than {MAX_MP4_DEPTH}")
                stack.append((children, (*parents, kind), False))
    if misplaced and not collect:
        _refuse_misplaced(misplaced, where)
    return found


def _check_claims(
    tables: list[tuple[bytes, memoryview]],
    where: str,
    *,
    frames: int | None,
    max_samples: int | None,
    max_sample_bytes: int | None,
    size: str = "a frame",
) -> None:
    """Bound what sample size tables claim before anything is expanded: their sample counts
    (``max_samples``, or ``MAX_TRACK_SAMPLES`` without a recorded frame count) and their
    largest sample (``max_sample_bytes``). Reads only the tables' own bytes.

    Raises:
        BoundExceededError: names the box, the value claimed and the bound.
    """
    for kind, payload in tables:
        claimed = _Payload(payload, kind.decode(), where)
        claimed.full_header()
        constant = claimed.u32()
        count = claimed.u32()
        if frames is None and max_samples is not None and count > max_samples:
            raise BoundExceededError(
                f"{where}: mp4 box {kind.decode()}: claims {count:,} samples; the file's episodes can use at most {max_samples:,}"
            )
        if frames is None and count > MAX_TRACK_SAMPLES:
            raise BoundExceededError(
                f"{where}: mp4 box {kind.decode()}: claims {count:,} samples; at most "
                f"{MAX_TRACK_SAMPLES:,} are read without a recorded frame count"
            )
        if max_sample_bytes is None or kind != b"stsz":
            continue
        if constant == 0:
            entries = min(count, (len(payload) - 12) // 4)  # what the box holds; a shorter table is refused later
            largest = int(np.frombuffer(payload[12 : 12 + 4 * entries], dtype=">u4").max()) if entries > 0 else 0
        else:
            largest = constant
        if largest > max_sample_bytes:
            raise BoundExceededError(
                f"{where}: mp4 box {kind.decode()}: a sample of {largest:,} bytes; {size} is at most "
                f"{max_sample_bytes:,} bytes compressed"
            )


def _refuse_misplaced(misplaced: list, where: str) -> None:
    kind, parents, place, _ = misplaced[0]
    at = "/".join(p.decode("latin-1") for p in parents) or "the top level"
    raise FormatError(
        f"{where}: mp4 box {kind.decode('latin-1')!r} inside {at}: FFmpeg would honour it there; "
        f"it belongs in {'/'.join(p.decode('latin-1') for p in place) or 'the top level'}"
    )


def _one(found: dict[bytes, list[memoryview]], kind: bytes, where: str) -> _Payload:
    """The one ``kind`` box of the track.

    Raises:
        FormatError: none, or several.
    """
    box = _at_most_one(found, kind, where)
    if box is None:
        raise FormatError(f"{where}: no mp4 {kind.decode()!r} box")
    return box


def _at_most_one(found: dict[bytes, list[memoryview]], kind: bytes, where: str) -> _Payload | None:
    """The ``kind`` box of the track, or None when it has none.

    Raises:
        FormatError: several.
    """
    boxes = found.get(kind, [])
    if len(boxes) > 1:
        raise FormatError(f"{where}: {len(boxes)} mp4 {kind.decode()!r} boxes; a member holds one video track")
    return _Payload(boxes[0], kind.decode(), where) if boxes else None


def _sample_entry(box: _Payload, misplaced: list) -> tuple[str, int, int, bytes, tuple[bytes, ...]]:
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
    # FFmpeg reads a sample entry's child boxes as it reads any container's: none may be a table.
    _walk(body[_VISUAL_ENTRY_FIELDS:], box.where, path=(*_STBL, b"stsd", kind), top=False, misplaced=misplaced)
    config = _CONFIG_BOXES.get(codec)
    children = _child_boxes(body, (config, b"colr"), box)
    configs = children.get(config, []) if config is not None else []
    if len(configs) > 1 and config is not None:
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


def _run_lengths(box: _Payload, samples: int) -> np.ndarray:
    """``stts``/``ctts``: (count, value) runs whose counts must sum to exactly ``samples``
    (FFmpeg reads a shorter ``ctts`` in its own way: refused). Returns each sample's value
    (int64), built only once the counts are known to fit."""
    version = box.full_header()
    entries = box.u32()
    table = np.frombuffer(box.table(entries, 8), dtype=">i4" if version == 1 and box.kind == "ctts" else ">u4").reshape(-1, 2)
    counts, values = table[:, 0].astype(np.int64), table[:, 1].astype(np.int64)
    total = int(counts.sum())
    if total != samples:
        raise box.bad(f"describes {total:,} samples; the track has {samples:,}")
    return np.repeat(values, counts)


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


def _chunks(stsc: _Payload, offsets: np.ndarray, samples: int, sizes: np.ndarray, file_bytes: int) -> np.ndarray:
    """``stsc`` maps chunks to samples: it must describe exactly ``samples`` samples, and
    every chunk's samples must lie inside the file. Returns each sample's offset (int64)."""
    stsc.full_header()
    entries = stsc.u32()
    if entries > len(offsets):
        raise stsc.bad(f"{entries:,} entries for {len(offsets):,} chunks")
    raw = struct.unpack(f">{3 * entries}I", stsc.table(entries, 12)) if entries else ()
    runs = list(zip(raw[0::3], raw[1::3]))
    if runs and runs[0][0] != 1:
        raise stsc.bad("the first entry must start at chunk 1")
    described = 0
    spans = []  # (first chunk, chunks, samples per chunk)
    for i, (first, per_chunk) in enumerate(runs):
        last = runs[i + 1][0] - 1 if i + 1 < len(runs) else len(offsets)
        if not (1 <= first <= last + 1 <= len(offsets) + 1) or per_chunk < 1 or per_chunk > samples:
            raise stsc.bad(f"entry {i} (first chunk {first}, {per_chunk} samples per chunk) is out of order or range")
        described += (last - first + 1) * per_chunk  # counted before any per-sample array is made
        if described > samples:
            raise stsc.bad(f"describes more than the track's {samples:,} samples")
        spans.append((first - 1, last - first + 1, per_chunk))
    if described != samples:
        raise stsc.bad(f"describes {described:,} samples; the track has {samples:,}")
    if not samples:
        return np.zeros(0, dtype=np.int64)
    per_chunk = np.concatenate([np.full(count, per, dtype=np.int64) for _, count, per in spans])
    used = int(sum(count for _, count, _ in spans))
    chunk_of_sample = np.repeat(np.arange(used), per_chunk)
    before = np.cumsum(sizes) - sizes  # bytes of the samples before each, in decode order
    chunk_first = np.cumsum(per_chunk) - per_chunk
    starts = offsets[:used][chunk_of_sample] + (before - before[chunk_first][chunk_of_sample])
    ends = starts + sizes
    if int(starts.min()) < 0 or int(ends.max()) > file_bytes:
        chunk = int(chunk_of_sample[int(np.argmax(ends > file_bytes))])
        raise stsc.bad(f"chunk {chunk + 1} (at {int(offsets[chunk]):,}) lies beyond the member's {file_bytes:,} bytes")
    return starts


def trivial_edits(
    edits: tuple[tuple[int, int, float], ...], *, media_ticks: int, timescale: int, movie_timescale: int, shift: int = 0
) -> bool:
    """Whether an edit list changes nothing FFmpeg shows: none, or one edit at normal rate that
    starts at media time ``shift`` (the constant composition offset) and covers the media
    (to within one 1/1000 s)."""
    if not edits:
        return True
    if len(edits) != 1 or timescale <= 0 or movie_timescale <= 0:
        return False
    duration, media_time, rate = edits[0]
    return media_time == shift and rate == 1.0 and duration / movie_timescale >= media_ticks / timescale - 1e-3


def read_track(
    data: bytes | memoryview,
    *,
    where: str,
    frames: int | None = None,
    file_size: int | None = None,
    max_samples: int | None = None,
    max_sample_bytes: int | None = None,
) -> Mp4Track:
    """Check a file's boxes and its one video track's sample tables and return them.

    ``data`` is the whole file, or only its ``moov`` box when ``file_size`` gives the size of
    the file it came from (sample offsets are file offsets, checked against it). ``frames``:
    the number of samples the track must hold; else ``max_samples`` (what the file's episodes
    can use), else at most ``MAX_TRACK_SAMPLES``. ``max_sample_bytes``: the most one sample
    may claim (default: ``MAX_SAMPLE_RAW_MULTIPLE`` raw RGB frames of the sample entry's size
    + ``SAMPLE_SLACK_BYTES``). Both are checked before any per-sample table is made; tables
    are numpy arrays.

    Raises:
        EpisodeDataError: the track holds another number of samples than ``frames``.
        FormatError: names the file, the box and what it claims against what is allowed.
    """
    view = memoryview(data)
    file_bytes = len(view) if file_size is None else file_size
    misplaced: list = []
    found = _walk(view, where, misplaced=misplaced)
    claims = _Claims(found, misplaced, where, frames=frames, max_samples=max_samples)
    # What any sample size table claims is bounded first, wherever it sits (a file refused for a
    # misplaced box goes to FFmpeg's demuxer, which would expand what it claims): before the
    # sample entry is read, by a bound that needs no entry (the caller's, or the largest frame).
    claims.check(
        max_sample_bytes, "a frame of the recorded size" if max_sample_bytes is not None else "the largest frame allowed"
    )
    _one_video_track(found, where)
    stsd = _one(found, b"stsd", where)
    codec, entry_height, entry_width, codec_config, colour_boxes = _sample_entry(stsd, misplaced)
    if max_sample_bytes is None:
        max_sample_bytes = MAX_SAMPLE_RAW_MULTIPLE * 3 * entry_height * entry_width + SAMPLE_SLACK_BYTES
    claims.check(max_sample_bytes, f"a {entry_height}x{entry_width} frame")  # the sample entry's own hidden tables too
    entry_size = struct.unpack(">I", stsd.data[8:12])[0]
    sample_entry = bytes(stsd.data[8 : 8 + entry_size])
    if b"stz2" in found:
        raise FormatError(f"{where}: compact sample sizes (stz2) are not used by members")
    samples, sizes = _sample_sizes(_one(found, b"stsz", where), frames=frames, file_bytes=file_bytes, where=where)
    durations = _run_lengths(_one(found, b"stts", where), samples)
    ctts = _at_most_one(found, b"ctts", where)
    composition = None if ctts is None else _run_lengths(ctts, samples)
    times = np.cumsum(durations) - durations + (0 if composition is None else composition)
    if samples > 1 and np.unique(times).size != samples:
        raise FormatError(f"{where}: two samples share a presentation time (stts/ctts); which frame is which is undefined")
    starts = _sample_starts(found, samples, sizes, file_bytes, where)
    keyframes = _keyframes(_at_most_one(found, b"stss", where), samples, where)
    edits, timescale, movie_timescale, in_order = _frame_order(found, durations, composition, samples, where)
    layout = Mp4Layout(
        samples=samples,
        keyframes=keyframes,
        longest_gop=longest_gop(keyframes, samples),
        codec=codec,
        height=entry_height,
        width=entry_width,
        sample_offsets=starts,
        sample_sizes=sizes,
        codec_config=codec_config,
        in_order=in_order,
        colour_boxes=colour_boxes,
    )
    return Mp4Track(
        layout=layout,
        sample_entry=sample_entry,
        timescale=timescale,
        movie_timescale=movie_timescale,
        durations=durations,
        composition=composition,
        edits=edits,
    )


@dataclass
class _Claims:
    """The sample size tables a file holds, wherever they sit (misplaced ones included), and
    what each may claim: ``check`` bounds them, then refuses any misplaced box."""

    found: dict
    misplaced: list
    where: str
    frames: int | None
    max_samples: int | None

    def check(self, max_sample_bytes: int | None, size: str) -> None:
        bound = (
            max_sample_bytes
            if max_sample_bytes is not None
            else MAX_SAMPLE_RAW_MULTIPLE * 3 * MAX_FRAME_PIXELS + SAMPLE_SLACK_BYTES
        )
        tables = [(k, p) for k in (b"stsz", b"stz2") for p in self.found.get(k, [])] + [
            (k, p) for k, _, _, p in self.misplaced if k in (b"stsz", b"stz2")
        ]
        _check_claims(tables, self.where, frames=self.frames, max_samples=self.max_samples, max_sample_bytes=bound, size=size)
        if self.misplaced:
            _refuse_misplaced(self.misplaced, self.where)


def _one_video_track(found: dict, where: str) -> None:
    """One ``moov``, one ``trak``, and that track a video track (``hdlr`` ``vide``)."""
    if len(found.get(b"moov", [])) != 1:
        raise FormatError(f"{where}: {len(found.get(b'moov', []))} mp4 'moov' boxes; a member holds exactly one")
    if len(found.get(b"trak", [])) != 1:
        raise FormatError(f"{where}: {len(found.get(b'trak', []))} mp4 tracks; a member holds exactly one video track")
    hdlr = _one(found, b"hdlr", where)
    hdlr.full_header()
    hdlr.u32()
    if bytes(hdlr.take(4)) != b"vide":
        raise hdlr.bad("the track is not a video track")


def _sample_sizes(stsz: _Payload, *, frames: int | None, file_bytes: int, where: str) -> tuple[int, np.ndarray]:
    """``stsz``: the track's sample count (``frames`` when given) and each sample's size, whose
    sum must fit the file (checked before a table of that many entries is made)."""
    stsz.full_header()
    constant, samples = stsz.u32(), stsz.u32()
    if frames is not None and samples != frames:
        raise EpisodeDataError(
            f"{where}: mp4 box stsz: claims {samples:,} samples; the dataset records {frames:,} frames for this member"
        )
    sizes = np.frombuffer(stsz.table(samples, 4), dtype=">u4").astype(np.int64) if constant == 0 else None
    total = constant * samples if sizes is None else int(sizes.sum())
    if total > file_bytes:
        raise stsz.bad(f"{samples:,} samples claim more bytes than the member's {file_bytes:,}")
    return samples, sizes if sizes is not None else np.full(samples, constant, dtype=np.int64)


def _sample_starts(found: dict, samples: int, sizes: np.ndarray, file_bytes: int, where: str) -> np.ndarray:
    """Each sample's file offset, from the chunk offsets (``stco`` or ``co64``, not both) and
    ``stsc``, every chunk inside the file."""
    if b"stco" in found and b"co64" in found:
        raise FormatError(f"{where}: both stco and co64 chunk offset boxes")
    offsets_box = _one(found, b"stco" if b"stco" in found else b"co64", where)
    offsets_box.full_header()
    chunks = offsets_box.u32()
    if chunks > max(samples, 1):
        raise offsets_box.bad(f"{chunks:,} chunks for {samples:,} samples")
    entry_bytes = 4 if offsets_box.kind == "stco" else 8
    raw_offsets = np.frombuffer(offsets_box.table(chunks, entry_bytes), dtype=">u4" if entry_bytes == 4 else ">u8")
    if chunks and int(raw_offsets.max()) >= 1 << 63:  # checked unsigned: it would wrap negative as int64
        raise offsets_box.bad(f"a chunk offset of {int(raw_offsets.max()):,} lies beyond the member's {file_bytes:,} bytes")
    return _chunks(_one(found, b"stsc", where), raw_offsets.astype(np.int64), samples, sizes, file_bytes)


def _keyframes(stss: _Payload | None, samples: int, where: str) -> np.ndarray:
    """The sync samples (0-based, ascending; every sample without ``stss``); the track must
    start on one."""
    if stss is None:
        keyframes = np.arange(samples, dtype=np.int64)  # no sync sample table: every sample is a keyframe
    else:
        stss.full_header()
        entries = stss.u32()
        if entries > samples:
            raise stss.bad(f"{entries:,} sync samples for {samples:,} samples")
        numbers = np.frombuffer(stss.table(entries, 4), dtype=">u4").astype(np.int64)
        if (entries > 1 and bool((np.diff(numbers) <= 0).any())) or (entries and not 1 <= int(numbers[-1]) <= samples):
            raise stss.bad("sync samples must be ascending sample numbers of the track")
        keyframes = numbers - 1
    if samples and (not len(keyframes) or int(keyframes[0]) != 0):
        raise FormatError(f"{where}: the member does not start on a keyframe")
    return keyframes


def _frame_order(
    found: dict, durations: np.ndarray, composition: np.ndarray | None, samples: int, where: str
) -> tuple[tuple[tuple[int, int, float], ...], int, int, bool]:
    """The edit list, the media and movie timescales, and whether frame j is sample j: nothing
    reorders or shifts them (one composition offset for every sample, and an edit list, if any,
    that starts at that offset and covers the media)."""
    elst = found.get(b"elst", [])
    if len(elst) > 1:
        raise FormatError(f"{where}: {len(elst)} edit lists; a track has at most one")
    edits = _edits(_Payload(elst[0], "elst", where)) if elst else ()
    mdhd, mvhd = _at_most_one(found, b"mdhd", where), _at_most_one(found, b"mvhd", where)
    timescale, movie_timescale = (_timescale(mdhd) if mdhd else 0), (_timescale(mvhd) if mvhd else 0)
    shift = 0 if composition is None or not samples else int(composition[0])
    in_order = (composition is None or bool((composition == shift).all())) and trivial_edits(
        edits, media_ticks=int(durations.sum()), timescale=timescale, movie_timescale=movie_timescale, shift=shift
    )
    return edits, timescale, movie_timescale, in_order


def check_preroll(keyframes: np.ndarray, preroll: int, *, where: str) -> None:
    """A member's pre-roll is what the packer cut it with: the frames from the keyframe before
    an episode that does not start on one, so no keyframe lies in frames ``1..preroll`` (the
    first frame of the episode is none either). A pre-roll moved across a keyframe (an index
    re-sealed, or a compiled mixture's row) would give every row another frame.

    Raises:
        EpisodeDataError: a keyframe inside the pre-roll or at the episode's first frame
            (names the member, the pre-roll and the keyframe).
    """
    if preroll <= 0:
        return
    inside = keyframes[(keyframes >= 1) & (keyframes <= preroll)]
    if len(inside):
        raise EpisodeDataError(
            f"{where}: a pre-roll of {preroll} frames holds keyframe {int(inside[0])}; a pre-roll runs from the keyframe "
            "before an episode to its first frame, which is no keyframe (the index does not match the member)"
        )


def check_mp4(
    data: bytes | memoryview, *, where: str, frames: int | None = None, height: int | None = None, width: int | None = None
) -> Mp4Layout:
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
