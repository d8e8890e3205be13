"""Copy mode's byte-range cut against hostile sources (issue 30, findings 2-5): it reads a file
exactly as FFmpeg does, or hands it to the demuxer, or refuses it naming the bound; what a
file's tables claim never becomes memory. Each hostile file is built the way the finding
describes; "what FFmpeg shows" is PyAV decoding the same file."""

from __future__ import annotations

import io
import random
import struct
from pathlib import Path

import av
import pytest

from lerobot_shards.core.errors import BoundExceededError, DecodeError, FormatError
from lerobot_shards.core.format import check_mp4, read_track
from lerobot_shards.packer.errors import SourceError, VideoCutError
from lerobot_shards.packer.shard import build, cut_episode, write_member
from lerobot_shards.packer.source import SourceSampleReader, SourceVideoReader, VideoLocation
from lerobot_shards.reader.decode import CpuDecoders
from lerobot_shards.testing import CameraSpec, SampleSpec, tiny_member, write_sample_dataset
from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured
from tests.mp4_surgery import box, full_box, get, insert, locate, replace
from tests.shared_data import shared_dataset

FRAMES, FPS, STEP = 16, 30, 15  # frame i is gray level i * STEP
STBL = [b"moov", b"trak", b"mdia", b"minf", b"stbl"]


def _clip(frames: int = FRAMES, *, gop: int = 2) -> bytes:
    """An H.264 mp4 (48x64) whose frame i is uniformly gray level i * STEP (samples before moov)."""
    return tiny_member(frames, 48, 64, fps=FPS, gop=gop, step=STEP, crf=18)


def _levels(data: bytes) -> list[int]:
    """The frames FFmpeg shows for a file, as frame numbers (gray level / STEP)."""
    with av.open(io.BytesIO(data)) as container:
        return [round(float(f.to_ndarray(format="gray").mean()) / STEP) for f in container.decode(video=0)]


def _window_levels(data: bytes, start: float, stop: float) -> list[int]:
    """The frames FFmpeg shows in ``[start, stop)`` seconds of a file."""
    with av.open(io.BytesIO(data)) as container:
        return [
            round(float(f.to_ndarray(format="gray").mean()) / STEP)
            for f in container.decode(video=0)
            if start - 1e-4 <= float(f.time) < stop - 1e-4
        ]


def _put(data: bytes, place: list[bytes], table: bytes) -> bytes:
    """``table`` as the last child of the container at ``place``, made if the file has none."""
    try:
        return insert(data, place, table)
    except KeyError:
        return insert(data, place[:-1], box(place[-1], table))


def _edit_list(media_frame: int, frames: int, data: bytes) -> bytes:
    """An ``elst`` playing ``frames`` frames from ``media_frame`` (in the file's timescales)."""
    track = read_track(data, where="clip")
    per_frame = int(track.durations[0])
    duration = frames * track.movie_timescale // FPS
    return full_box(b"elst", 0, 0, struct.pack(">IIiHH", 1, duration, media_frame * per_frame, 1, 0))


# -- finding 2: an edit list (or any table) hidden where FFmpeg still reads it ---------------------
def test_2_a_hidden_edit_list_sends_the_file_to_the_demuxer_which_shows_ffmpegs_frames(tmp_path):
    clip = _clip()
    hidden = insert(clip, [b"moov", b"trak"], box(b"udta", _edit_list(8, 8, clip)))
    assert _levels(hidden) == list(range(8, 16))  # every FFmpeg-based decoder shows frames 8-15
    with pytest.raises(FormatError, match=r"mp4 box 'elst' inside moov/trak/udta: FFmpeg would honour it there"):
        read_track(hidden, where="hostile")
    path = tmp_path / "hidden.mp4"
    path.write_bytes(hidden)
    reader = build._packet_reader(path)
    assert isinstance(reader, SourceVideoReader)  # not the byte-range cut
    video, found = cut_episode(VideoLocation(path, 0.0, 4 / FPS), reader, max_frames=4)
    assert found == 4 and _levels(video.data) == _window_levels(hidden, 0.0, 4 / FPS) == [8, 9, 10, 11]
    reader.close()


