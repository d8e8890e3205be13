"""``on_frame_mismatch``: what to do when an episode's video and rows disagree (pure).

LeRobot decodes row ``j`` of an episode from its video; a member with fewer frames than the
episode has rows cannot give every row its frame. ``error`` refuses to pack such an episode,
``pad`` keeps it (a reader repeats the member's last frame for rows past its end),
``drop-episode`` leaves it out. A video *longer* than its rows (LeRobot's v2.1 converter leaves
1-3 frames past an episode's end) loses nothing: LeRobot never reads frames past the last row,
so the member keeps the first ``length`` frames under every policy (``"trim"``). The manifest
lists padded, dropped and trimmed episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from lerobot_shards.packer.errors import FrameMismatchError, MissingRowsError

Verdict = Literal["pad", "drop", "trim"] | None
RowVerdict = Literal["reorder", "pad", "drop"] | None


def frame_verdict(found: int, length: int, policy: str, *, episode: int, key: str, where: str) -> Verdict:
    """The verdict for one camera of an episode: ``None`` (frames match), ``"trim"`` (more frames
    than rows, whatever the policy: the extra ones are never read), ``"pad"`` or ``"drop"``.

    An empty window (``found == 0``) cannot be padded: ``pad`` refuses it like ``error``.

    Raises:
        FrameMismatchError: the policy does not allow this mismatch; names the episode, the
            camera, both counts, where the frames came from and the policy that would pack it.
    """
    if found == length:
        return None
    if found > length:
        return "trim"
    if policy == "pad" and found > 0:
        return "pad"
    if policy == "drop-episode":
        return "drop"
    allowed = "'drop-episode'" if found == 0 else "'pad' or 'drop-episode'"
    raise FrameMismatchError(
        f"episode {episode}, camera {key}: video has {found} frames but the episode has {length} rows "
        f"({where}); set on_frame_mismatch to {allowed} to pack anyway"
    )


def row_frames_verdict(
    positions: Sequence[int] | None, frames: int, policy: str, *, episode: int, key: str, tolerance_s: float
) -> RowVerdict:
    """Whether each row's frame, as LeRobot finds it from the row's timestamp
    (``lerobot_frame_positions``: the window position of the frame within ``tolerance_s`` of
    ``from_timestamp + timestamp``, -1 for none), is the window's frame of the row's place;
    ``frames`` is how many frames the window holds.

    Returns:
        ``None``: row ``j`` reads frame ``j`` (or the timing is unknown: ``positions`` None; or
        only the rows past the window's last frame lack one, a short video that
        ``frame_verdict`` decides);
        ``"reorder"``: every row has its frame, not in the window's order (a camera recorded at
        another rate, timestamps out of order): the member must hold those frames in row order;
        ``"pad"`` / ``"drop"``: rows without a frame (LeRobot raises ``FrameTimestampError``
        there), packed by the policy (``pad``: row ``j`` gets the window's frame ``j``).

    Raises:
        FrameMismatchError: rows without a frame under ``error``: names them, what LeRobot does,
            and the flags that pack the episode or leave it out.
    """
    if positions is None:
        return None
    length = len(positions)
    unmatched = [j for j, p in enumerate(positions) if p < 0]
    if not unmatched:
        return None if list(positions) == list(range(length)) else "reorder"
    first = unmatched[0]
    if first >= frames and unmatched == list(range(first, length)) and list(positions[:first]) == list(range(first)):
        return None  # a short video: frame_verdict counts it
    if policy == "pad":
        return "pad"
    if policy == "drop-episode":
        return "drop"
    raise FrameMismatchError(
        f"episode {episode}, camera {key}: {len(unmatched)} row(s) have no frame within {tolerance_s} s of "
        f"their timestamp (from row {first}); LeRobotDataset raises FrameTimestampError on them. "
        "--on-frame-mismatch pad gives row j the episode's frame j, drop-episode leaves the episode out; "
        "--tolerance-s accepts frames as far as LeRobotDataset(tolerance_s=...) would"
    )


def missing_rows_verdict(err: MissingRowsError, policy: str) -> Verdict:
    """An episode whose data parquet lacks rows its metadata length counts: ``"pad"`` (its rows
    are filled, each from the one before: ``episode_rows(fill_missing=True)``) or ``"drop"``.
    One without any row has nothing to fill from: ``pad`` drops it, as an episode of length 0.

    Raises:
        MissingRowsError: under ``error``, the message naming the policies that pack it and
            the command that lists every such episode with the ``--episodes`` that skips them.
    """
    if policy == "pad":
        return "drop" if err.rows == 0 else "pad"
    if policy == "drop-episode":
        return "drop"
    if err.rows == 0:
        raise MissingRowsError(
            f"{err}; it has no rows to fill from: --on-frame-mismatch drop-episode leaves it out; "
            "`lerobot-shards check SRC` lists every such episode and the --episodes that packs the others",
            episode=err.episode,
            missing=err.missing,
            rows=0,
        )
    raise MissingRowsError(
        f"{err}; --on-frame-mismatch pad fills each missing row from the one before it (its video frame kept), "
        "drop-episode leaves the episode out; `lerobot-shards check SRC` lists every such episode and the "
        "--episodes that packs the others",
        episode=err.episode,
        missing=err.missing,
    )


def empty_episode_verdict(policy: str, *, episode: int) -> Verdict:
    """An episode without rows has no anchors and nothing to pad: it is dropped, unless the
    policy is ``error``.

    Raises:
        FrameMismatchError: under ``error``.
    """
    if policy == "error":
        raise FrameMismatchError(
            f"episode {episode} has no rows (length 0 in the source's episodes metadata); "
            "--on-frame-mismatch drop-episode (on_frame_mismatch='drop-episode') leaves it out"
        )
    return "drop"
