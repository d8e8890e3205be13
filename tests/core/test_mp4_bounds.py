"""A member's mp4 boxes are checked before any decoder opens it (issue 21, findings 8 and 9).

FFmpeg sizes its sample index by what a member's tables claim, and decoding frame j of a
member whose only keyframe is frame 0 costs j decodes. ``lerobot_shards.core.format.check_mp4`` bounds
both from the boxes. These tests edit real members box by box (honest ones from every codec
the packer writes must pass), encode a real 8192x8192 single-keyframe H.264 member, and put a
hostile member into a re-sealed pack to measure the reader and ``verify --decode``.
"""

from __future__ import annotations

import io
import shutil
import struct
from fractions import Fraction

import av
import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards.cli import main as cli
from lerobot_shards.core.errors import EpisodeDataError, FormatError
from lerobot_shards.core.format import EPISODES_INDEX_PATH, MAX_GOP_PIXELS, check_gop, check_mp4, longest_gop, video_column
from lerobot_shards.packer.shard import cut_episode
from lerobot_shards.packer.source import VideoLocation
from lerobot_shards.reader.decode import CpuDecoders, FrameSpec
from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured
from tests.pack_tamper import replace_member
from tests.packed_fixtures import *
from tests.packed_fixtures import CAMERAS, member_bytes

CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl", b"edts"}


def find_box(data: bytes, kind: bytes) -> tuple[int, int]:
    """(header start, payload start) of the first ``kind`` box on the path to the sample tables."""
    stack = [(0, len(data))]
    while stack:
        pos, end = stack.pop(0)
        while pos < end:
            size, name = struct.unpack(">I4s", data[pos : pos + 8])
            size = size or end - pos
            if name == kind:
                return pos, pos + 8
            if name in CONTAINERS:
                stack.append((pos + 8, pos + size))
            pos += size
    raise KeyError(kind)


def patch(data: bytes, kind: bytes, offset: int, value: bytes) -> bytes:
    """``value`` written at ``offset`` into ``kind``'s payload (box sizes unchanged)."""
    start = find_box(data, kind)[1] + offset
    return data[:start] + value + data[start + len(value) :]


def rows(root):
    return pq.read_table(root / EPISODES_INDEX_PATH).to_pylist()


@pytest.fixture(scope="module")
def member(packed_copy) -> tuple[bytes, int, int, int]:
    """An honest AV1 member with more than two frames: (bytes, frames, height, width)."""
    row = next(r for r in rows(packed_copy) if r[video_column(CAMERAS[0], "frames")] > 4)
    data = member_bytes(packed_copy, row, CAMERAS[0])
    layout = check_mp4(data, where="m")
    return data, row[video_column(CAMERAS[0], "frames")], layout.height, layout.width


@pytest.mark.parametrize("pack", ["packed_copy", "packed_hevc", "packed_h264"])
def test_every_member_the_packer_writes_passes(pack, request):
    root = request.getfixturevalue(pack)
    checked = 0
    for row in rows(root):
        for camera in CAMERAS:
            if row[video_column(camera, "size")]:
                data = member_bytes(root, row, camera)
                layout = check_mp4(data, where="m", frames=row[video_column(camera, "frames")])
                assert layout.keyframes[0] == 0 and layout.longest_gop <= 2  # LeRobot's and our GOP of 2
                checked += 1
    assert checked >= 10