@pytest.mark.parametrize(
    "where",
    [
        [b"moov", b"udta"],
        [b"moov", b"trak", b"udta"],
        [b"moov", b"trak", b"mdia", b"minf", b"dinf"],
        [b"moov", b"trak", b"mdia", b"minf", b"stbl", b"stsd", b"avc1"],
    ],
    ids=["moov-udta", "trak-udta", "dinf", "sample-entry"],
)
def test_2_a_table_in_any_container_ffmpeg_reads_is_refused_by_the_cut_and_by_readers(where, tmp_path):
    clip = _clip()
    stts = full_box(b"stts", 0, 0, struct.pack(">III", 1, FRAMES, 1024))  # twice the durations
    hostile = _put(clip, where, stts)
    with pytest.raises(FormatError, match=r"mp4 box 'stts' inside"):
        read_track(hostile, where="hostile")
    path = tmp_path / "hostile.mp4"
    path.write_bytes(hostile)
    try:  # the demuxer reads it as FFmpeg does, or FFmpeg itself refuses it: either way not the cut
        assert isinstance(build._packet_reader(path), SourceVideoReader)
    except VideoCutError as err:
        assert "cannot open video" in str(err)
    with pytest.raises(FormatError, match="'stts' inside"):  # and a reader refuses such a member
        check_mp4(hostile, where="member")


def test_2_a_duplicated_table_or_a_movie_in_disguise_is_refused():
    clip = _clip()
    stts = get(clip, [*STBL, b"stts"])
    with pytest.raises(FormatError, match="2 mp4 'stts' boxes"):
        read_track(insert(clip, STBL, stts), where="m")
    with pytest.raises(FormatError, match="'cmov' box"):
        read_track(_put(clip, [b"moov", b"udta"], box(b"cmov", b"")), where="m")
    meta = full_box(b"meta", 0, 0, full_box(b"hdlr", 0, 0, bytes(4) + b"mdir" + bytes(13)) + get(clip, [*STBL, b"stss"]))
    with pytest.raises(FormatError, match="'stss' inside moov/meta"):
        read_track(insert(clip, [b"moov"], meta), where="m")


# -- findings 3 and 4: what tables claim is bounded before it becomes memory ----------------------
def _claims(clip: bytes, *, samples: int, size: int) -> bytes:
    """``clip`` whose tables claim ``samples`` samples of ``size`` bytes in one chunk at its mdat."""
    mdat = next(pos for pos, _, _, kind in _top(clip) if kind == b"mdat") + 8
    out = replace(clip, [*STBL, b"stsz"], full_box(b"stsz", 0, 0, struct.pack(">II", size, samples)))
    out = replace(out, [*STBL, b"stts"], full_box(b"stts", 0, 0, struct.pack(">III", 1, samples, 512)))
    out = replace(out, [*STBL, b"stsc"], full_box(b"stsc", 0, 0, struct.pack(">IIII", 1, 1, samples, 1)))
    out = replace(out, [*STBL, b"stco"], full_box(b"stco", 0, 0, struct.pack(">II", 1, mdat)))
    return replace(out, [*STBL, b"stss"], full_box(b"stss", 0, 0, struct.pack(">II", 1, 1)))


def _top(data: bytes):
    from tests.mp4_surgery import _boxes

    return list(_boxes(data, 0, len(data)))


def _sparse(path: Path, head: bytes, size: int) -> None:
    """``head`` then zeros up to ``size`` bytes, without writing the zeros (a sparse file)."""
    with open(path, "wb") as handle:
        handle.write(head)
        handle.truncate(size)


def _hostile_source(tmp_path: Path, make) -> Path:
    """A 4-camera LeRobot source whose every camera file is replaced by ``make(path, clip)``."""
    root = tmp_path / "src"
    cameras = tuple(CameraSpec(f"observation.images.{name}", 48, 64) for name in "abcd")
    write_sample_dataset(root, SampleSpec(episodes=2, lengths=(8, 8), cameras=cameras, seed=3))
    for video in sorted((root / "videos").rglob("*.mp4")):
        make(video, video.read_bytes())
    return root


