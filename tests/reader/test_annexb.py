"""The GPU decode stage's feed, on CPU: what NVDEC is sent must decode to exactly the frames asked.

``lerobot_shards/reader/decode/annexb.py`` turns a member into an Annex-B elementary stream and plans, per
batch, the runs of samples that reach the wanted frames; ``NvdecSession`` sends exactly those
packets, one picture each, members back to back, one end of stream per batch. The same packets
decoded here by FFmpeg (PyAV's H.264/HEVC decoders, no demuxer) must give frames bit-identical
to torchcodec's container decode of the same indices (what the CPU reader returns), for real
re-encoded members of the packer. Plus the planning math, and hostile configurations and
samples refused by name before any decoder sees them.
"""

from __future__ import annotations

import io
import random
import struct

import av
import numpy as np
import pytest
import torch
from torchcodec.decoders import VideoDecoder

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import MAX_PARAMETER_SETS, check_mp4
from lerobot_shards.reader.decode import (
    START_CODE,
    decode_runs,
    elementary_stream,
    packets,
    stream_config,
    to_annexb,
)
from tests.packed_fixtures import *
from tests.packed_fixtures import CAMERAS, episodes_index, h264_mp4, member_bytes


def _members(root) -> list[bytes]:
    return [member_bytes(root, row, key) for row in episodes_index(root) for key in CAMERAS]


def _decode_like_the_session(codec: str, jobs: list[tuple[bytes, list[int]]]) -> tuple[list[int], list[np.ndarray]]:
    """Send every job's packets back to back into one decoder, one picture per packet, then
    one end of stream, as NvdecSession does; returns the samples sent and the frames out."""
    context = av.CodecContext.create(codec, "r")
    sent, frames = [], []
    for data, wanted in jobs:
        layout = check_mp4(data, where="m")
        stream = elementary_stream(data, layout, stream_config(layout.codec, layout.codec_config, where="m"), where="m")
        # The buffer holds the samples alone (a start code per NAL unit): parameter sets go
        # into each run's first packet, so a member of only keyframes does not repeat them.
        assert len(stream.data) <= sum(layout.sample_sizes) + 4 * sum(layout.sample_sizes) // 5
        for j, first in packets(layout, wanted):
            sent.append(j)
            frames += [f.to_ndarray(format="rgb24") for f in context.decode(av.Packet(stream.packet(j, first=first)))]
    frames += [f.to_ndarray(format="rgb24") for f in context.decode(None)]
    return sent, frames


@pytest.mark.parametrize("fixture", ["packed_hevc", "packed_h264"])
def test_the_feed_decodes_to_the_container_frames(fixture, request):
    root = request.getfixturevalue(fixture)
    members = [m for m in _members(root) if check_mp4(m, where="m").samples >= 4]
    codec = check_mp4(members[0], where="m").codec
    assert codec == ("hevc" if fixture == "packed_hevc" else "h264")
    rng = random.Random(7)
    for trial in range(6):
        chosen = rng.sample(members, min(3, len(members)))
        jobs = []
        for data in chosen:
            frames = check_mp4(data, where="m").samples
            jobs.append((data, sorted(rng.sample(range(frames), rng.randint(1, min(6, frames))))))
        sent, decoded = _decode_like_the_session(codec, jobs)
        assert len(decoded) == len(sent), f"trial {trial}: {len(sent)} packets gave {len(decoded)} frames"
        position = 0
        for data, wanted in jobs:
            layout = check_mp4(data, where="m")
            runs = decode_runs(layout.keyframes, wanted, layout.samples)
            count = sum(last - first + 1 for first, last in runs)
            mine = dict(zip(sent[position : position + count], decoded[position : position + count]))
            position += count
            expected = VideoDecoder(data, seek_mode="exact").get_frames_at(indices=wanted).data
            for k, j in enumerate(wanted):
                assert torch.equal(torch.from_numpy(mine[j]).permute(2, 0, 1), expected[k]), f"trial {trial} frame {j}"


def test_layout_locates_every_sample(packed_h264):
    """The sample byte ranges check_mp4 returns are the demuxer's packets, and their order is
    presentation order for the packer's re-encodes (no B-frames)."""
    data = _members(packed_h264)[0]
    layout = check_mp4(data, where="m")
    with av.open(io.BytesIO(data)) as container:
        demuxed = [bytes(p) for p in container.demux(video=0) if p.size]
    assert [data[o : o + s] for o, s in zip(layout.sample_offsets, layout.sample_sizes)] == demuxed
    assert layout.in_order and layout.codec_config


