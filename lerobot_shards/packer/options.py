"""The options of a pack, as values, each written once (name, type, default, help, flag).

``PackOptions`` shape the output and are recorded in the pack's plan and manifest;
``PackRunOptions`` say how one run reads, writes and spreads its work, and are not recorded.
``pack_dataset`` takes both whole or their fields as keywords; the ``lerobot-shards pack``
flags (and ``mixture task``'s, after ``--``) are made from the same fields
(``lerobot_shards/cli/pack.py``), so a new option is one field here.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import (
    DEFAULT_PARQUET_COMPRESSION,
    FRAME_MISMATCH_POLICIES,
    PARQUET_COMPRESSIONS,
    ROW_GROUP_TARGET_BYTES,
    VIDEO_MODES,
    ParquetProfile,
    pack_parquet,
    parquet_compression_choices,
)
from lerobot_shards.core.option_fields import check_values, describe_options, option, option_fields
from lerobot_shards.core.storage import RetryPolicy
from lerobot_shards.core.windows import DEFAULT_TOLERANCE_S
from lerobot_shards.packer.errors import OptionsError

# The choices of ``video`` and ``on_frame_mismatch`` are the format's tuples (VIDEO_MODES,
# FRAME_MISMATCH_POLICIES): one tuple per set, which the manifest's reader checks too.


def _options_error(message: str, name: str) -> OptionsError:
    return OptionsError(message, option=name)


# -- text forms of the options that have one (command-line flags) ---------------------------
def parse_episode_ranges(text: str) -> tuple[int, ...]:
    """``0,3,10-20`` (inclusive ranges) as sorted unique episode indices.

    Raises:
        OptionsError: malformed items, negative numbers, reversed ranges or no episode.
    """
    episodes: set[int] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        try:
            low_text, _, high_text = item.partition("-")
            low, high = int(low_text), int(high_text or low_text)
        except ValueError:
            raise OptionsError(f"--episodes: cannot parse {item!r}; expected e.g. 0,3,10-20", option="episodes") from None
        if low > high:
            raise OptionsError(f"--episodes: reversed episode range {item!r}", option="episodes")
        episodes.update(range(low, high + 1))
    if any(e < 0 for e in episodes):
        raise OptionsError("--episodes: episode indices must be >= 0", option="episodes")
    if not episodes:
        raise OptionsError(f"--episodes {text!r} selects no episode", option="episodes")
    return tuple(sorted(episodes))


def parse_part(text: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N), as ``--part`` takes it.

    Raises:
        OptionsError: not of the form ``I/N`` or out of range.
    """
    try:
        index_text, count_text = text.split("/")
        index, count = int(index_text), int(count_text)
    except ValueError:
        raise OptionsError(f"--part must look like I/N (e.g. 0/4), got {text!r}", option="part") from None
    if count < 1 or not 0 <= index < count:
        raise OptionsError(f"--part {text!r}: need 0 <= I < N and N >= 1", option="part")
    return index, count


# x264's and x265's presets (the same names): anything else failed only in the encoder, mid-pack.
X26X_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo")


def _size(text: str) -> tuple[int, int]:
    try:
        height, width = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise OptionsError(f"expected HxW or KEY=HxW, e.g. 224x224, got {text!r}", option="resize") from None
    return height, width


def parse_resize(items: str | tuple[str, ...]) -> tuple[int, int] | dict[str, tuple[int, int]] | None:
    """``HxW`` (``224x224``: every camera) as ``(height, width)``, or ``KEY=HxW`` items (one
    camera each; the others keep their size) as ``{key: (height, width)}``; nothing given
    (empty, ``none``) as None.

    Raises:
        OptionsError: not two integers joined by ``x``, a camera given twice, or ``HxW`` with
            anything else.
    """
    items = (items,) if isinstance(items, str) else tuple(items)
    items = tuple(i for i in items if i.strip().lower() not in ("", "none", "null"))  # a script's empty "$VAR"
    if not items:
        return None
    bare = [i for i in items if "=" not in i]
    if bare:
        if len(items) > 1:
            raise OptionsError(
                f"--resize {bare[0]} gives every camera one size; give it alone, or KEY=HxW per camera", option="resize"
            )
        return _size(bare[0])
    sizes: dict[str, tuple[int, int]] = {}
    for item in items:
        key, _, size = item.partition("=")
        if key in sizes:
            raise OptionsError(f"--resize names camera {key!r} twice", option="resize")
        sizes[key] = _size(size)
    return sizes


