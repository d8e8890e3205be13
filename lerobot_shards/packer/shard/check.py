"""``lerobot-shards check``: every problem a pack of a source would meet, found without writing.

A user curating hundreds of Hub datasets wants to know which ones a cluster job will refuse,
pad, drop or re-encode before the job runs. ``check_source`` does what building a shard does
to each episode, short of encoding and writing: it reads the episode's rows through the same
checks (tasks, pictures, values), cuts each camera's window as copy mode cuts it (in memory),
and compares what it finds with what the metadata claims:

* ``error``: the pack would stop here (unreadable rows or video, a frame count the
  ``on_frame_mismatch`` policy refuses, a camera a re-encode cannot code);
* ``warning``: the pack goes on but changes something (an episode padded, dropped or
  re-encoded because its source cannot be cut, frames trimmed) or LeRobot would not read the
  same thing (row timestamps that are not ``frame_index / fps``, video frames further than the
  tolerance from their row's timestamp: ``LeRobotDataset`` raises ``FrameTimestampError`` there).

Opening the source (``info.json``, episodes metadata, tasks, depth settings) happens before:
a source that does not open is one error, named by ``SourceError``.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import VIDEO_CODECS
from lerobot_shards.core.format.lerobot_reading import describe_positions
from lerobot_shards.core.format.nvdec_limits import nvdec_size_for, nvdec_size_refusal
from lerobot_shards.packer.errors import FrameMismatchError, MissingRowsError, PackError, SourceError, VideoCutError
from lerobot_shards.packer.options import PackOptions, episode_ranges_text, options_as_flags
from lerobot_shards.packer.shard.build import OpenVideos, row_positions, row_stamps
from lerobot_shards.packer.shard.frame_policy import frame_verdict, missing_rows_verdict, row_frames_verdict
from lerobot_shards.packer.shard.members import EncodeSettings, cut_episode, reencode_pixel_format
from lerobot_shards.packer.source.base import Source

Level = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One problem: how bad, where (episode, camera), what."""

    level: Level
    message: str
    episode: int | None = None
    camera: str | None = None

    def line(self) -> str:
        places = ([f"episode {self.episode}"] if self.episode is not None else []) + (
            [f"camera {self.camera}"] if self.camera else []
        )
        return f"{self.level.upper()} {', '.join(places) + ': ' if places else ''}{self.message}"


@dataclass
class SourceCheck:
    """What ``check_source`` found: the findings in order and what was read."""

    episodes: int = 0
    frames: int = 0
    findings: list[Finding] = field(default_factory=list)
    reencoded: list[int] = field(default_factory=list)
    # Episodes whose rows or frames disagree with their metadata (what --on-frame-mismatch decides).
    mismatched: list[int] = field(default_factory=list)
    checked: list[int] = field(default_factory=list)  # the episodes read, in order
    empty: list[int] = field(default_factory=list)  # of the mismatched, those without any row
    source_format: str | None = None  # the row of SOURCE_FORMATS that read the source (None: it did not open)

    def fix(self) -> str:
        """What packs what can be packed, for this source: the policy that packs the episodes
        whose rows or frames disagree with their metadata (when those are the only errors), and
        the ``--episodes`` that leaves out every episode with an error. Empty when nothing fails."""
        failing = sorted({f.episode for f in self.errors if f.episode is not None})
        if not failing:
            return ""
        others = [e for e in self.checked if e not in set(failing)]
        keep = f"--episodes {episode_ranges_text(others)} packs the other {len(others)}" if others else ""
        if set(failing) <= set(self.mismatched) and set(failing) & set(self.empty):
            policy = f"--on-frame-mismatch drop-episode leaves out {plural_episodes(len(failing))} (no rows to fill from)"
            return f"{policy}; {keep}" if keep else policy
        if set(failing) <= set(self.mismatched):
            policy = (
                f"--on-frame-mismatch pad packs {plural_episodes(len(failing))} whose rows or frames disagree with their "
                "metadata (a short video repeats its last frame, missing rows are filled from the row before), "
                "drop-episode leaves them out"
            )
            return f"{policy}; {keep}" if keep else policy
        return keep

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    @property
    def ok(self) -> bool:
        """No finding would stop a pack."""
        return not self.errors


