"""What an H.264 or HEVC sequence parameter set says about a member's pictures' colour.

FFmpeg's decoders (and so torchcodec, PyAV and LeRobot) convert a frame to RGB with the
matrix and range the stream signals in its SPS's VUI (``video_signal_type``): a GPU path that
converts NVDEC's raw YUV itself must use the same ones (``lerobot_shards.reader.decode.colour``). This module
reads the SPS up to those fields: every syntax element before them is parsed (scaling lists,
HEVC's short-term reference picture sets, ...) because the VUI has no fixed position.

Pure: bytes in, numbers out. The bytes are untrusted: every read is bounded by the NAL
unit, every loop by the limits of the standards (H.264 7.4.2.1.1, HEVC 7.4.3.2.1), and a
violation raises ``FormatError``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lerobot_shards.core.errors import FormatError

# H.264 profiles whose SPS carries chroma format, bit depths and scaling matrices, as FFmpeg's
# h264_ps.c reads them (the CPU path this parser must agree with): the standard's list
# (7.3.2.1.1) less 139, 134 and 135, plus the old High 4:4:4 profile 144.
_H264_HIGH_PROFILES = frozenset({100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 144})
# Profiles the standard and FFmpeg read differently: which bits are the colour signalling is then
# a matter of which decoder reads it, so neither reading is claimed (NVDEC's own conversion).
_H264_DISPUTED_PROFILES = frozenset({139, 134, 135, 144})
_MAX_POC_CYCLE = 255  # num_ref_frames_in_pic_order_cnt_cycle
_MAX_RPS = 64  # num_short_term_ref_pic_sets
_MAX_RPS_PICS = 16  # num_negative_pics / num_positive_pics
_MAX_LONG_TERM = 32  # num_long_term_ref_pics_sps
_MAX_SUB_LAYERS = 7


@dataclass(frozen=True)
class SignalType:
    """The SPS's picture format and colour signalling.

    Attributes:
        chroma_format: 0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4.
        bit_depth: luma bits per sample.
        matrix: ``matrix_coefficients`` when the VUI describes colour, else None.
        full_range: ``video_full_range_flag`` when the VUI signals a video type, else None.
    """

    chroma_format: int
    bit_depth: int
    matrix: int | None
    full_range: bool | None


class _Bits:
    """An RBSP bit reader (emulation prevention bytes removed) that refuses to run past it."""

    def __init__(self, rbsp: bytes, where: str):
        self.data, self.pos, self.where = rbsp, 0, where

    def u(self, bits: int) -> int:
        if self.pos + bits > 8 * len(self.data):
            raise FormatError(f"{self.where}: the sequence parameter set ends inside a field")
        value = 0
        for _ in range(bits):
            value = (value << 1) | ((self.data[self.pos >> 3] >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return value

    def flag(self) -> bool:
        return bool(self.u(1))

    def ue(self, limit: int = (1 << 32) - 2) -> int:
        zeros = 0
        while self.u(1) == 0:
            zeros += 1
            if zeros > 31:
                raise FormatError(f"{self.where}: an Exp-Golomb code of more than 32 bits in the sequence parameter set")
        value = (1 << zeros) - 1 + self.u(zeros)
        if value > limit:
            raise FormatError(f"{self.where}: a sequence parameter set field of {value:,}; at most {limit:,} is allowed")
        return value

    def se(self) -> int:
        code = self.ue()
        return (code + 1) // 2 if code & 1 else -(code // 2)

    def skip(self, bits: int) -> None:
        if self.pos + bits > 8 * len(self.data):
            raise FormatError(f"{self.where}: the sequence parameter set ends inside a field")
        self.pos += bits


def rbsp(nal: bytes) -> bytes:
    """A NAL unit's payload with emulation prevention bytes (``00 00 03``) removed."""
    out = bytearray()
    zeros = 0
    for byte in nal:
        if zeros >= 2 and byte == 3:
            zeros = 0
            continue
        out.append(byte)
        zeros = zeros + 1 if byte == 0 else 0
    return bytes(out)


def _vui_signal(bits: _Bits) -> tuple[int | None, bool | None]:
    """The VUI's leading fields up to the colour description (same in H.264 and HEVC)."""
    if bits.flag():  # aspect_ratio_info_present_flag
        if bits.u(8) == 255:  # Extended_SAR
            bits.skip(32)
    if bits.flag():  # overscan_info_present_flag
        bits.skip(1)
    if not bits.flag():  # video_signal_type_present_flag
        return None, None
    bits.skip(3)  # video_format
    full_range = bits.flag()
    matrix = None
    if bits.flag():  # colour_description_present_flag
        bits.skip(16)  # colour_primaries, transfer_characteristics
        matrix = bits.u(8)
    return matrix, full_range