PACK_CHILD = """
from lerobot_shards import pack_dataset
pack_dataset(sys.argv[1], sys.argv[2], video="copy")
"""


def test_3_a_tiny_moov_claiming_10m_samples_is_refused_by_name_in_little_memory(tmp_path):
    """A 10 MB sparse file whose moov claims 10M samples of one byte each: within the file's
    apparent size and within MAX_TRACK_SAMPLES, but far beyond what its episodes can use."""

    def make(path: Path, clip: bytes) -> None:
        moov = get(_claims(clip, samples=10_000_000, size=1), [b"moov"])
        mdat_size = 10_000_000
        _sparse(path, moov + struct.pack(">I4s", mdat_size + 8, b"mdat"), len(moov) + 8 + mdat_size)

    source = _hostile_source(tmp_path, make)
    measured = run_measured(PACK_CHILD, str(source), str(tmp_path / "out"))
    assert (
        measured.outcome.startswith("SourceError: ")
        and "claims 10,000,000 samples; the file's episodes can use at most" in measured.outcome
    ), measured
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, measured
    # Read without the episodes' bound (10M is within MAX_TRACK_SAMPLES): compact tables, still small.
    probe = run_measured(
        "from lerobot_shards.packer.source.samples import SourceSampleReader\nSourceSampleReader(Path(sys.argv[1]))\n".replace(
            "Path(", "__import__('pathlib').Path("
        ),
        str(next((source / "videos").rglob("*.mp4"))),
    )
    assert probe.peak_bytes < HOSTILE_PEAK_BYTES, probe


def test_4_samples_claiming_a_gigabyte_each_are_refused_before_anything_is_read(tmp_path):
    """A 48x64 camera whose samples claim 1 GB each, in a sparse 4 GB file: the sample size
    is bounded by the frame's raw size, not by the file's apparent size."""

    def make(path: Path, clip: bytes) -> None:
        moov = get(_claims(clip, samples=4, size=1_000_000_000), [b"moov"])
        _sparse(path, moov + struct.pack(">I4s", 1, b"mdat") + struct.pack(">Q", 4_000_000_016), len(moov) + 4_000_000_016)

    source = _hostile_source(tmp_path, make)
    measured = run_measured(PACK_CHILD, str(source), str(tmp_path / "out"))
    assert (
        measured.outcome.startswith("SourceError: ")
        and "a sample of 1,000,000,000 bytes; a frame of the recorded size is at most 83,968 bytes" in measured.outcome
    ), measured
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, measured
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file()) if (tmp_path / "out").exists() else 0
    assert written < 10_000_000


# -- finding 5: "in order" means every sample, and every path decodes it alike or refuses it ------
def test_5_a_partial_composition_table_is_refused_on_every_path():
    clip = _clip(8, gop=8)
    track = read_track(clip, where="c")
    layout = track.layout
    member = write_member(
        sample_entry=track.sample_entry,
        timescale=track.timescale,
        durations=track.durations.tolist(),
        sizes=layout.sample_sizes.tolist(),
        keyframes=layout.keyframes.tolist(),
        width=64,
        height=48,
        data=b"".join(clip[o : o + s] for o, s in zip(layout.sample_offsets.tolist(), layout.sample_sizes.tolist())),
    )
    partial = insert(member, STBL, full_box(b"ctts", 0, 0, struct.pack(">III", 1, 4, 0)))  # covers 4 of 8 samples
    with pytest.raises(FormatError, match="mp4 box ctts: describes 4 samples; the track has 8"):
        check_mp4(partial, where="m")
    for backend in ("pyav", "torchcodec"):
        with pytest.raises((FormatError, DecodeError), match="ctts: describes 4 samples"):
            CpuDecoders(backend).open(partial, where="m")
    # Shared presentation times make "frame j" undefined: refused too.
    zero = replace(member, [*STBL, b"stts"], full_box(b"stts", 0, 0, struct.pack(">IIIII", 2, 4, 0, 4, 512)))
    with pytest.raises(FormatError, match="two samples share a presentation time"):
        check_mp4(zero, where="m")