def plural_episodes(count: int) -> str:
    return f"the {count} episode{'s' if count != 1 else ''}"


def check_source(
    source: Source, options: PackOptions, episodes: Sequence[int], *, progress: Callable[[int, int], None] | None = None
) -> SourceCheck:
    """Check the given episodes of ``source`` as ``options`` would pack them (see the module).

    ``progress(episodes checked, episodes)`` is called after each episode.

    Returns:
        The ``SourceCheck``; nothing is written anywhere.
    """
    report = SourceCheck(checked=list(episodes))
    report.findings += [Finding("warning", note) for note in source.reading_notes()]
    _check_cameras(source, options, report, episodes)
    with contextlib.closing(OpenVideos()) as videos:
        for done, episode in enumerate(episodes, start=1):
            _check_episode(source, options, episode, videos, report)
            if progress is not None:
                progress(done, len(episodes))
    return report


def empty_videos(source: Source, episodes: Sequence[int]) -> dict[int, str]:
    """Per episode whose video file of some camera is missing or holds 0 bytes (a recording
    that never wrote, as in some published corpora), what is wrong, naming the camera and file:
    such an episode cannot be packed, and its neighbours can (``--episodes``). Found by ``stat``
    alone, before any file is opened."""
    bad: dict[int, str] = {}
    for episode in episodes:
        for key in source.video_keys:
            path = source.video_file(episode, key)
            if not path.is_file():
                bad[episode] = f"camera {key}: {path} is missing"
            elif path.stat().st_size == 0:
                bad[episode] = f"camera {key}: {path} is empty (0 bytes)"
            else:
                continue
            break
    return bad


def sound_episodes_advice(
    bad: dict[int, str], episodes: Sequence[int], command: Sequence[str], options: PackOptions, *, note: str = ""
) -> str:
    """Why ``bad`` episodes cannot be packed, and the command (the user's own words and
    options, with ``--episodes`` the others) that packs the rest; ``note`` follows it (storage
    options the user gave, which are not printed: they may hold keys)."""
    listed = "; ".join(f"episode {e}: {why}" for e, why in list(bad.items())[:5])
    more = f"; and {len(bad) - 5} more" if len(bad) > 5 else ""
    others = [e for e in episodes if e not in bad]
    if not others:
        return f"no episode can be packed: {listed}{more}"
    flags, _ = options_as_flags(replace(options, episodes=tuple(others)))
    line = " ".join(shlex.quote(word) for word in [*command, *flags])
    count = f"{len(bad)} episode{'s' if len(bad) != 1 else ''}"
    return f"{count} cannot be packed: {listed}{more}; the other {len(others)} pack with `{line}`{note}"


def stretched_cameras(source: Source, options: PackOptions) -> str | None:
    """Why ``--resize`` would distort cameras (a size of another aspect would stretch them,
    silently) or names no camera of the source, or None.

    Returns:
        The message naming each such camera, with its size, what it would become, and the
        ``--resize KEY=HxW`` that keeps its aspect.
    """
    if options.video == "copy" or options.resize is None:
        return None
    if isinstance(options.resize, dict):
        unknown = sorted(set(options.resize) - set(source.video_keys))
        if unknown:
            return f"--resize names {unknown}, which are not video cameras of the source (its cameras: {source.video_keys})"
    bad, fixes = [], []
    for key in source.video_keys:
        camera, size = source.features[key].camera, options.resize_for(key)
        if key in source.depth or camera is None or size is None:
            continue
        if EncodeSettings(codec=options.video, resize=size).stretches(*camera.size):
            bad.append(f"{key} {camera.height}x{camera.width} to {size[0]}x{size[1]}")
            scale = size[0] / camera.height
            fixes.append(f"--resize {key}={2 * round(camera.height * scale / 2)}x{2 * round(camera.width * scale / 2)}")
    if not bad:
        return None
    return (
        f"--resize would stretch {', '.join(bad)} (another aspect ratio); give each camera its own size "
        f"(KEY=HxW), e.g. {' '.join(fixes)}"
    )