def _h264_scaling_list(bits: _Bits, size: int) -> None:
    last = following = 8
    for _ in range(size):
        if following != 0:
            delta = bits.se()
            if not -128 <= delta <= 127:
                raise FormatError(f"{bits.where}: a scaling list delta of {delta} (H.264 allows -128..127)")
            following = (last + delta + 256) % 256
        last = following or last


def h264_signal(nal: bytes, *, where: str) -> SignalType:
    """Parse an H.264 SPS NAL unit (header byte included).

    Raises:
        FormatError: not an SPS, or a field that runs past it or breaks the standard's limits.
    """
    if not nal or nal[0] & 0x1F != 7:
        raise FormatError(f"{where}: not an H.264 sequence parameter set")
    bits = _Bits(rbsp(nal[1:]), where)
    profile = bits.u(8)
    if profile in _H264_DISPUTED_PROFILES:
        raise FormatError(
            f"{where}: H.264 profile {profile}, whose sequence parameter set the standard and FFmpeg read "
            "differently; its colour signalling is not claimed"
        )
    bits.skip(16)  # constraint flags, level_idc
    bits.ue(31)  # seq_parameter_set_id
    chroma_format, bit_depth = 1, 8
    if profile in _H264_HIGH_PROFILES:
        chroma_format = bits.ue(3)
        if chroma_format == 3:
            bits.skip(1)  # separate_colour_plane_flag
        bit_depth = bits.ue(6) + 8
        bits.ue(6)  # bit_depth_chroma_minus8
        bits.skip(1)  # qpprime_y_zero_transform_bypass_flag
        if bits.flag():  # seq_scaling_matrix_present_flag
            for i in range(8 if chroma_format != 3 else 12):
                if bits.flag():
                    _h264_scaling_list(bits, 16 if i < 6 else 64)
    bits.ue(12)  # log2_max_frame_num_minus4
    poc_type = bits.ue(2)
    if poc_type == 0:
        bits.ue(12)  # log2_max_pic_order_cnt_lsb_minus4
    elif poc_type == 1:
        bits.skip(1)  # delta_pic_order_always_zero_flag
        bits.se()
        bits.se()
        for _ in range(bits.ue(_MAX_POC_CYCLE)):
            bits.se()
    bits.ue()  # max_num_ref_frames
    bits.skip(1)  # gaps_in_frame_num_value_allowed_flag
    bits.ue()  # pic_width_in_mbs_minus1
    bits.ue()  # pic_height_in_map_units_minus1
    if not bits.flag():  # frame_mbs_only_flag
        bits.skip(1)  # mb_adaptive_frame_field_flag
    bits.skip(1)  # direct_8x8_inference_flag
    if bits.flag():  # frame_cropping_flag
        for _ in range(4):
            bits.ue()
    matrix, full_range = _vui_signal(bits) if bits.flag() else (None, None)
    return SignalType(chroma_format=chroma_format, bit_depth=bit_depth, matrix=matrix, full_range=full_range)


def _hevc_profile_tier_level(bits: _Bits, sub_layers: int) -> None:
    bits.skip(88 + 8)  # general profile space ... general_level_idc
    present = [(bits.flag(), bits.flag()) for _ in range(sub_layers)]
    if sub_layers > 0:
        bits.skip(2 * (8 - sub_layers))  # reserved_zero_2bits
    for profile, level in present:
        if profile:
            bits.skip(88)
        if level:
            bits.skip(8)


def _hevc_scaling_list_data(bits: _Bits) -> None:
    for size_id in range(4):
        for _ in range(0, 6, 3 if size_id == 3 else 1):
            if not bits.flag():  # scaling_list_pred_mode_flag
                bits.ue(5)  # scaling_list_pred_matrix_id_delta
                continue
            coefficients = min(64, 1 << (4 + (size_id << 1)))
            if size_id > 1:
                bits.se()  # scaling_list_dc_coef_minus8
            for _ in range(coefficients):
                bits.se()  # scaling_list_delta_coef