def test_b_frames_are_marked_out_of_order(tmp_path):
    """A member whose frames are stored out of presentation order (B-frames, ctts) is flagged:
    the GPU stage refuses it rather than feeding sample j as frame j."""
    layout = check_mp4(h264_mp4(24, bframes=2, gop=12), where="bframes")
    assert layout.samples == 24 and not layout.in_order


def test_decode_runs_decode_each_gop_once_up_to_its_last_wanted_frame():
    keyframes = (0, 4, 8)
    assert decode_runs(keyframes, [5, 1, 5, 6, 2], 10) == [(0, 2), (4, 6)]
    assert decode_runs(keyframes, [9], 10) == [(8, 9)]
    assert decode_runs(keyframes, [], 10) == []
    assert decode_runs((0,), [0], 1) == [(0, 0)]
    # Cost is bounded by the GOP: with GOPs of 2 a random frame costs at most 2 decodes.
    gop2 = tuple(range(0, 250, 2))
    rng = random.Random(1)
    for _ in range(200):
        wanted = rng.sample(range(250), 16)
        runs = decode_runs(gop2, wanted, 250)
        assert sum(last - first + 1 for first, last in runs) <= 2 * len(set(wanted))
        assert all(first in gop2 for first, _ in runs)
    with pytest.raises(IndexError, match=r"\[10\]"):
        decode_runs(keyframes, [3, 10], 10)
    with pytest.raises(IndexError, match=r"\[-1\]"):
        decode_runs(keyframes, [-1], 10)


def _hvcc(arrays: list[tuple[int, list[bytes]]], length_size: int = 4) -> bytes:
    body = bytes(21) + bytes([0xFC | (length_size - 1), len(arrays)])
    for nal_type, nals in arrays:
        body += bytes([nal_type]) + struct.pack(">H", len(nals))
        for nal in nals:
            body += struct.pack(">H", len(nal)) + nal
    return body


def _nal(hevc_type: int, size: int = 6) -> bytes:
    return bytes([hevc_type << 1, 1]) + bytes(size - 2)


def test_stream_config_keeps_parameter_sets_only():
    config = stream_config("hevc", _hvcc([(32, [_nal(32)]), (33, [_nal(33)]), (34, [_nal(34)]), (39, [_nal(39, 40)])]), where="m")
    assert config.length_size == 4
    assert config.parameter_sets == b"".join(START_CODE + _nal(t) for t in (32, 33, 34))  # the SEI is left out
    sps, pps = bytes([0x67, 1, 2, 3]), bytes([0x68, 4])
    avcc = bytes([1, 100, 0, 31, 0xFF, 0xE1]) + struct.pack(">H", len(sps)) + sps + bytes([1]) + struct.pack(">H", len(pps)) + pps
    config = stream_config("h264", avcc, where="m")
    assert config.parameter_sets == START_CODE + sps + START_CODE + pps and config.length_size == 4


@pytest.mark.parametrize(
    "config, match",
    [
        (b"", "truncated"),
        (_hvcc([(33, [_nal(33)])])[:-3], "truncated"),
        (_hvcc([(33, [_nal(33)] * (MAX_PARAMETER_SETS + 1))]), f"more than {MAX_PARAMETER_SETS} parameter sets"),
        (_hvcc([(33, [_nal(33)])], length_size=3), "length size 3"),
        (_hvcc([(39, [_nal(39)])]), "no parameter sets"),
        (_hvcc([(33, [b""])]), "empty parameter set"),
        (_hvcc([(33, [_nal(33, 40_000), _nal(33, 40_000)])]), "bytes of parameter sets; at most 65,536"),
    ],
)
def test_hostile_stream_configs_are_refused(config, match):
    with pytest.raises(FormatError, match=match):
        stream_config("hevc", config, where="member-7")


def test_hostile_samples_are_refused():
    good = struct.pack(">I", 3) + b"\x26\x01\xaf"
    assert to_annexb(good, 4, where="m") == START_CODE + b"\x26\x01\xaf"
    with pytest.raises(FormatError, match="does not fit the sample"):
        to_annexb(struct.pack(">I", 1 << 30) + b"\x26\x01", 4, where="m")
    with pytest.raises(FormatError, match="does not fit the sample"):
        to_annexb(struct.pack(">I", 0) + b"\x26", 4, where="m")
    with pytest.raises(FormatError, match="inside a NAL length prefix"):
        to_annexb(good + b"\x00\x00", 4, where="m")
    with pytest.raises(FormatError, match="empty sample"):
        to_annexb(b"", 4, where="m")
    with pytest.raises(FormatError, match="no elementary-stream path"):
        stream_config("av1", b"\x81", where="m")