def uncopyable_codecs(source: Source, options: PackOptions, episodes: Sequence[int]) -> str | None:
    """Why copy mode cannot keep a camera's video, or None: members must be one of the codecs
    readers of a pack decode (``VIDEO_CODECS``); a source in another (MPEG-4 Part 2 from
    OpenCV's ``mp4v``, VP9, ...) packs with a re-encode, which decodes whatever FFmpeg reads.

    Returns:
        One sentence naming each camera, its codec and a file, and the ``--video`` that packs it.
    """
    if options.video != "copy":
        return None
    bad = [
        f"{key} is {codec} ({path})"
        for key, codecs in source.camera_codecs(episodes).items()
        for codec, path in codecs.items()
        if codec not in VIDEO_CODECS
    ]
    if not bad:
        return None
    return (
        f"copy mode keeps the source video, and readers of a pack decode {', '.join(VIDEO_CODECS)} only: camera "
        f"{'; camera '.join(bad)}. Pack with --video h264 (or --video hevc, which NVDEC also decodes): it re-encodes "
        "those cameras from what FFmpeg decodes"
    )


def _check_cameras(source: Source, options: PackOptions, report: SourceCheck, episodes: Sequence[int]) -> None:
    """What copy mode cannot keep and a re-encode cannot do with a camera's frames."""
    if options.video == "copy":
        try:
            problem = uncopyable_codecs(source, options, episodes)
        except SourceError as err:
            problem = str(err)
        if problem:
            report.findings.append(Finding("error", problem))
        return
    stretched = stretched_cameras(source, options)
    if stretched:
        report.findings.append(Finding("error", stretched))
    for key in source.video_keys:
        if key in source.depth:
            continue  # depth is cut (or re-encoded losslessly), never re-encoded as colour
        spec = source.features[key]
        assert spec.camera is not None  # a video feature is a camera (parse_feature)
        height, width = spec.camera.size
        settings = EncodeSettings(codec=options.video, resize=options.resize_for(key))
        height, width = settings.output_size(height, width)
        try:
            settings.options(width, height)
        except VideoCutError as err:
            report.findings.append(Finding("error", str(err), camera=key))
            continue
        refusal = _nvdec_refusal(options, key, height, width)
        if refusal is not None:  # said before packing, not only by info or the GPU stage after
            report.findings.append(Finding("warning", refusal, camera=key))
        source_format = spec.pix_fmt
        if reencode_pixel_format(source_format, height, width) == "yuv444p":
            report.findings.append(
                Finding(
                    "warning",
                    f"{height}x{width} ({source_format}) is coded yuv444p by --video "
                    f"{options.video}: NVDEC decodes it only in hevc",
                    camera=key,
                )
            )


def _nvdec_refusal(options: PackOptions, camera: str, height: int, width: int) -> str | None:
    """Why NVDEC could not decode ``camera``'s re-encoded ``height x width`` frames, or None
    (the size that fits is said; ``nvdec_advice`` gives the one command for every camera)."""
    return nvdec_size_refusal(
        options.video, height, width, where=f"NVDEC cannot decode this camera after --video {options.video}", camera=camera
    )


def _colour_outputs(source: Source, options: PackOptions) -> dict[str, tuple[int, int]]:
    """Each colour camera's size after this re-encode (``--resize`` applied)."""
    out = {}
    for key in source.video_keys:
        spec = source.features[key]
        if key in source.depth or spec.camera is None:
            continue
        out[key] = EncodeSettings(codec=options.video, resize=options.resize_for(key)).output_size(*spec.camera.size)
    return out


def nvdec_warnings(
    source: Source, options: PackOptions, *, command: Sequence[str] = ("lerobot-shards", "check", "SRC")
) -> list[str]:
    """What ``check`` warns about NVDEC for this re-encode: one line per colour camera NVDEC
    could not decode at its output size, then ``nvdec_advice``'s one command; empty in copy
    mode. ``pack`` logs the same lines before it packs."""
    if options.video == "copy":
        return []
    said = []
    for key, (height, width) in _colour_outputs(source, options).items():
        refusal = _nvdec_refusal(options, key, height, width)
        if refusal is not None:
            said.append(f"camera {key}: {refusal}")
    advice = nvdec_advice(source, options, command=command)
    return said + ([advice] if advice else [])