def _hevc_short_term_rps(bits: _Bits, index: int, sets: list[tuple[list[int], list[int]]]) -> tuple[list[int], list[int]]:
    """One ``st_ref_pic_set(index)`` of an SPS: ``(negative deltas, positive deltas)``, which
    a later set may predict from (HEVC 7.3.7, 7.4.8)."""
    if index != 0 and bits.flag():  # inter_ref_pic_set_prediction_flag
        s0, s1 = sets[index - 1]  # in an SPS the reference is always the previous set
        sign = bits.u(1)
        delta_rps = (1 - 2 * sign) * (bits.ue((1 << 15) - 1) + 1)
        used = []
        for _ in range(len(s0) + len(s1) + 1):
            used_by_curr = bits.flag()
            used.append(used_by_curr or bits.flag())  # use_delta_flag, inferred 1 when used
        negative, positive = [], []
        for j in range(len(s1) - 1, -1, -1):
            poc = s1[j] + delta_rps
            if poc < 0 and used[len(s0) + j]:
                negative.append(poc)
        if delta_rps < 0 and used[len(s0) + len(s1)]:
            negative.append(delta_rps)
        for j in range(len(s0)):
            poc = s0[j] + delta_rps
            if poc < 0 and used[j]:
                negative.append(poc)
        for j in range(len(s0) - 1, -1, -1):
            poc = s0[j] + delta_rps
            if poc > 0 and used[j]:
                positive.append(poc)
        if delta_rps > 0 and used[len(s0) + len(s1)]:
            positive.append(delta_rps)
        for j in range(len(s1)):
            poc = s1[j] + delta_rps
            if poc > 0 and used[len(s0) + j]:
                positive.append(poc)
        if len(negative) > _MAX_RPS_PICS or len(positive) > _MAX_RPS_PICS:
            raise FormatError(f"{bits.where}: a reference picture set of more than {_MAX_RPS_PICS} pictures a side")
        return negative, positive
    counts = bits.ue(_MAX_RPS_PICS), bits.ue(_MAX_RPS_PICS)
    sides: list[list[int]] = []
    for count, sign in zip(counts, (-1, 1)):
        deltas, poc = [], 0
        for _ in range(count):
            poc += sign * (bits.ue((1 << 15) - 1) + 1)
            bits.skip(1)  # used_by_curr_pic_flag
            deltas.append(poc)
        sides.append(deltas)
    return sides[0], sides[1]


def hevc_signal(nal: bytes, *, where: str) -> SignalType:
    """Parse an HEVC SPS NAL unit (two header bytes included).

    Raises:
        FormatError: not an SPS, or a field that runs past it or breaks the standard's limits.
    """
    if len(nal) < 2 or (nal[0] >> 1) & 0x3F != 33:
        raise FormatError(f"{where}: not an HEVC sequence parameter set")
    bits = _Bits(rbsp(nal[2:]), where)
    bits.skip(4)  # sps_video_parameter_set_id
    sub_layers = bits.u(3)
    if sub_layers >= _MAX_SUB_LAYERS:
        raise FormatError(f"{where}: sps_max_sub_layers_minus1 {sub_layers} (at most {_MAX_SUB_LAYERS - 1})")
    bits.skip(1)  # sps_temporal_id_nesting_flag
    _hevc_profile_tier_level(bits, sub_layers)
    bits.ue(15)  # sps_seq_parameter_set_id
    chroma_format = bits.ue(3)
    if chroma_format == 3:
        bits.skip(1)  # separate_colour_plane_flag
    bits.ue()  # pic_width_in_luma_samples
    bits.ue()  # pic_height_in_luma_samples
    if bits.flag():  # conformance_window_flag
        for _ in range(4):
            bits.ue()
    bit_depth = bits.ue(8) + 8
    bits.ue(8)  # bit_depth_chroma_minus8
    poc_lsb_bits = bits.ue(12) + 4
    ordering_all = bits.flag()  # sps_sub_layer_ordering_info_present_flag
    for _ in range(0 if ordering_all else sub_layers, sub_layers + 1):
        bits.ue()
        bits.ue()
        bits.ue()
    for _ in range(6):  # coding block, transform block sizes and hierarchy depths
        bits.ue(31)
    if bits.flag() and bits.flag():  # scaling_list_enabled_flag, sps_scaling_list_data_present_flag
        _hevc_scaling_list_data(bits)
    bits.skip(2)  # amp_enabled_flag, sample_adaptive_offset_enabled_flag
    if bits.flag():  # pcm_enabled_flag
        bits.skip(8)
        bits.ue(31)
        bits.ue(31)
        bits.skip(1)
    sets: list[tuple[list[int], list[int]]] = []
    for index in range(bits.ue(_MAX_RPS)):
        sets.append(_hevc_short_term_rps(bits, index, sets))
    if bits.flag():  # long_term_ref_pics_present_flag
        for _ in range(bits.ue(_MAX_LONG_TERM)):
            bits.skip(poc_lsb_bits + 1)
    bits.skip(2)  # sps_temporal_mvp_enabled_flag, strong_intra_smoothing_enabled_flag
    matrix, full_range = _vui_signal(bits) if bits.flag() else (None, None)
    return SignalType(chroma_format=chroma_format, bit_depth=bit_depth, matrix=matrix, full_range=full_range)


def signal_type(codec: str, nal: bytes, *, where: str) -> SignalType:
    """``h264_signal`` or ``hevc_signal`` by codec name."""
    return h264_signal(nal, where=where) if codec == "h264" else hevc_signal(nal, where=where)
