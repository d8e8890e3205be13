"""Copy mode cuts members from the source's sample byte ranges (no demuxer, no muxer): the
members hold exactly the packets the demuxer path cut, decode to the same frames, and files
whose timing that path does not reproduce go to the demuxer."""

from __future__ import annotations

import io
import struct

import av
import pytest
import torch
from torchcodec.decoders import VideoDecoder

from lerobot_shards import pack_dataset
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import check_mp4, read_track
from lerobot_shards.packer.shard import build, cut_episode, write_member
from lerobot_shards.packer.source import LeRobotSource, SourceSampleReader, SourceVideoReader, UnsupportedTiming, read_moov
from tests.packed_fixtures import *
from tests.packed_fixtures import CAMERAS, episodes_index, h264_mp4, member_bytes
from tests.shared_data import shared_dataset


def _packets(data: bytes) -> list[tuple[bytes, bool]]:
    with av.open(io.BytesIO(data)) as container:
        return [(bytes(p), bool(p.is_keyframe)) for p in container.demux(video=0) if p.size]


def _frames(data: bytes) -> torch.Tensor:
    decoder = VideoDecoder(data, seek_mode="exact")
    return decoder.get_frames_in_range(0, decoder.metadata.num_frames).data


def _both_cuts(source: LeRobotSource, episode: int, key: str):
    location = source.video_location(episode, key)
    length = source.episodes[episode].length
    samples = SourceSampleReader(location.path)
    packets = SourceVideoReader(location.path)
    try:
        return cut_episode(location, samples, max_frames=length), cut_episode(location, packets, max_frames=length)
    finally:
        samples.close()
        packets.close()


@pytest.mark.parametrize("which", ["generated", "aloha"])
def test_byte_range_members_hold_the_demuxed_packets(which, sample_source):
    root = sample_source if which == "generated" else shared_dataset("aloha_cube_4cam")
    source = LeRobotSource(root)
    cut = 0
    for episode in sorted(source.episodes):
        for key in source.video_keys:
            (new, found_new), (old, found_old) = _both_cuts(source, episode, key)
            assert found_new == found_old, (episode, key)
            assert (new is None) == (old is None), (episode, key)
            if new is None:
                continue
            cut += 1
            assert _packets(new.data) == _packets(old.data), (episode, key)
            assert (new.frames, new.codec, new.height, new.width, new.source_bytes) == (
                old.frames,
                old.codec,
                old.height,
                old.width,
                old.source_bytes,
            )
            if episode in (0, 7) or (which == "generated" and episode % 3 == 0):  # packets equal: a few decodes suffice
                assert torch.equal(_frames(new.data), _frames(old.data)), (episode, key)
            layout = check_mp4(new.data, where="member", frames=new.frames)
            assert layout.samples == new.frames and layout.keyframes[0] == 0
    assert cut >= len(source.episodes)


def test_a_pack_uses_byte_ranges_where_it_can(sample_source, packed_copy, tmp_path, monkeypatch):
    """Every source file of the generated dataset takes the byte-range path; forcing the
    demuxer gives members with the same packets and the same index apart from member bytes."""
    opened = []
    original = build._packet_reader
    monkeypatch.setattr(build, "_packet_reader", lambda path, *bounds: opened.append(reader := original(path, *bounds)) or reader)
    pack_dataset(str(sample_source), str(tmp_path / "ranges"), video="copy", shard_size_mb=0.03)
    assert opened and all(isinstance(r, SourceSampleReader) for r in opened)
    monkeypatch.setattr(build, "_packet_reader", lambda path, *bounds: SourceVideoReader(path))
    pack_dataset(str(sample_source), str(tmp_path / "demuxed"), video="copy", shard_size_mb=0.03)
    ranges, demuxed = episodes_index(tmp_path / "ranges"), episodes_index(tmp_path / "demuxed")
    assert [r["episode_index"] for r in ranges] == [r["episode_index"] for r in demuxed]
    for a, b in zip(ranges, demuxed):
        for key in CAMERAS:
            assert _packets(member_bytes(tmp_path / "ranges", a, key)) == _packets(member_bytes(tmp_path / "demuxed", b, key))
            assert a[f"video/{key}/frames"] == b[f"video/{key}/frames"]