def _parse_windows(items: tuple[str, ...], *, option_name: str, unit: str) -> dict:
    windows = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise OptionsError(f"expected NAME=JSON, got {item!r}", option=option_name)
        try:
            window = json.loads(text)
        except json.JSONDecodeError as err:
            raise OptionsError(f"{name}: not JSON ({err})", option=option_name) from None
        if not isinstance(window, dict) or not all(isinstance(v, list) for v in window.values()):
            raise OptionsError(f"{name}: expected {{key: [{unit}, ...]}}", option=option_name)
        if unit == "frames" and not all(isinstance(o, int) and not isinstance(o, bool) for v in window.values() for o in v):
            raise OptionsError(f"{name}: frame offsets must be integers", option=option_name)
        windows[name] = window
    return windows


def parse_windows(items: tuple[str, ...]) -> dict:
    """``NAME=JSON`` items (``chunk={"action": [0, 0.02]}``) as ``{name: {key: [seconds]}}``.

    Raises:
        OptionsError: an item that is not ``NAME=`` and a JSON object of lists.
    """
    return _parse_windows(items, option_name="windows", unit="seconds")


def parse_window_frames(items: tuple[str, ...]) -> dict:
    """As ``parse_windows``, in integer frame offsets.

    Raises:
        OptionsError: as ``parse_windows``, or an offset that is not an integer.
    """
    return _parse_windows(items, option_name="window_frames", unit="frames")


def _json_object_parser(option_name: str):
    def parse_json_object(text: str) -> dict:
        """A JSON object (``--storage-options``).

        Raises:
            OptionsError: not JSON, or not an object.
        """
        try:
            value = json.loads(text)
        except json.JSONDecodeError as err:
            raise OptionsError(f"not JSON: {err}", option=option_name) from None
        if not isinstance(value, dict):
            raise OptionsError("must be a JSON object", option=option_name)
        return value

    return parse_json_object


def _all_ints(values: object) -> bool:
    try:
        return all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values)  # type: ignore[union-attr]
    except TypeError:  # not iterable: the type check names it
        return False


# -- the options ------------------------------------------------------------------------------
# The options plan version 2 recorded: always in a plan and manifest, whatever their value.
# Options added since are recorded only when not at their default; this set never grows.
_RECORDED_ALWAYS = frozenset(
    {
        "video",
        "episodes",
        "gop",
        "crf",
        "preset",
        "resize",
        "on_frame_mismatch",
        "windows",
        "tolerance_s",
        "shard_size_mb",
        "row_group_max_bytes",
    }
)


