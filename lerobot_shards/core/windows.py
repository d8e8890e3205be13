"""Temporal windows with LeRobot semantics, as pure arithmetic (no I/O, no torch).

A window is LeRobot's ``delta_timestamps``: ``{feature_key: [seconds, ...]}``. Each delta
must be a multiple of ``1/fps`` within ``tolerance_s``; it becomes a frame offset
``round(d * fps)``. Query frames are clamped to the episode and the clamped slots are
reported as padding (``<key>_is_pad``), so a padded slot repeats the boundary frame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from lerobot_shards.core.errors import WindowError

DEFAULT_TOLERANCE_S = 1e-4


def resolve_delta_timestamps(
    delta_timestamps: Mapping[str, Sequence[float]],
    fps: float,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    known_keys: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """Convert ``delta_timestamps`` (seconds) to frame offsets.

    Returns:
        ``{key: int64 array of offsets}`` in the order given.

    Raises:
        WindowError: a key is unknown (when ``known_keys`` is given), a list is empty,
            or a delta is not a multiple of ``1/fps`` within ``tolerance_s``.
    """
    if fps <= 0:
        raise WindowError(f"fps must be positive, got {fps}")
    offsets: dict[str, np.ndarray] = {}
    for key, deltas in delta_timestamps.items():
        if known_keys is not None and key not in known_keys:
            raise WindowError(f"delta_timestamps key {key!r} is not a feature; expected one of {sorted(known_keys)}")
        if isinstance(deltas, (str, bytes)) or not isinstance(deltas, Iterable):
            raise WindowError(
                f"delta_timestamps[{key!r}] must be a list of seconds (e.g. [-0.1, 0.0]), got {type(deltas).__name__} {deltas!r}"
            )
        try:
            deltas = [float(d) for d in deltas]
        except (TypeError, ValueError):
            raise WindowError(f"delta_timestamps[{key!r}] must hold numbers (seconds), got {deltas!r}") from None
        if not deltas:
            raise WindowError(f"delta_timestamps[{key!r}] is empty")
        bad = [d for d in deltas if abs(d * fps - round(d * fps)) / fps > tolerance_s]
        if bad:
            frames = [round(d * fps) for d in deltas]
            raise WindowError(
                f"delta_timestamps[{key!r}] has values that are not multiples of 1/fps={1 / fps:.6f}s "
                f"within tolerance_s={tolerance_s}: {bad}; the nearest multiples are "
                f"{[round(f / fps, 6) for f in frames]} s, frame offsets {frames} at {fps} fps"
            )
        offsets[key] = np.array([round(d * fps) for d in deltas], dtype=np.int64)
    return offsets


def query_frames(frame_index: int, length: int, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the clamped episode-relative frames a window reads and which slots are padded.

    ``frame_index`` is the anchor's position in its episode, ``length`` the episode's
    frame count. Returns ``(frames int64, is_pad bool)``, both shaped like ``offsets``.
    """
    raw = frame_index + offsets
    return np.clip(raw, 0, length - 1), (raw < 0) | (raw >= length)


def pad_counts(frame_index: np.ndarray, length: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Count padded slots per anchor, vectorized over anchors.

    Args:
        frame_index: (anchors,) anchor positions in their episodes.
        length: (anchors,) length of each anchor's episode.
        offsets: (window,) frame offsets of one window key.

    Returns:
        ``(before, after)``: (anchors,) int32 counts of offsets landing before frame 0 and
        at or past ``length``.
    """
    raw = np.asarray(frame_index, dtype=np.int64)[:, None] + np.asarray(offsets, dtype=np.int64)[None, :]
    length = np.asarray(length, dtype=np.int64)[:, None]
    before = (raw < 0).sum(axis=1).astype(np.int32)
    after = (raw >= length).sum(axis=1).astype(np.int32)
    return before, after


def resolve_windows(
    delta_timestamps: Mapping[str, Sequence[float]] | None, fps: float, tolerance_s: float, keys: Sequence[str]
) -> dict[str, np.ndarray]:
    """``delta_timestamps`` (seconds) as frame offsets per key at ``fps``; {} without windows.

    Raises:
        WindowError: an unknown key or a delta that is not a multiple of 1/fps.
    """
    if not delta_timestamps:
        return {}
    return resolve_delta_timestamps(delta_timestamps, fps, tolerance_s=tolerance_s, known_keys=list(keys))


def frames_needed(offsets: np.ndarray) -> int:
    """Frames an episode must have for some anchor to hold the whole window ``offsets``
    (the anchor included): ``max(0, max) - min(0, min) + 1``."""
    offsets = np.asarray(offsets)
    if offsets.size == 0:
        return 1
    return int(max(0, int(offsets.max())) - min(0, int(offsets.min())) + 1)


def looks_like_frames(deltas: Sequence[float]) -> bool:
    """Whether a window given in seconds reads as frame offsets: every delta a whole number and
    some not 0 (``[0, 1, 2]`` s is 2 s of context; ``[0, 1/30, 2/30]`` is what was meant)."""
    return any(d != 0 for d in deltas) and all(float(d).is_integer() for d in deltas)


def windows_beyond(offsets: Mapping[str, np.ndarray], longest: int, fps: float, *, keyed: bool = False) -> list:
    """For each window no episode is long enough to hold whole (every sample would be padded),
    a sentence naming it (``keyed``: ``(key, sentence)``); ``longest``: the longest episode's
    frames. [] when all fit."""
    out = []
    for key, key_offsets in offsets.items():
        needed = frames_needed(key_offsets)
        if needed > longest:
            sentence = (
                f"the window of {key!r} spans {needed} frames ({needed / fps:.2f} s) and the longest episode has "
                f"{longest}: every sample pads it (<key>_is_pad)"
            )
            out.append((key, sentence) if keyed else sentence)
    return out