def test_5_an_edit_list_that_shifts_frames_makes_a_member_not_in_order():
    clip = _clip(8, gop=8)
    elst = [b"moov", b"trak", b"edts", b"elst"]
    shifted = replace(clip, elst, _edit_list(2, 6, clip))
    assert not check_mp4(shifted, where="m").in_order  # the GPU path refuses it; the CPU path is FFmpeg's
    assert check_mp4(replace(clip, elst, _edit_list(0, 8, clip)), where="m").in_order


# -- the cut against FFmpeg, on mutated sources ------------------------------------------------------
PLACES = [
    [b"moov", b"udta"],
    [b"moov", b"trak", b"udta"],
    [b"moov", b"trak", b"mdia", b"minf", b"dinf"],
    [*STBL, b"stsd", b"avc1"],
    STBL,
    [b"moov", b"trak", b"mdia", b"minf"],
    [b"moov", b"trak"],
]
KINDS = [b"stts", b"ctts", b"stss", b"stsz", b"stco", b"stsc", b"elst"]


def _mutate(clip: bytes, rng: random.Random) -> bytes:
    """Hide a table (or an edit list) in a container FFmpeg reads, duplicate one, or resize one."""
    kind, place, action = rng.choice(KINDS), rng.choice(PLACES), rng.choice(["hide", "resize", "edit", "benign", "benign"])
    if action == "benign":  # boxes FFmpeg reads but that decide nothing about samples: the cut may keep the file
        filler = rng.choice(
            [
                box(b"free", bytes(rng.randrange(0, 40))),
                box(b"\xa9nam", b"\x00\x05\x00\x00hello"),
                full_box(b"sdtp", 0, 0, bytes(FRAMES)),
            ]
        )
        if filler[4:8] == b"sdtp":
            return insert(clip, STBL, filler)
        return _put(
            clip,
            rng.choice([[b"moov", b"udta"], [b"moov", b"trak", b"udta"], [b"moov", b"trak", b"mdia", b"minf", b"dinf"]]),
            filler,
        )
    if action == "edit":  # the track's own edit list, changed
        start, count = rng.randrange(0, 8), rng.randrange(1, 9)
        return replace(clip, [b"moov", b"trak", b"edts", b"elst"], _edit_list(start, count, clip))
    if action == "resize" and kind != b"elst" and kind != b"ctts":
        original = get(clip, [*STBL, kind])
        body = bytearray(original)
        count_at = 16 if kind == b"stsz" else 12
        count = struct.unpack(">I", body[count_at : count_at + 4])[0]
        body[count_at : count_at + 4] = struct.pack(">I", max(0, count + rng.choice([-3, -1, 1, 2, 10_000])))
        return replace(clip, [*STBL, kind], bytes(body))
    if kind == b"elst":
        table = _edit_list(rng.randrange(0, 8), rng.randrange(1, 9), clip)
    elif kind == b"ctts":
        table = full_box(b"ctts", 0, 0, struct.pack(">III", 1, FRAMES, 512 * rng.randrange(1, 3)))
    else:
        table = get(clip, [*STBL, kind])
    return _put(clip, place, table)