def test_gop_arithmetic():
    assert longest_gop([0], 40) == 40
    assert longest_gop([0, 2, 4], 5) == 2
    assert longest_gop([0, 3], 4) == 3
    check_gop(MAX_GOP_PIXELS // (480 * 640), 480, 640, where="m")
    with pytest.raises(FormatError, match=r"m: a GOP of 40 frames of 8192x8192 costs 2,684,354,560 decoded pixels"):
        check_gop(40, 8192, 8192, where="m")


def test_a_sample_count_claiming_85m_samples_is_refused(member):
    data, frames, _, _ = member
    # stsz: version/flags, sample_size = 1 (constant: no table needed), sample_count = 85M.
    hostile = patch(data, b"stsz", 4, struct.pack(">II", 1, 85_000_000))
    with pytest.raises(
        EpisodeDataError, match=rf"m: mp4 box stsz: claims 85,000,000 samples; the dataset records {frames} frames"
    ):
        check_mp4(hostile, where="m", frames=frames)
    # Without a recorded count: at most MAX_TRACK_SAMPLES, and the samples must fit the file.
    with pytest.raises(
        FormatError, match=r"claims 85,000,000 samples; at most 10,000,000 are read without a recorded frame count"
    ):
        check_mp4(hostile, where="m")
    fewer = patch(data, b"stsz", 4, struct.pack(">II", 1, 5_000_000))
    with pytest.raises(FormatError, match=r"5,000,000 samples claim more bytes than the member's"):
        check_mp4(fewer, where="m")


@pytest.mark.parametrize(
    ("kind", "offset", "value", "message"),
    [
        (b"stts", 4, struct.pack(">I", 50_000_000), r"mp4 box stts: claims 50,000,000 entries of 8 bytes; the box holds"),
        (b"stts", 8, struct.pack(">I", 1 << 30), r"mp4 box stts: describes"),
        (b"stsc", 4, struct.pack(">I", 1 << 28), r"mp4 box stsc: .*entries for"),
        (b"stco", 4, struct.pack(">I", 1 << 28), r"mp4 box stco: .*chunks for"),
        (b"stco", 8, struct.pack(">I", 1 << 31), r"mp4 box stsc: chunk 1 .* lies beyond the member"),
        (b"stss", 8, struct.pack(">I", 2), r"(does not start on a keyframe|sync samples must be ascending)"),
        (b"stsd", 8, struct.pack(">I", 1 << 20), r"mp4 box stsd: a sample entry of 1,048,576 bytes does not fit the box"),
        (b"hdlr", 8, b"soun", r"the track is not a video track"),
        (b"trak", -4, b"moof", r"fragmented mp4 \('moof' box\)"),
        (b"moov", -8, struct.pack(">I", 1 << 30), r"mp4 box b'moov' of 1073741824 bytes does not fit its parent"),
    ],
)
def test_sample_tables_must_fit_their_boxes_and_agree(member, kind, offset, value, message):
    data, frames, _, _ = member
    if kind == b"stss":
        try:
            find_box(data, b"stss")
        except KeyError:
            pytest.skip("this member has no stss (every sample a keyframe)")
    hostile = patch(data, kind, offset, value)
    with pytest.raises(FormatError, match=message):
        check_mp4(hostile, where="m", frames=frames)


def test_deeply_nested_or_numerous_boxes_are_refused():
    nested = b""
    for _ in range(20):  # user data in user data...: FFmpeg walks every level of it
        nested = struct.pack(">I4s", 8 + len(nested), b"udta") + nested
    with pytest.raises(FormatError, match="nested deeper than"):
        check_mp4(nested, where="m")
    many = struct.pack(">I4s", 8, b"free") * 20_000
    with pytest.raises(FormatError, match="more than 10,000 mp4 boxes"):
        check_mp4(many, where="m")


@pytest.fixture(scope="module")
def one_keyframe_8k(tmp_path_factory) -> bytes:
    """A real 8192x8192 H.264 member of 33 frames and one keyframe (finding 9): reaching its
    last frame decodes 33 frames of 67M pixels."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width = stream.height = 8192
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "ultrafast", "g": "1000", "keyint_min": "1000", "sc_threshold": "0", "bframes": "0"}
        frame = av.VideoFrame.from_ndarray(np.zeros((8192 * 3 // 2, 8192), np.uint8), format="yuv420p")
        for index in range(33):
            frame.pts, frame.time_base = index, Fraction(1, 30)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    data = buffer.getvalue()
    path = tmp_path_factory.mktemp("gop") / "long_gop.mp4"
    path.write_bytes(data)
    return data


@pytest.mark.slow
def test_a_long_gop_member_is_refused_before_decoding(one_keyframe_8k, tmp_path):
    layout_error = r"m: a GOP of 33 frames of 8192x8192 costs 2,214,592,512 decoded pixels to reach one frame"
    with pytest.raises(FormatError, match=layout_error):
        CpuDecoders("auto").open(one_keyframe_8k, where="m", spec=FrameSpec(8192, 8192, 33))
    with pytest.raises(FormatError, match=layout_error):
        CpuDecoders("pyav").open(one_keyframe_8k, where="m", spec=FrameSpec(8192, 8192, 33))
    # The packer's copy mode does not cut such a GOP into a member: it re-encodes instead.
    source = tmp_path / "long_gop.mp4"
    source.write_bytes(one_keyframe_8k)
    video, found = cut_episode(VideoLocation(source, 0.0, 33 / 30), max_frames=33)
    assert video is None and found == 33


def test_pyav_decodes_from_the_keyframe_before_a_frame_not_from_the_start(packed_hevc):
    row = rows(packed_hevc)[0]
    data = member_bytes(packed_hevc, row, CAMERAS[0])
    frames = row[video_column(CAMERAS[0], "frames")]
    reference = CpuDecoders("torchcodec").open(data, where="m").frames(list(range(frames)))
    decoder = CpuDecoders("pyav").open(data, where="m")
    for j in (frames - 1, 1, frames // 2):
        assert (decoder.frames([j]) == reference[j : j + 1]).all()
    counted = _count_decoded(data, frames - 1)
    assert counted <= 3, f"frame {frames - 1} took {counted} decodes (GOP 2)"


def _count_decoded(data: bytes, j: int) -> int:
    """Frames PyAV decodes to reach frame ``j`` from the keyframe the decoder seeks to."""
    decoder = CpuDecoders("pyav").open(data, where="m")
    calls = 0
    original = av.container.InputContainer.decode

    def counting(self, *args, **kwargs):
        nonlocal calls
        for frame in original(self, *args, **kwargs):
            calls += 1
            yield frame

    av.container.InputContainer.decode = counting
    try:
        decoder.frames([j])
    finally:
        av.container.InputContainer.decode = original
    return calls


HOSTILE_READ = """
import sys
from lerobot_shards import PackedDataset
dataset = PackedDataset(sys.argv[1], shuffle=False, return_uint8=True, prefetch_episodes=0)
for sample in dataset:
    pass
"""


def test_a_resealed_pack_with_an_85m_sample_member_costs_little(packed_copy, tmp_path):
    root = tmp_path / "pack"
    shutil.copytree(packed_copy, root)
    row = next(r for r in rows(root) if r[video_column(CAMERAS[0], "frames")] > 4)
    data = member_bytes(root, row, CAMERAS[0])
    replace_member(root, row["episode_index"], CAMERAS[0], patch(data, b"stsz", 4, struct.pack(">II", 1, 85_000_000)))
    measured = run_measured(HOSTILE_READ, str(root))
    assert measured.outcome.startswith("EpisodeDataError: ") and "mp4 box stsz: claims 85,000,000 samples" in measured.outcome, (
        measured
    )
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, measured
    result = CliRunner().invoke(cli, ["verify", str(root), "--decode"])
    assert result.exit_code == 1 and "claims 85,000,000 samples" in result.output and "Traceback" not in result.output
