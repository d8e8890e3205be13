"""Per-episode members: stream-copy cuts are lossless and start at pts 0 on a keyframe; one
pass over a source file gives what independent cuts give; re-encodes decode from the episode's
own keyframe, never from the start of the file; trims keep the first frames."""

from __future__ import annotations

import io
import math

import av
import pytest
import torch
from torchcodec.decoders import VideoDecoder

from lerobot_shards import VideoCutError
from lerobot_shards.packer.shard import EncodeSettings, cut_episode, reencode_episode
from lerobot_shards.packer.source import LeRobotSource, SourceFrameDecoder, SourceVideoReader, VideoLocation
from lerobot_shards.testing import read_identity
from tests.packed_fixtures import *
from tests.packed_fixtures import CAMERAS, source_episodes, source_frames

TOP = CAMERAS[0]


@pytest.fixture(scope="module")
def source(sample_source) -> LeRobotSource:
    return LeRobotSource(sample_source)


def _packets(data: bytes) -> list[tuple[int, bool, bytes]]:
    with av.open(io.BytesIO(data)) as container:
        return [(p.pts, p.is_keyframe, bytes(p)) for p in container.demux(video=0) if p.size]


def _source_packets(location: VideoLocation) -> list[bytes]:
    """The packets of the window, found the slow way: a full demux of the file."""
    with av.open(str(location.path)) as container:
        stream = container.streams.video[0]
        return [
            bytes(p)
            for p in container.demux(stream)
            if p.size and location.from_timestamp - 5e-4 <= float(p.pts * stream.time_base) < location.to_timestamp - 5e-4
        ]


def test_cut_is_lossless_and_starts_at_pts_zero_on_a_keyframe(source):
    for episode in source.episode_indices:
        length = source.episodes[episode].length
        for key in CAMERAS:
            location = source.video_location(episode, key)
            video, found = cut_episode(location)
            assert found == length == video.frames
            packets = _packets(video.data)
            assert packets[0][0] == 0 and packets[0][1], "first frame: pts 0 and a keyframe"
            assert [p[2] for p in packets] == _source_packets(location), "stream copy must keep every byte"
            assert video.source_bytes == sum(len(p[2]) for p in packets) and not video.reencoded


def test_one_pass_over_a_file_equals_independent_cuts_in_any_order(source):
    # Episodes of one camera file, visited forward (the pass), then backward (re-seeks).
    by_file: dict = {}
    for episode in source.episode_indices:
        by_file.setdefault(source.video_location(episode, TOP).path, []).append(episode)
    path, episodes = max(by_file.items(), key=lambda item: len(item[1]))
    assert len(episodes) >= 3, "the fixture must hold several episodes per video file"
    alone = {e: cut_episode(source.video_location(e, TOP))[0].data for e in episodes}
    reader = SourceVideoReader(path)
    try:
        for episode in episodes + episodes[::-1] + episodes[::2]:
            assert cut_episode(source.video_location(episode, TOP), reader)[0].data == alone[episode]
    finally:
        reader.close()


def test_a_window_that_does_not_start_on_a_keyframe_is_cut_from_the_keyframe_before(source):
    """The member starts at the keyframe before the window: one pre-roll frame, then the 30
    frames of the window exactly (decoded, never re-encoded)."""
    location = source.video_location(2, TOP)  # 30 frames, keyframes every 2 frames
    shifted = VideoLocation(location.path, location.from_timestamp + 1 / 30, location.to_timestamp + 1 / 30)
    video, found = cut_episode(shifted)
    assert video is not None and found == 30 and video.preroll == 1 and video.frames == 30 and not video.reencoded
    frames = VideoDecoder(video.data).get_frames_at(indices=list(range(31))).data
    assert [read_identity(f.numpy()) for f in frames] == [(2, j) for j in range(30)] + [(3, 0)]


