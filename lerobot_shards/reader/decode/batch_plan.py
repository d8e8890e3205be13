"""What a ``DecodeStage`` decodes for one camera of a batch, and where each frame goes.

Pure (numbers in, numbers out; no torch, no decoder): from a collated camera payload
(``lerobot_shards/reader/decode/wire.py``), each distinct member's wanted frames (distinct, ascending: each
decoded once for all samples of the batch) and, per frame, the rows of the camera's output
it fills. Row ``sample * T + step`` holds step ``step`` of sample ``sample``'s window, so the
output is a ``(B * T, ...)`` buffer that becomes ``(B, T, ...)`` by a view.
"""

from __future__ import annotations

from dataclasses import dataclass

from lerobot_shards.core.errors import DecodeStageError


@dataclass(frozen=True)
class MemberJob:
    """One member's share of a camera: ``wanted`` frames and, for each, its output rows."""

    member: int  # position in the payload's member list
    wanted: tuple[int, ...]
    rows: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class CameraPlan:
    """A camera's batch: ``samples`` windows of ``length`` frames, decoded by ``jobs``."""

    key: str
    samples: int
    length: int
    squeeze: bool  # one-frame windows have no T axis (LeRobot)
    as_float: bool
    jobs: tuple[MemberJob, ...]


def plan_camera(key: str, payload: dict) -> CameraPlan:
    """Plan one camera of a batch.

    Raises:
        DecodeStageError: samples with different window lengths, or frames outside the
            member they read (both named; nothing is decoded).
    """
    refs, members = payload["refs"], payload["members"]
    lengths = {len(indices) for _, indices in refs}
    if len(lengths) > 1:
        raise DecodeStageError(f"{key}: samples of one batch ask for windows of {sorted(lengths)} frames; one length per camera")
    length = lengths.pop() if lengths else 0
    destinations: dict[int, dict[int, list[int]]] = {}
    for sample, (member, indices) in enumerate(refs):
        frames = destinations.setdefault(member, {})
        for step, frame in enumerate(indices):
            frames.setdefault(frame, []).append(sample * length + step)
    jobs = []
    for member, frames in destinations.items():
        count = members[member].frames
        if count is not None:
            outside = sorted(f for f in frames if not 0 <= f < count)
            if outside:
                raise DecodeStageError(f"{members[member].member_id}: frames {outside} are outside its {count} frames")
        wanted = tuple(sorted(frames))
        jobs.append(MemberJob(member=member, wanted=wanted, rows=tuple(tuple(frames[f]) for f in wanted)))
    first = members[refs[0][0]] if refs else None
    return CameraPlan(
        key=key,
        samples=len(refs),
        length=length,
        squeeze=bool(first and first.squeeze),
        as_float=bool(first and first.as_float),
        jobs=tuple(jobs),
    )


def balance(weights: list[int], groups: int) -> list[list[int]]:
    """Split positions ``0..len(weights)-1`` into at most ``groups`` lists of about equal total
    weight (heaviest first, each to the lightest group), each list in ascending order."""
    count = max(1, min(groups, len(weights)))
    out: list[list[int]] = [[] for _ in range(count)]
    load = [0] * count
    for position in sorted(range(len(weights)), key=lambda p: -weights[p]):
        lightest = load.index(min(load))
        out[lightest].append(position)
        load[lightest] += weights[position]
    return [sorted(group) for group in out if group]