@describe_options
@dataclass(frozen=True)
class PackOptions:
    """Options that shape the packed output (recorded in the manifest and the plan).

    Raises (from the constructor):
        OptionsError: a value outside its allowed set or range; the message names the value
            and what is allowed, ``error.option`` the option.
    """

    video: str = option(
        "copy",
        choices=VIDEO_MODES,
        help=(
            "copy: keep the source's video (AV1 from LeRobot; CPU decode); hevc/h264: re-encode, decodable by "
            "A100/H100 NVDEC and faster to seek on CPU (docs/BENCHMARKS.md, codec study)."
        ),
    )
    episodes: tuple[int, ...] | None = option(
        None, parse=parse_episode_ranges, metavar="0,3,10-20", help=("Subset of episodes packed, e.g. 0,3,10-20 (default: all).")
    )
    gop: int = option(
        2,
        minimum=1,
        help=(
            "Keyframe interval of re-encodes: 1-2 for random access; longer GOPs are smaller but a random frame costs "
            "up to GOP-1 extra decodes."
        ),
    )
    crf: int | None = option(
        None, minimum=0, maximum=51, help="Re-encode quality, 0 (lossless) to 51 (worst) (default: hevc 23, h264 20)."
    )
    preset: str | None = option(None, choices=X26X_PRESETS, help="Encoder preset (default: hevc ultrafast, h264 veryfast).")
    resize: tuple[int, int] | dict | None = option(
        None,
        parse=parse_resize,
        multiple=True,
        metavar="[KEY=]HxW",
        help=(
            "Scale (down or up) during re-encode: HxW for every camera, or KEY=HxW for one camera (repeat per camera; "
            "the others keep their size), e.g. --resize observation.images.wrist=144x144."
        ),
    )
    on_frame_mismatch: str = option(
        "error",
        choices=FRAME_MISMATCH_POLICIES,
        help=(
            "When an episode's video has fewer frames than rows (or it has no rows): stop with an error, pad short video "
            "with its last frame, or leave the episode out; padded/dropped episodes are listed in the manifest. A video "
            "longer than its rows keeps its first frames under every policy (LeRobot never reads the rest)."
        ),
    )
    windows: dict = option(
        flag="--window",
        default_factory=dict,
        parse=parse_windows,
        multiple=True,
        metavar="NAME=JSON",
        help=(
            "NAME=JSON delta_timestamps window in seconds, multiples of 1/fps of YOUR dataset (see `info`'s fps; at 50 fps "
            "chunk='{\"action\": [0, 0.02, 0.04]}'); --window-frames is the same in frames, at any fps."
        ),
    )
    tolerance_s: float = option(
        DEFAULT_TOLERANCE_S,
        minimum=0,
        help=("How far (seconds) a timestamp or window delta may sit from a multiple of 1/fps (LeRobot's tolerance_s)."),
    )
    shard_size_mb: float = option(
        512,
        minimum=0,
        exclusive_minimum=True,
        help=("Target shard size; shards hold whole episodes, so one long episode may exceed it."),
    )
    row_group_max_bytes: int = option(
        ROW_GROUP_TARGET_BYTES, flag=False, minimum=1, help="The parquet row-group size the packer aims for."
    )
    # Options below this line were added after plan version 2: recorded only when not at their
    # default (to_json_dict), so the plans of packs made before them keep their digests.
    parquet_compression: str = option(
        DEFAULT_PARQUET_COMPRESSION,
        choices=parquet_compression_choices,
        help="Compression of the pack's parquet (shards and indexes): "
        + "; ".join(f"{name}: {row.note}" for name, row in PARQUET_COMPRESSIONS.items())
        + ".",
    )

    def __post_init__(self) -> None:
        # Normal forms, so equal options compare (and record) equal: sorted unique episodes,
        # a (height, width) tuple, a private windows dict.
        # Normal forms first (any iterable of episode indices, a list for a size), so equal
        # options compare and record equal; then every field's type, choices and range.
        if self.episodes is not None and not isinstance(self.episodes, (str, bytes)) and _all_ints(self.episodes):
            object.__setattr__(self, "episodes", tuple(sorted({int(e) for e in self.episodes})))
        if isinstance(self.resize, list):
            object.__setattr__(self, "resize", tuple(self.resize))
        if isinstance(self.resize, dict):  # per camera: sorted, sizes as tuples
            object.__setattr__(
                self, "resize", {str(k): tuple(v) if isinstance(v, (list, tuple)) else v for k, v in sorted(self.resize.items())}
            )
        if isinstance(self.windows, dict) or self.windows is None:
            object.__setattr__(self, "windows", dict(self.windows or {}))
        check_values(self, _options_error)
        for name, window in self.windows.items():
            ok = isinstance(name, str) and isinstance(window, dict)
            ok = ok and all(
                isinstance(k, str)
                and isinstance(v, list)
                and all(isinstance(o, (int, float)) and not isinstance(o, bool) for o in v)
                for k, v in window.items()
            )
            if not ok:
                raise OptionsError(
                    f"windows[{str(name)[:80]!r}] must be {{key: [seconds, ...]}}, got {str(window)[:80]}", option="windows"
                )
        if self.video == "copy" and self.gop != 2:  # the default is the only value copy mode can be given silently
            raise OptionsError(
                f"gop {self.gop} needs a re-encode (video 'hevc' or 'h264'); copy mode keeps the source's keyframes",
                option="gop",
            )
        if self.resize is not None and self.video == "copy":
            raise OptionsError(
                f"resize {self.resize} needs a re-encode (video 'hevc' or 'h264'); copy mode keeps the source bytes",
                option="resize",
            )
        sizes = self.resize.values() if isinstance(self.resize, dict) else [] if self.resize is None else [self.resize]
        for size in sizes:
            if not (
                isinstance(size, tuple)
                and len(size) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in size)
                and size[0] % 2 == 0
                and size[1] % 2 == 0
                and min(size) > 0
            ):
                raise OptionsError(
                    f"resize {str(size)[:40]} needs positive even sizes (height, width) for yuv420p", option="resize"
                )
        if isinstance(self.resize, dict) and not self.resize:
            object.__setattr__(self, "resize", None)
        if self.episodes is not None and any(e < 0 for e in self.episodes):
            raise OptionsError(f"episodes {[e for e in self.episodes if e < 0][:10]} are negative", option="episodes")

    @classmethod
    def from_recorded(cls, recorded: object, *, where: str = "recorded options") -> PackOptions:
        """The options a plan or manifest records (``to_json_dict``'s form), parsed: every
        field typed and checked as the constructor checks it. A pack's files are untrusted,
        so nothing built from its options (a repair command) reads them unchecked.

        Raises:
            FormatError: not an object, an option this version does not know, or a value its
                field refuses (names the option).
        """
        if not isinstance(recorded, dict):
            raise FormatError(f"{where}: options must be an object, found {type(recorded).__name__}")
        known = {f.name for f in option_fields(cls)}
        unknown = sorted(str(k)[:80] for k in recorded if k not in known)
        if unknown:
            raise FormatError(f"{where}: recorded option(s) {unknown} are not options of this lerobot-shards version")
        try:
            return cls(**recorded)
        except OptionsError as err:
            raise FormatError(f"{where}: recorded option {err.option!r}: {err}") from None

    def resize_for(self, key: str) -> tuple[int, int] | None:
        """The size camera ``key`` is scaled to (``(height, width)``), or None (its own size)."""
        if isinstance(self.resize, dict):
            return self.resize.get(key)
        return self.resize

    def to_json_dict(self) -> dict:
        """The options as the plan and manifest record them (lists, not tuples): those of plan
        version 2 always, a later option only when it is not at its default (a pack made before
        it existed has the same plan, so its resume is not refused)."""
        data = asdict(self)
        if isinstance(self.resize, dict):
            data["resize"] = {k: list(v) for k, v in self.resize.items()}
        else:
            data["resize"] = list(self.resize) if self.resize else None
        data["episodes"] = list(self.episodes) if self.episodes is not None else None
        defaults = {f.name: f.default for f in option_fields(type(self))}
        return {k: v for k, v in data.items() if k in _RECORDED_ALWAYS or v != defaults[k]}

    def parquet_profile(self) -> ParquetProfile:
        """How this pack's parquet files are written (``core/format/pack_output.py``)."""
        return pack_parquet(self.parquet_compression)