def test_reencode_decodes_from_the_episodes_keyframe_and_matches_lerobot(sample_source, source):
    episodes = source_episodes(sample_source)
    settings = EncodeSettings(codec="h264")
    decoder = SourceFrameDecoder(source.video_location(7, TOP).path)
    try:
        # Episodes 6 and 7 share a file: the second continues the first's decode pass.
        for episode in (6, 7, 6):
            location = source.video_location(episode, TOP)
            video, found = reencode_episode(location, 30, settings, decoder)
            frames = VideoDecoder(video.data).get_frames_at(indices=list(range(found))).data
            assert [read_identity(f.numpy()) for f in frames] == [(episode, j) for j in range(found)]
            assert found == episodes[episode]["length"] == video.frames
            assert video.source_bytes == sum(len(p) for p in _source_packets(location))
            expected = source_frames(sample_source, episodes[episode], TOP)
            mse = ((frames.double() - expected.double()) ** 2).mean().item()
            assert 10 * math.log10(255**2 / mse) >= 35.0
    finally:
        decoder.close()


def test_the_decoder_seeks_to_a_keyframe_instead_of_decoding_the_whole_file(source, monkeypatch):
    location = source.video_location(7, TOP)  # 40 frames starting 0.3 s into its file
    decoded = []
    original = av.Packet.decode

    def counting_decode(packet):
        frames = original(packet)
        decoded.extend(frames)
        return frames

    monkeypatch.setattr(av.Packet, "decode", counting_decode)
    decoder = SourceFrameDecoder(location.path)
    try:
        frames = list(decoder.window(location.from_timestamp, location.to_timestamp))
    finally:
        decoder.close()
    assert len(frames) == 40
    assert 40 <= len(decoded) <= 40 + 2, f"decoded {len(decoded)} frames for a 40-frame window (GOP 2)"


def test_a_non_keyframe_start_is_decoded_from_the_keyframe_before(source):
    location = source.video_location(2, TOP)
    shifted = VideoLocation(location.path, location.from_timestamp + 1 / 30, location.to_timestamp + 1 / 30)
    video, found = reencode_episode(shifted, 30, EncodeSettings(codec="hevc"))
    frames = VideoDecoder(video.data).get_frames_at(indices=list(range(found))).data
    # Row j of the shifted episode is source frame j + 1 of episode 2; its last row is the
    # first frame of episode 3, which follows in the same file.
    assert [read_identity(f.numpy()) for f in frames] == [(2, j + 1) for j in range(29)] + [(3, 0)]


def test_trimming_keeps_the_first_frames(source):
    location = source.video_location(2, TOP)
    cut, found = cut_episode(location, max_frames=7)
    assert (found, cut.frames) == (30, 7)
    encoded, found = reencode_episode(location, 30, EncodeSettings(codec="h264"), max_frames=7)
    assert (found, encoded.frames, encoded.found) == (30, 7, 30)
    for data in (cut.data, encoded.data):
        frames = VideoDecoder(data).get_frames_at(indices=list(range(7))).data
        assert VideoDecoder(data).metadata.num_frames == 7
        assert [read_identity(f.numpy()) for f in frames] == [(2, j) for j in range(7)]


def test_an_empty_window_gives_no_member(source):
    location = source.video_location(2, TOP)
    empty = VideoLocation(location.path, 100.0, 101.0)
    assert cut_episode(empty) == (None, 0)
    assert reencode_episode(empty, 30, EncodeSettings(codec="h264")) == (None, 0)


def test_a_file_that_is_not_a_video_is_named(tmp_path):
    path = tmp_path / "broken.mp4"
    path.write_bytes(b"\x00" * 4096)
    for opener in (SourceVideoReader, SourceFrameDecoder):
        with pytest.raises(VideoCutError, match=r"broken.mp4: cannot open video"):
            opener(path)