def nvdec_advice(source: Source, options: PackOptions, *, command: Sequence[str]) -> str | None:
    """One command with the user's own options and every colour camera's ``--resize`` (its own
    size where NVDEC decodes it, NVDEC's smallest at its aspect where not), so that following it
    brings no camera's warning back; None when every camera decodes, or none can be fitted.
    ``command``: the words before the options (``lerobot-shards check SRC``)."""
    if options.video == "copy":
        return None
    outputs = _colour_outputs(source, options)
    refused = [key for key, size in outputs.items() if _nvdec_refusal(options, key, *size) is not None]
    fits = {key: nvdec_size_for(options.video, *outputs[key]) for key in refused}
    if not refused or any(fit is None for fit in fits.values()):
        return None
    own = {key: size for key in outputs if (size := options.resize_for(key)) is not None}
    flags, _ = options_as_flags(replace(options, resize={**own, **fits}))
    line = " ".join(shlex.quote(word) for word in [*command, *flags])
    return f"NVDEC decodes every camera with these sizes and your other options (then pack with them): `{line}`"


def _check_episode(source: Source, options: PackOptions, episode: int, videos: OpenVideos, report: SourceCheck) -> None:
    add = report.findings.append
    try:
        try:
            rows = source.episode_rows(episode)
        except MissingRowsError as err:
            report.mismatched.append(episode)
            if err.rows == 0:
                report.empty.append(episode)
            verdict = missing_rows_verdict(err, options.on_frame_mismatch)  # raises under "error"
            how = "filled from the row before each" if verdict == "pad" else "the episode is dropped"
            add(Finding("warning", f"{err}: {how} (--on-frame-mismatch {options.on_frame_mismatch})", episode))
            if verdict == "drop":
                return
            rows = source.episode_rows(episode, fill_missing=True)
        source.check_rows(episode, rows)
        source.episode_tasks(episode, rows)
    except (SourceError, FormatError) as err:
        add(Finding("error", str(err), episode))
        return
    length = rows.num_rows
    report.episodes += 1
    report.frames += length
    if length == 0:
        level: Level = "error" if options.on_frame_mismatch == "error" else "warning"
        add(
            Finding(
                level,
                "no rows (length 0): " + ("refused under --on-frame-mismatch error" if level == "error" else "dropped"),
                episode,
            )
        )
        return
    stamps = row_stamps(rows)
    if stamps is not None:
        drift = np.abs(stamps - np.arange(length) / source.fps)
        if float(drift.max()) > options.tolerance_s:
            worst = int(drift.argmax())
            add(
                Finding(
                    "warning",
                    f"row timestamps are not frame_index / fps: frame {worst} is at {stamps[worst]:.6f} s, "
                    f"{drift[worst]:.6f} s from {worst / source.fps:.6f} (tolerance {options.tolerance_s} s); windows in "
                    "seconds resolve by frame, as LeRobot's delta indices do",
                    episode,
                )
            )
    for key in source.video_keys:
        _check_camera(_Camera(source, options, episode, key, length, stamps, videos, report))


@dataclass(frozen=True)
class _Camera:
    """One camera of one episode under check, and where its findings go."""

    source: Source
    options: PackOptions
    episode: int
    key: str
    length: int
    stamps: np.ndarray | None
    videos: OpenVideos
    report: SourceCheck


def _check_camera(camera: _Camera) -> None:
    """One camera of an episode, as the pack would take it: its file opened and cut, each
    row's frame, the frame count against the rows, whether copy mode can keep it."""
    opened = _open_camera(camera)
    if opened is None:
        return
    location, positions, frames, video, found = opened
    if not _row_frames(camera, positions, frames):
        return
    if not _frame_count(camera, found, str(location.path)):
        return
    source, key, episode, report = camera.source, camera.key, camera.episode, camera.report
    if video is None and found and (camera.options.video == "copy" or key in source.depth):
        how = "losslessly (depth)" if key in source.depth else "with the hevc settings"
        message = f"cannot be cut at a keyframe as one decode run: copy mode re-encodes it {how}"
        report.findings.append(Finding("warning", message, episode, key))
        if episode not in report.reencoded:
            report.reencoded.append(episode)


