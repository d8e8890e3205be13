"""GPU frames are the CPU path's bytes: NVDEC's NV12 converted with FFmpeg's arithmetic
(``lerobot_shards.reader.decode.colour``), the matrix and range read from the stream as FFmpeg reads them
(``lerobot_shards.reader.decode.sps``). Checked here without a GPU: HEVC/H.264 decoding is bit-exact by the
standards, so FFmpeg's own decoded YUV stands in for NVDEC's; the references are torchcodec
(LeRobot's decoder) and PyAV converting the same frames."""

import io

import av
import numpy as np
import pytest
import torch

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import check_mp4
from lerobot_shards.reader.decode import (
    ColourSpec,
    SignalType,
    colr_signal,
    elementary_stream,
    h264_signal,
    hevc_signal,
    nv12_to_rgb,
    rbsp,
    resolve,
    signal_type,
    stream_config,
    yuv420p_to_nv12,
)

SPECS = [
    ColourSpec(2, False),
    ColourSpec(1, False),
    ColourSpec(5, True),
    ColourSpec(1, True),
    ColourSpec(6, False),
    ColourSpec(2, True),
]


def _frame(planes, height, width):
    frame = av.VideoFrame(width, height, "yuv420p")
    for plane, values in zip(frame.planes, planes):
        assert plane.line_size == values.shape[1]
        plane.update(np.ascontiguousarray(values))
    return frame


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"matrix{s.matrix}-{'full' if s.full_range else 'limited'}")
def test_every_yuv_value_converts_as_ffmpeg_does(spec):
    """Every (U, V) pair, every Y value: swscale's result bit for bit."""
    rng = np.random.default_rng(spec.matrix)
    luma = rng.integers(0, 256, (512, 512), dtype=np.uint8)
    luma[0, :256] = np.arange(256)
    u = np.tile(np.arange(256, dtype=np.uint8), (256, 1))
    v = np.ascontiguousarray(u.T)
    frame = _frame((luma, u, v), 512, 512)
    frame.colorspace, frame.color_range = spec.matrix, 2 if spec.full_range else 1
    expected = torch.from_numpy(frame.to_ndarray(format="rgb24")).permute(2, 0, 1)
    got = nv12_to_rgb(yuv420p_to_nv12((luma, u, v), 512, 512)[None], spec)[0]
    assert torch.equal(got, expected)