def test_hevc_members_are_tagged_hvc1_with_closed_gops(source):
    video, _ = reencode_episode(source.video_location(7, TOP), 30, EncodeSettings(codec="hevc", gop=4))
    with av.open(io.BytesIO(video.data)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.codec_tag == "hvc1" and stream.codec_context.pix_fmt == "yuv420p"
        packets = [p for p in container.demux(stream) if p.size]
    assert [p.is_keyframe for p in packets] == [j % 4 == 0 for j in range(40)]
    assert [p.pts for p in packets] == sorted(p.pts for p in packets), "no B-frames: decode order is display order"
    assert torch.tensor([p.dts for p in packets]).diff().min() > 0


def _bframe_file(tmp_path, episodes: int = 3, length: int = 13):
    """A LeRobot-style concatenated h264 file with B-frames (each episode encoded on its own,
    long GOP, 3 B-frames, then joined by stream copy) and each episode's window."""
    import numpy as np

    from lerobot_shards.testing import concatenate_by_stream_copy, encode_episode_video, identity_frame

    parts, windows, start = [], [], 0.0
    for episode in range(episodes):
        frames = np.stack([identity_frame(episode, j, 64, 96) for j in range(length + episode)])
        path = tmp_path / f"ep{episode}.mp4"
        encode_episode_video(frames, path, 30, crf=23, gop=30, preset=0, codec="h264", bframes=3)
        parts.append(path)
        windows.append((start, start + len(frames) / 30))
        start += len(frames) / 30
    out = tmp_path / "file.mp4"
    concatenate_by_stream_copy(parts, out)
    return out, windows


def test_copy_cuts_b_frame_sources_in_decode_order(tmp_path):
    """Finding 4 of issue 40: a source with B-frames was muxed in presentation order (EINVAL
    from the muxer). Each window is one decode run: it is cut losslessly, muxed in decode
    order with its first frame at pts 0, and decodes to exactly the source's frames."""
    path, windows = _bframe_file(tmp_path)
    with av.open(str(path)) as container:
        reordered = any(p.pts != p.dts for p in container.demux(video=0) if p.size and p.dts is not None)
    assert reordered, "the fixture must hold B-frames"
    reader = SourceVideoReader(path)
    try:
        for episode, (start, stop) in enumerate(windows):
            location = VideoLocation(path, start, stop)
            video, found = cut_episode(location, reader)
            assert video is not None and not video.reencoded and video.frames == found == 13 + episode
            assert sorted(p for _, _, p in _packets(video.data)) == sorted(_source_packets(location))
            decoded = VideoDecoder(video.data, seek_mode="exact")
            assert decoded.metadata.num_frames == found
            identities = [read_identity(decoded[j].permute(1, 2, 0).numpy()) for j in range(found)]
            assert identities == [(episode, j) for j in range(found)]
            with av.open(io.BytesIO(video.data)) as container:
                assert next(container.decode(video=0)).pts == 0
    finally:
        reader.close()


def test_a_b_frame_window_that_is_not_one_decode_run_is_reencoded(tmp_path):
    """A window whose frames need a packet outside it (a B-frame referring to a later P-frame
    past the window's end) is not cut: the caller re-encodes it."""
    path, windows = _bframe_file(tmp_path, episodes=1, length=13)
    start, stop = windows[0]
    with av.open(str(path)) as container:
        packets = sorted((p for p in container.demux(video=0) if p.size), key=lambda p: p.dts)
        decode_pts = [p.pts for p in packets]
    # Cut where a later frame was decoded before an earlier one (mid mini-GOP).
    cut = next(i for i in range(1, len(decode_pts)) if decode_pts[i] < decode_pts[i - 1])
    with av.open(str(path)) as container:
        seconds = float(sorted(decode_pts)[cut] * container.streams.video[0].time_base)
    video, found = cut_episode(VideoLocation(path, start, seconds))
    assert video is None and found > 0


@pytest.mark.parametrize("height,width", [(64, 48), (48, 40), (48, 48), (32, 128), (48, 160)])
def test_hevc_reencodes_small_frames_without_corrupting_x265s_heap(height, width, tmp_path):
    """x265 aborted (glibc: free(): invalid next size) or wrote heap-dependent bytes on these
    sizes with the previous CTU rule and its cu-tree: each is encoded in a child process (an
    abort would end the test run) and must exit 0, twice with the same bytes."""
    import subprocess
    import sys

    script = (
        "import av, sys; from lerobot_shards.testing import identity_frame; from lerobot_shards.packer.shard import EncodeSettings, encode_frames\n"
        f"frames = [av.VideoFrame.from_ndarray(identity_frame(0, j, {height}, {width}), format='rgb24') for j in range(9)]\n"
        "video = encode_frames(iter(frames), 30, EncodeSettings('hevc'))\n"
        "sys.stdout.buffer.write(video.data)\n"
    )
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr.decode()[-500:]
    assert runs[0].stdout == runs[1].stdout
    decoded = VideoDecoder(runs[0].stdout, seek_mode="exact")
    assert (decoded.metadata.num_frames, decoded.metadata.height, decoded.metadata.width) == (9, height, width)