def _open_camera(camera: _Camera):
    """The camera's file, each row's frame in it, the frames its window holds, the cut member
    (None: not cuttable) and the frames found; None (and an error finding) where it cannot be
    read or cut."""
    source, options, episode, key, report = camera.source, camera.options, camera.episode, camera.key, camera.report
    location = source.video_location(episode, key)
    if not location.path.is_file():
        report.findings.append(Finding("error", f"{location.path}: missing", episode, key))
        return None
    try:
        reader = camera.videos.packets(
            key,
            location.path,
            max_samples=source.max_video_samples(episode, key),
            max_sample_bytes=source.max_sample_bytes(key),
        )
        positions, frames = row_positions(location, camera.stamps, reader, options.tolerance_s)
        video, found = cut_episode(location, reader, max_frames=camera.length)
    except (SourceError, VideoCutError, PackError, FormatError) as err:
        report.findings.append(Finding("error", str(err), episode, key))
        return None
    return location, positions, frames, video, found


def _row_frames(camera: _Camera, positions, frames: int) -> bool:
    """What the rows' timestamps read: another order than the video's (re-encoded), rows without
    a frame (padded, dropped or refused). Returns whether the camera's checks go on."""
    source, options, episode, key, report = camera.source, camera.options, camera.episode, camera.key, camera.report
    add = report.findings.append
    try:
        rows = row_frames_verdict(
            positions, frames, options.on_frame_mismatch, episode=episode, key=key, tolerance_s=options.tolerance_s
        )
    except FrameMismatchError as err:
        report.mismatched.append(episode)
        add(Finding("error", str(err).removeprefix(f"episode {episode}, camera {key}: "), episode, key))
        return False
    if rows == "reorder":
        assert positions is not None
        how = "with the hevc settings (copy mode)" if options.video == "copy" else f"(--video {options.video})"
        if key in source.depth:
            how = "losslessly (depth)"
        message = (
            f"the rows' timestamps read other frames than the video's order ({describe_positions(positions)}, "
            f"as LeRobot finds each row's frame): the member is re-encoded {how} with those frames in row order"
        )
        add(Finding("warning", message, episode, key))
        if episode not in report.reencoded:
            report.reencoded.append(episode)
        return False
    if rows is not None:
        report.mismatched.append(episode)
        message = (
            f"rows without a frame within {options.tolerance_s} s of their timestamp (LeRobotDataset raises "
            f"FrameTimestampError there): the episode is {'padded' if rows == 'pad' else 'dropped'} "
            f"(--on-frame-mismatch {options.on_frame_mismatch})"
        )
        add(Finding("warning", message, episode, key))
        return rows != "drop"
    return True


def _frame_count(camera: _Camera, found: int, where: str) -> bool:
    """The video's frames against the rows: trimmed, padded, dropped or refused. Returns
    whether the camera's checks go on."""
    options, episode, key, length, report = camera.options, camera.episode, camera.key, camera.length, camera.report
    add = report.findings.append
    try:
        verdict = frame_verdict(found, length, options.on_frame_mismatch, episode=episode, key=key, where=where)
    except FrameMismatchError as err:
        report.mismatched.append(episode)
        add(Finding("error", str(err).removeprefix(f"episode {episode}, camera {key}: "), episode, key))
        return False
    if verdict == "trim":
        message = (
            f"video has {found} frames for {length} rows: the member keeps the first {length} (LeRobot never reads the others)"
        )
        add(Finding("warning", message, episode, key))
    elif verdict is not None:
        how = f"{'padded' if verdict == 'pad' else 'dropped'} (--on-frame-mismatch {options.on_frame_mismatch})"
        add(Finding("warning", f"video has {found} frames for {length} rows: the episode is {how}", episode, key))
    return True


__all__ = [
    "empty_videos",
    "sound_episodes_advice",
    "Finding",
    "SourceCheck",
    "check_source",
    "nvdec_advice",
    "nvdec_warnings",
    "uncopyable_codecs",
]