def test_reordered_frames_go_to_the_demuxer(tmp_path):
    (tmp_path / "b.mp4").write_bytes(h264_mp4(18, bframes=2, gop=6))
    with pytest.raises(UnsupportedTiming, match="ctts"):
        SourceSampleReader(tmp_path / "b.mp4")
    assert isinstance(build._packet_reader(tmp_path / "b.mp4"), SourceVideoReader)


def test_tables_that_lie_about_the_file_go_to_the_demuxer(tmp_path):
    """A source whose chunk offsets point past its end is refused by read_track (named); the
    pack then reads it with the demuxer, which reports what it finds."""
    data = bytearray(h264_mp4(18, bframes=0, gop=6))
    at = data.index(b"stco") + 12  # version/flags, entry count, first offset
    struct.pack_into(">I", data, at, len(data) + 10)
    (tmp_path / "lying.mp4").write_bytes(bytes(data))
    with pytest.raises(FormatError, match="beyond the member's"):
        SourceSampleReader(tmp_path / "lying.mp4")
    assert isinstance(build._packet_reader(tmp_path / "lying.mp4"), SourceVideoReader)
    (tmp_path / "nomoov.mp4").write_bytes(b"\0\0\0\x10ftypisom\0\0\0\0" + b"\0\0\0\x08free")
    with pytest.raises(FormatError, match="no moov box"):
        read_moov(tmp_path / "nomoov.mp4")


def test_written_members_read_back_as_written():
    # A visual sample entry (86 bytes, 64x48) with no codec configuration: not decodable, and
    # it need not be: the writer copies the entry verbatim.
    entry = (
        struct.pack(">I4s", 86, b"avc1") + bytes(6) + struct.pack(">H", 1) + bytes(16) + struct.pack(">HH", 64, 48) + bytes(50)
    )
    sizes, durations = [5, 3, 4, 2], [512, 512, 512, 1024]
    data = bytes(range(sum(sizes)))
    member = write_member(
        sample_entry=entry, timescale=15360, durations=durations, sizes=sizes, keyframes=[0, 2], width=64, height=48, data=data
    )
    track = read_track(member, where="m")
    layout = track.layout
    assert (layout.samples, layout.keyframes.tolist(), layout.sample_sizes.tolist()) == (4, [0, 2], sizes)
    assert track.durations.tolist() == durations and track.timescale == 15360 and track.edits == ()
    assert track.sample_entry == entry and (layout.height, layout.width) == (48, 64)
    assert b"".join(member[o : o + s] for o, s in zip(layout.sample_offsets, layout.sample_sizes)) == data
    every = write_member(
        sample_entry=entry, timescale=30, durations=[1, 1], sizes=[1, 1], keyframes=[0, 1], width=8, height=8, data=b"ab"
    )
    assert b"stss" not in every and read_track(every, where="m").layout.keyframes.tolist() == [0, 1]
    with pytest.raises(ValueError, match="do not describe"):
        write_member(sample_entry=entry, timescale=30, durations=[1], sizes=[2], keyframes=[0], width=8, height=8, data=b"a")


def test_empty_samples_go_to_the_demuxer(tmp_path):
    """The demuxer skips empty packets; a byte-range cut would keep them: such files are not
    cut by byte range."""
    data = bytearray(h264_mp4(18, bframes=0, gop=6))
    at = data.index(b"stsz") + 16  # version/flags, constant size 0, count, first size
    struct.pack_into(">I", data, at, 0)
    (tmp_path / "empty.mp4").write_bytes(bytes(data))
    with pytest.raises(UnsupportedTiming, match="empty samples"):
        SourceSampleReader(tmp_path / "empty.mp4")


def test_a_failing_digest_reaches_the_shard_builder():
    digests = build._Digests()
    try:
        assert digests.submit(b"abc")() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        with pytest.raises(TypeError):
            digests.submit(object())()  # not bytes: the worker's error is raised here, not lost
        assert digests.submit(b"")() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    finally:
        digests.close()