def test_seeded_fuzz_the_cut_shows_ffmpegs_frames_or_hands_over_or_names_the_error(tmp_path):
    """Copy mode's choice on 60 mutated sources: where the byte-range cut takes the file, the
    member's frames are the frames FFmpeg shows for the window; otherwise the demuxer reads
    it (FFmpeg's own reading), or the file is refused with a named error."""
    clip = _clip()
    rng = random.Random(30)
    taken = handed = refused = 0
    for case in range(60):
        mutated = _mutate(clip, rng)
        path = tmp_path / f"case{case}.mp4"
        path.write_bytes(mutated)
        start = rng.randrange(0, 6) * 2 / FPS
        stop = start + rng.randrange(2, 8) / FPS
        try:
            reader = build._packet_reader(path, 2 * FRAMES + 100)
        except (SourceError, VideoCutError):
            refused += 1
            continue
        try:
            video, found = cut_episode(VideoLocation(path, start, stop), reader, max_frames=FRAMES)
        except (VideoCutError, FormatError):
            refused += 1
            continue
        finally:
            reader.close()
        if isinstance(reader, SourceSampleReader):
            taken += 1
            assert video is None or _levels(video.data) == _window_levels(mutated, start, stop), (case, mutated)
        else:
            handed += 1
    print(f"fuzz: {taken} cut by byte range, {handed} handed to the demuxer, {refused} refused by name")
    assert taken and handed and taken + handed + refused == 60, (taken, handed, refused)


def test_honest_lerobot_files_keep_the_fast_path():
    """The shared ALOHA set, written by LeRobot 0.6.1: every camera file takes the byte-range cut."""
    root = shared_dataset("aloha_cube_4cam")
    files = sorted((root / "videos").rglob("*.mp4"))
    assert files and all(isinstance(build._packet_reader(p, 10_000), SourceSampleReader) for p in files)


def test_a_bound_violation_is_never_handed_to_the_demuxer(tmp_path):
    """A file refused for a hidden box still has its claims bounded first: the demuxer would
    expand them."""
    clip = _clip()
    huge = _claims(clip, samples=5_000, size=1)
    hidden = insert(huge, [b"moov", b"trak"], box(b"udta", _edit_list(0, 4, clip)))
    with pytest.raises(BoundExceededError, match="claims 5,000 samples; the file's episodes can use at most 100"):
        read_track(hidden, where="m", max_samples=100)
    path = tmp_path / "m.mp4"
    path.write_bytes(hidden)
    with pytest.raises(SourceError, match="claims 5,000 samples"):
        build._packet_reader(path, 100)
    assert locate(hidden, [b"moov", b"trak", b"udta", b"elst"])


def test_review_findings_offsets_that_wrap_and_bounds_that_a_hidden_box_skipped(tmp_path):
    """Three holes a review found in the bounds above: a 64-bit chunk offset of 2^63 or more
    wrapped negative (and a GPU slice would read from the member's end); the per-sample bound
    was skipped when a misplaced box refused the file first (handing 1 GB samples to the
    demuxer); a size table hidden inside the sample entry escaped the count bound."""
    clip = _clip()
    offsets = read_track(clip, where="c").layout.sample_offsets
    stco = get(clip, [*STBL, b"stco"])
    count = struct.unpack(">I", stco[12:16])[0]
    chunk_offsets = struct.unpack(f">{count}I", stco[16 : 16 + 4 * count])
    wrapped = full_box(
        b"co64", 0, 0, struct.pack(f">I{count}Q", count, *((o + (1 << 64) - len(clip)) % (1 << 64) for o in chunk_offsets))
    )
    assert len(offsets) and min(offsets) > 0
    with pytest.raises(FormatError, match="a chunk offset of .* lies beyond"):
        check_mp4(replace(clip, [*STBL, b"stco"], wrapped), where="m")

    huge = _claims(clip, samples=4, size=1_000_000_000)
    hidden = insert(huge, [b"moov", b"trak"], box(b"udta", _edit_list(0, 4, clip)))
    with pytest.raises(BoundExceededError, match="a sample of 1,000,000,000 bytes; the largest frame allowed is at most"):
        read_track(hidden, where="m")
    path = tmp_path / "huge.mp4"
    path.write_bytes(hidden)
    with pytest.raises(SourceError, match="a sample of 1,000,000,000 bytes; a frame of the recorded size"):
        build._packet_reader(path, 100, 83_968)

    in_entry = _put(clip, [*STBL, b"stsd", b"avc1"], full_box(b"stsz", 0, 0, struct.pack(">II", 1, 5_000)))
    with pytest.raises(BoundExceededError, match="claims 5,000 samples; the file's episodes can use at most 100"):
        read_track(in_entry, where="m", max_samples=100)