@describe_options
@dataclass(frozen=True)
class PackRunOptions:
    """How one pack run reads its source, writes its destination and spreads its work; not
    recorded (a re-run with other run options resumes the same pack).

    Raises (from the constructor):
        OptionsError: a value out of range (``error.option`` names it).
    """

    window_frames: dict = option(
        default_factory=dict,
        parse=parse_window_frames,
        multiple=True,
        metavar="NAME=JSON",
        help=(
            "NAME=JSON window in frames, whatever the fps: chunk='{\"action\": [0, 1, 2]}' is [0, 1/fps, 2/fps] s "
            "(recorded in seconds, as --window)."
        ),
    )
    workers: int = option(
        1, minimum=1, destination=True, help="Parallel packing processes (one shard each); up to the cores you have."
    )
    part: tuple[int, int] | None = option(
        None,
        destination=True,
        parse=parse_part,
        metavar="I/N",
        help="Pack only part I/N of the plan (then run finalize).",
    )
    cache_dir: str | None = option(None, help="Where remote/Hub sources are staged.")
    src_storage_options: dict | None = option(
        None, parse=_json_object_parser("src_storage_options"), metavar="JSON", help="fsspec options for SRC as JSON."
    )
    follow_symlinks: bool = option(
        False, help=("Read symbolic links inside a local SRC (refused by default: they may point outside the dataset).")
    )
    storage_options: dict | None = option(
        None,
        destination=True,
        parse=_json_object_parser("storage_options"),
        metavar="JSON",
        help=('fsspec options for DST as JSON, e.g. \'{"endpoint_url": "http://..."}\'.'),
    )
    retry: RetryPolicy = option(
        RetryPolicy(), flag=False, help=("Bounds every read and write at the destination (and a bucket source).")
    )
    journal: str | None = option(
        None,
        destination=True,
        metavar="DIR",
        help=(
            "Pack journal: what this machine wrote to DST (default $LEROBOT_SHARDS_JOURNAL or "
            "~/.cache/lerobot-shards/journal). --part tasks and finalize must share it."
        ),
    )
    trust_destination: bool = option(
        False,
        destination=True,
        help=(
            "Adopt shards this machine's journal does not record, after re-hashing them (only for a destination nobody "
            "else can write)."
        ),
    )
    repair: bool = option(
        False,
        destination=True,
        help=(
            "Re-hash every kept shard against its receipt and rebuild the damaged ones (a re-run otherwise checks their "
            "sizes only); what `verify` prints when it finds damage."
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "window_frames", dict(self.window_frames or {}))
        if self.part is not None:
            object.__setattr__(self, "part", tuple(self.part))
        check_values(self, _options_error)
        if self.part is not None and (len(self.part) != 2 or self.part[1] < 1 or not 0 <= self.part[0] < self.part[1]):
            raise OptionsError(f"part {self.part} must be (I, N) with 0 <= I < N", option="part")


def episode_ranges_text(episodes: list[int]) -> str:
    """Sorted episode indices as ``parse_episode_ranges`` reads them: ``0,3,10-20``."""
    out, run_start = [], None
    for i, e in enumerate(episodes):
        if run_start is None:
            run_start = e
        if i + 1 == len(episodes) or episodes[i + 1] != e + 1:
            out.append(str(e) if run_start == e else f"{run_start}-{e}")
            run_start = None
    return ",".join(out)


def options_as_flags(options: PackOptions) -> tuple[list[str], list[str]]:
    """The ``lerobot-shards pack`` flags that shape a pack as ``options`` (parsed from a plan's
    or manifest's with ``PackOptions.from_recorded``): the flag of every option that differs
    from its default, whose text parses back to the same value (``parse_pack_args(flags)``
    gives these options).

    Returns:
        ``(flags, unflagged)``: the flags, and ``name=value`` of options no flag can give
        (``pack_dataset`` takes them).
    """
    flags: list[str] = []
    unflagged: list[str] = []
    defaults = PackOptions().to_json_dict()
    recorded = options.to_json_dict()
    for f in option_fields(PackOptions):
        if f.name not in recorded or recorded[f.name] == defaults.get(f.name):
            continue  # at its default (an option added later is recorded only when set)
        value = recorded[f.name]
        if f.flag is None:
            unflagged.append(f"{f.name}={value!r}")
        elif f.name == "windows":
            for name, window in sorted(value.items()):
                flags += [f.flag, f"{name}={json.dumps(window, separators=(',', ':'))}"]
        elif f.name == "episodes":
            flags += [f.flag, episode_ranges_text(sorted(value))]
        elif f.name == "resize" and isinstance(value, dict):
            for key, (height, width) in sorted(value.items()):
                flags += [f.flag, f"{key}={height}x{width}"]
        elif f.name == "resize":
            flags += [f.flag, f"{value[0]}x{value[1]}"]
        else:
            flags += [f.flag, str(value)]
    return flags, unflagged


def flag_of(name: str) -> str:
    """The command-line flag of a pack option: ``on_frame_mismatch`` -> ``--on-frame-mismatch``,
    ``windows`` -> ``--window`` (the flag the fields say; ``--<name>`` for others)."""
    for cls in (PackOptions, PackRunOptions):
        for f in option_fields(cls):
            if f.name == name and f.flag:
                return f.flag
    return "--" + name.replace("_", "-")


@describe_options
@dataclass(frozen=True)
class MixtureScan:
    """Which datasets a mixture is made of and how they are read (``scan_datasets``,
    ``create_mixture``): the one set of options both take, as a value or by name.

    Raises (from the constructor):
        ArgumentError: a value of the wrong type or out of range.
    """

    names: Mapping[str, str] | None = option(None, flag=False, help="{dataset name: path} (relative to DST, or absolute/URLs).")
    sources_file: str | None = option(None, flag=False, help="A sources file listing the datasets (one per line).")
    where: str | None = option(None, flag=False, help="A DuckDB predicate over index/samples.parquet selecting anchors.")
    verify: bool = option(False, flag=False, help="Also run `verify` on every dataset (reads all shards).")
    storage_options: dict | None = option(None, flag=False, help="fsspec options for a bucket DST.")
    allow_duplicates: bool = option(False, flag=False, help="Keep a pack listed twice (it is then drawn twice as often).")
    key_map: Mapping[str, Mapping[str, str | None]] | None = option(
        None, flag=False, help="{dataset name: {source key: mixture key, or None to leave it out}}, over a sources file's."
    )
    workers: int = option(8, flag=False, minimum=1, help="Threads opening packs, per process (a bucket is mostly waiting).")
    processes: int | None = option(
        None, flag=False, minimum=1, help="Processes opening packs (None: one per usable core for hundreds of packs)."
    )
    recorded_key_map: Mapping[str, Mapping[str, str | None]] | None = option(
        None, flag=False, help="The key maps an existing mixture.json records, applied to the listed datasets they name."
    )

    def __post_init__(self) -> None:
        check_values(self)


__all__ = [
    "MixtureScan",
    "PackOptions",
    "PackRunOptions",
    "flag_of",
    "options_as_flags",
    "parse_episode_ranges",
    "parse_part",
    "parse_resize",
    "parse_window_frames",
    "parse_windows",
]
