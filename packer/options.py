"""The options that shape a pack (recorded in its plan and manifest), validated in one place."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

from packer.errors import OptionsError
from reader.format import FRAME_MISMATCH_POLICIES, ROW_GROUP_TARGET_BYTES, VIDEO_MODES
from reader.plan.windows import DEFAULT_TOLERANCE_S

VideoMode = Literal["copy", "hevc", "h264"]
FrameMismatchPolicy = Literal["error", "pad", "drop-episode"]

# The Literals above and the format's tuples must name the same values.
assert get_args(VideoMode) == VIDEO_MODES and get_args(FrameMismatchPolicy) == FRAME_MISMATCH_POLICIES


@dataclass(frozen=True)
class PackOptions:
    """Options that shape the packed output (recorded in the manifest and the plan).

    Attributes:
        video: ``copy`` (stream copy of the source's video), ``hevc`` or ``h264`` (re-encode).
        gop, crf, preset, resize: re-encode settings (``resize`` is ``(height, width)``).
        shard_size_mb: target shard size; shards hold whole episodes.
        on_frame_mismatch: ``error``, ``pad`` (short video padded with its last frame) or
            ``drop-episode`` when an episode's frames and rows disagree.
        episodes: the subset packed (sorted, unique), or None for all.
        windows: ``{name: {key: [seconds, ...]}}`` precomputed in the sample index.
        tolerance_s: how far a timestamp may sit from a multiple of ``1 / fps``.
        row_group_max_bytes: the row-group size the packer aims for.

    Raises (from the constructor):
        OptionsError: a value outside its allowed set or range; the message names the value
            and what is allowed, ``error.option`` the option.
    """

    video: VideoMode = "copy"
    gop: int = 2
    crf: int | None = None
    preset: str | None = None
    resize: tuple[int, int] | None = None
    shard_size_mb: float = 512
    on_frame_mismatch: FrameMismatchPolicy = "error"
    episodes: tuple[int, ...] | None = None
    windows: dict = field(default_factory=dict)
    tolerance_s: float = DEFAULT_TOLERANCE_S
    row_group_max_bytes: int = ROW_GROUP_TARGET_BYTES

    def __post_init__(self) -> None:
        if self.video not in VIDEO_MODES:
            raise OptionsError(f"video {self.video!r} is not one of {list(VIDEO_MODES)}", option="video")
        if self.on_frame_mismatch not in FRAME_MISMATCH_POLICIES:
            raise OptionsError(
                f"on_frame_mismatch {self.on_frame_mismatch!r} is not one of {list(FRAME_MISMATCH_POLICIES)}",
                option="on_frame_mismatch",
            )
        if self.gop < 1:
            raise OptionsError(f"gop {self.gop} must be >= 1", option="gop")
        if self.crf is not None and not 0 <= self.crf <= 51:
            raise OptionsError(f"crf {self.crf} must be in 0..51", option="crf")
        if self.shard_size_mb <= 0:
            raise OptionsError(f"shard_size_mb {self.shard_size_mb} must be positive", option="shard_size_mb")
        if self.resize is not None and self.video == "copy":
            raise OptionsError(
                f"resize {tuple(self.resize)} needs a re-encode (video 'hevc' or 'h264'); copy mode keeps the source bytes",
                option="resize",
            )
        if self.resize is not None and (len(self.resize) != 2 or self.resize[0] % 2 or self.resize[1] % 2 or min(self.resize) <= 0):
            raise OptionsError(f"resize {tuple(self.resize)} needs positive even sizes (height, width) for yuv420p", option="resize")
        if self.episodes is not None and any(e < 0 for e in self.episodes):
            raise OptionsError(f"episodes {[e for e in self.episodes if e < 0][:10]} are negative", option="episodes")
        if self.row_group_max_bytes < 1:
            raise OptionsError(f"row_group_max_bytes {self.row_group_max_bytes} must be positive", option="row_group_max_bytes")

    def to_json_dict(self) -> dict:
        """The options as the plan and manifest record them (lists, not tuples)."""
        data = asdict(self)
        data["resize"] = list(self.resize) if self.resize else None
        data["episodes"] = list(self.episodes) if self.episodes is not None else None
        return data


__all__ = ["FrameMismatchPolicy", "PackOptions", "VideoMode"]