def _encode(codec: str, params: str, pix_fmt: str = "yuv420p", frames: int = 6, height: int = 48, width: int = 64) -> bytes:
    """A short mp4 of noise (every colour value), encoded with the VUI the params ask for."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("libx264" if codec == "h264" else "libx265", rate=10)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.options = {
            "x264-params" if codec == "h264" else "x265-params": params + (":log-level=error" if codec == "hevc" else ""),
            "crf": "10",
        }
        rng = np.random.default_rng(0)
        for _ in range(frames):
            image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format=pix_fmt)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def _member_spec(data: bytes):
    layout = check_mp4(data, where="m")
    config = stream_config(layout.codec, layout.codec_config, where="m")
    signal = signal_type(layout.codec, config.sequence_parameter_sets[0], where="m")
    return layout, config, signal, resolve(signal, layout.colour_boxes, layout.height, layout.width)


CLIPS = [
    ("h264", "", "yuv420p", SignalType(1, 8, None, None)),
    ("h264", "colormatrix=bt709:range=tv", "yuv420p", SignalType(1, 8, 1, False)),
    ("h264", "colormatrix=bt470bg:cqm=jvt", "yuvj420p", SignalType(1, 8, 5, True)),  # scaling matrices before the VUI
    ("hevc", "bframes=0", "yuv420p", SignalType(1, 8, None, False)),
    ("hevc", "colormatrix=bt709:range=full:bframes=3:ref=4:b-pyramid=1", "yuv420p", SignalType(1, 8, 1, True)),  # predicted RPS
    ("hevc", "colormatrix=smpte170m:scaling-list=default:keyint=4", "yuv420p", SignalType(1, 8, 6, False)),
]


@pytest.mark.parametrize("codec,params,pix_fmt,signal", CLIPS, ids=[f"{c[0]}-{c[1] or 'plain'}" for c in CLIPS])
def test_stream_colour_is_read_as_ffmpeg_reads_it_and_frames_match_the_cpu_path(codec, params, pix_fmt, signal):
    from torchcodec.decoders import VideoDecoder

    data = _encode(codec, params, pix_fmt)
    layout, config, parsed, (spec, why) = _member_spec(data)
    assert parsed == signal
    assert spec is not None, why
    reference = VideoDecoder(data, seek_mode="exact").get_frames_at(list(range(layout.samples))).data
    with av.open(io.BytesIO(data)) as container:
        decoded = list(container.decode(video=0))
    assert (decoded[0].colorspace, decoded[0].color_range) == (
        spec.matrix if parsed.matrix is not None else 2,
        2 if spec.full_range else (1 if parsed.full_range is not None else 0),
    )
    nv12 = torch.stack(
        [
            yuv420p_to_nv12(
                [
                    np.frombuffer(p, np.uint8).reshape(-1, p.line_size)[:, : (64 if i == 0 else 32)]
                    for i, p in enumerate(f.planes)
                ],
                48,
                64,
            )
            for f in decoded
        ]
    )
    got = nv12_to_rgb(nv12, spec)
    assert torch.equal(got, reference)
    assert torch.equal(got, torch.stack([torch.from_numpy(f.to_ndarray(format="rgb24")).permute(2, 0, 1) for f in decoded]))
    assert not elementary_stream(data, layout, config, where="m").foreign_sps


def test_colour_that_cannot_be_matched_exactly_gives_no_spec():
    plain = SignalType(1, 8, None, None)
    assert resolve(plain, (), 48, 64) == (ColourSpec(2, False), "")
    assert resolve(SignalType(1, 8, 9, False), (), 48, 64)[0] is None  # BT.2020: not checked against both FFmpegs
    assert resolve(SignalType(1, 10, 1, False), (), 48, 64)[0] is None  # 10-bit
    assert resolve(SignalType(3, 8, 1, False), (), 48, 64)[0] is None  # 4:4:4
    assert resolve(SignalType(1, 8, 1, False), (), 48, 63)[0] is None  # odd width
    bt709_box = b"nclx" + bytes([0, 1, 0, 1, 0, 1, 0x00])
    full_box = b"nclx" + bytes([0, 1, 0, 1, 0, 6, 0x80])
    assert (
        colr_signal(bt709_box) == (1, False) and colr_signal(full_box) == (6, True) and colr_signal(b"prof....") == (None, None)
    )
    # The stream is silent and the box would change the result: FFmpeg versions differ there.
    assert resolve(plain, (bt709_box,), 48, 64)[0] is None
    assert resolve(plain, (full_box,), 48, 64)[0] is None
    # The stream speaks: the box does not matter (FFmpeg's decoders let the VUI win).
    assert resolve(SignalType(1, 8, 1, True), (full_box, bt709_box), 48, 64) == (ColourSpec(1, True), "")
    assert resolve(plain, (full_box, bt709_box), 48, 64)[0] is None


def test_an_sps_inside_the_samples_that_differs_is_noticed():
    data = _encode("hevc", "repeat-headers=1:colormatrix=bt709")
    layout, config, _, _ = _member_spec(data)
    assert not elementary_stream(data, layout, config, where="m").foreign_sps  # repeated, identical
    other = stream_config(
        *(lambda lay: (lay.codec, lay.codec_config))(check_mp4(_encode("hevc", "colormatrix=bt470bg"), where="o")), where="o"
    )
    assert elementary_stream(data, layout, other, where="m").foreign_sps


def test_hostile_parameter_sets_are_refused_not_followed():
    data = _encode("h264", "colormatrix=bt709")
    _, config, _, _ = _member_spec(data)
    sps = config.sequence_parameter_sets[0]
    for cut in range(1, len(sps)):
        try:
            h264_signal(sps[:cut], where="m")
        except FormatError as err:
            assert "m:" in str(err)
    with pytest.raises(FormatError, match="not an H.264 sequence parameter set"):
        h264_signal(b"\x68\x00", where="m")
    with pytest.raises(FormatError, match="not an HEVC sequence parameter set"):
        hevc_signal(sps, where="m")
    with pytest.raises(FormatError, match="Exp-Golomb code of more than 32 bits"):
        h264_signal(bytes([0x67, 100, 0, 30]) + b"\x00\x00\x00\x00\x00\x01", where="m")
    # 200 short-term reference picture sets: more than HEVC allows (64).
    hevc = bytes([0x42, 0x01]) + bytes([0x01]) + bytes(12) + bytes([0b10100000 | 0, 0xFF])
    with pytest.raises(FormatError):
        hevc_signal(hevc, where="m")


def test_emulation_prevention_bytes_are_removed():
    assert rbsp(b"\x00\x00\x03\x01\x00\x00\x03\x00\x00\x00\x03") == b"\x00\x00\x01\x00\x00\x00\x00\x00"


class _BitWriter:
    def __init__(self):
        self.bits: list[int] = []

    def u(self, value: int, count: int) -> "_BitWriter":
        self.bits += [(value >> (count - 1 - i)) & 1 for i in range(count)]
        return self

    def ue(self, value: int) -> "_BitWriter":
        code = value + 1
        return self.u(0, code.bit_length() - 1).u(code, code.bit_length())

    def nal(self, header: bytes) -> bytes:
        bits = self.bits + [1] + [0] * (-(len(self.bits) + 1) % 8)  # rbsp trailing bits
        payload = bytes(int("".join(map(str, bits[i : i + 8])), 2) for i in range(0, len(bits), 8))
        out, zeros = bytearray(), 0
        for byte in payload:  # emulation prevention
            if zeros >= 2 and byte <= 3:
                out.append(3)
                zeros = 0
            out.append(byte)
            zeros = zeros + 1 if byte == 0 else 0
        return header + bytes(out)


def test_hevc_reference_picture_sets_predicted_from_each_other_are_walked_to_the_vui():
    """x265 keeps its reference picture sets in slice headers; other encoders put them in the
    SPS, predicted from each other. An SPS written field by field from the standard's syntax
    (HEVC 7.3.2.2, 7.3.7): four sets, three predicted, whose sizes (3, 3, 2 pictures; derived
    by hand from 7.4.8) decide how many flags the next one has; then long-term pictures and a
    VUI. A wrong count anywhere shifts every later field and the matrix read at the end."""
    w = _BitWriter().u(0, 4).u(0, 3).u(1, 1).u(0, 96)  # vps id, one sub-layer, nesting, profile_tier_level
    w.ue(0).ue(1).ue(64).ue(48).u(0, 1).ue(0).ue(0).ue(4)  # sps id, 4:2:0, size, no window, 8-bit, poc lsb 8 bits
    w.u(1, 1).ue(4).ue(2).ue(0)  # sub-layer ordering
    for value in (0, 3, 0, 3, 2, 2):
        w.ue(value)
    w.u(0, 1).u(1, 1).u(1, 1).u(0, 1)  # no scaling lists, amp, sao, no pcm
    w.ue(4)
    w.ue(2).ue(1).ue(0).u(1, 1).ue(1).u(1, 1).ue(0).u(1, 1)  # set 0: S0 = [-1, -3], S1 = [1]
    w.u(1, 1).u(1, 1).ue(0).u(1, 1).u(1, 1).u(1, 1).u(1, 1)  # set 1 from 0, deltaRps -1, 4 flags: S0 = [-1, -2, -4]
    w.u(1, 1).u(0, 1).ue(1).u(1, 1).u(0, 1).u(1, 1).u(0, 1).u(0, 1).u(1, 1)  # set 2 from 1, deltaRps +2, 4 entries: S1 = [1, 2]
    w.u(1, 1).u(1, 1).ue(0).u(1, 1).u(1, 1).u(1, 1)  # set 3 from 2: exactly 3 flags
    w.u(1, 1).ue(2).u(5, 8).u(1, 1).u(9, 8).u(0, 1)  # two long-term pictures
    w.u(1, 1).u(1, 1)  # temporal mvp, strong intra smoothing
    w.u(1, 1).u(1, 1).u(255, 8).u(4, 16).u(3, 16).u(1, 1).u(0, 1)  # VUI: extended SAR, overscan
    w.u(1, 1).u(5, 3).u(1, 1).u(1, 1).u(1, 8).u(1, 8).u(1, 8)  # video signal: full range, BT.709
    w.u(0, 40)  # the rest of the VUI, unread
    assert hevc_signal(w.nal(b"\x42\x01"), where="m") == SignalType(1, 8, 1, True)


def test_conversion_in_chunks_gives_the_same_bytes(monkeypatch):
    """Large batches convert a few frames at a time (bounded temporaries): the same output."""
    from lerobot_shards.reader.decode import colour

    rng = np.random.default_rng(7)
    nv12 = torch.from_numpy(rng.integers(0, 256, (5, 72, 64), dtype=np.uint8))
    whole = nv12_to_rgb(nv12, ColourSpec(1, False))
    monkeypatch.setattr(colour, "_CHUNK_PIXELS", 2 * 48 * 64)  # two frames a chunk
    assert torch.equal(nv12_to_rgb(nv12, ColourSpec(1, False)), whole)


@pytest.mark.parametrize("profile", [139, 134, 135, 144])
def test_h264_profiles_ffmpeg_reads_otherwise_than_the_standard_are_not_claimed(profile):
    """Issue 41 finding 5: the parser read the high-profile fields for 139, 134 and 135 where
    FFmpeg's h264_ps.c does not (and the reverse for 144), so the two read different bits as the
    colour signalling. Those profiles are now refused by name (the GPU stage then takes NVDEC's
    own conversion and counts the member as inexact); FFmpeg's own list parses as before."""
    from lerobot_shards.reader.decode import h264_signal

    sps = _BitWriter().u(profile, 8).u(0, 16).ue(0).nal(b"\x67")
    with pytest.raises(FormatError, match=rf"H.264 profile {profile}, whose sequence parameter set the standard and FFmpeg"):
        h264_signal(sps, where="member")
    # A High-profile SPS (100) with 4:2:0 8-bit and no VUI colour parses.
    high = (
        _BitWriter()
        .u(100, 8)
        .u(0, 16)
        .ue(0)
        .ue(1)
        .ue(0)
        .ue(0)
        .u(0, 1)
        .u(0, 1)  # chroma, depths, bypass, no scaling
        .ue(0)
        .ue(0)
        .ue(4)
        .ue(1)
        .u(0, 1)
        .ue(3)
        .ue(2)
        .u(1, 1)
        .u(1, 1)
        .u(0, 1)
        .u(0, 1)
    )  # ... frame_cropping, no vui
    assert h264_signal(high.nal(b"\x67"), where="member").chroma_format == 1
