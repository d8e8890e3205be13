"""What DataLoader workers ship to a ``DecodeStage`` instead of decoded frames.

With ``decode_device=``, a sample carries, per camera, an ``EncodedFrames``: the member it
reads (a compressed episode video), the frame indices it needs, and the flags that let the
stage hold each member exactly as long as the worker does:

- ``admits``: the first draw of an admission (the pool took the episode in). Only this draw
  carries the member's bytes (``data``); later draws of the admission carry ``None``, so a
  member crosses the process boundary once per admission, not once per batch.
- ``retires``: the admission's last draw (the pool drops the episode after it).

The stage opens a member when it is admitted and drops it after the batch holding its last
admission's last draw: each member is opened at most once per admission, whatever the mixture
(``lerobot_shards/reader/decode/member_cache.py``). This needs the stage to see every batch of a loader, in
the order each worker produced them: a DataLoader guarantees that per worker.

``collate`` builds a batch: ``default_collate`` for everything else, and under ``ENCODED_KEY``
per camera the batch's distinct members, each sample's ``(member, indices)`` and each member's
``(admissions, retirements)`` in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch.utils.data import default_collate
from torch.utils.data._utils.collate import default_collate_fn_map

from lerobot_shards.core.errors import ArgumentError, DecodeError
from lerobot_shards.core.format.mixture import ENCODED_KEY  # named beside the other keys a sample adds


@dataclass(frozen=True)
class EncodedFrames:
    """What a worker ships for one camera of one sample instead of decoded frames."""

    member_id: str  # unique per (dataset, shard, episode, camera)
    data: bytes | None  # the member's bytes on an admission's first draw, else None
    codec: str
    indices: tuple[int, ...]
    squeeze: bool  # a one-element video window has no T axis (LeRobot)
    as_float: bool
    frame_size: tuple[int, int] | None = None  # (height, width) the manifest records
    frames: int | None = None  # frames the index records for the member
    admits: bool = False  # first draw of an admission
    retires: bool = False  # last draw of an admission

    def member_bytes(self) -> bytes:
        """The member's bytes, which only an admission's first draw carries (the stage opens a
        member then and keeps it).

        Raises:
            DecodeError: this draw carries none.
        """
        if self.data is None:
            raise DecodeError(f"{self.member_id}: opened from a draw that does not carry its bytes")
        return self.data


def _needs_a_stage(batch, *, collate_fn_map=None):
    raise ArgumentError(
        "a sample holds compressed video (the dataset was made with decode_device=...): a plain DataLoader "
        "cannot batch it: iterate the dataset with lerobot_shards.BatchLoader (it decodes each batch on that "
        "device), or leave decode_device unset to decode in the workers"
    )


# torch's default_collate looks a type up in this table before failing with "found
# EncodedFrames": a plain DataLoader over a decode_device dataset then says what to use instead.
default_collate_fn_map[EncodedFrames] = _needs_a_stage


def collate(samples: list[dict]) -> dict:
    """``default_collate`` for everything but encoded video, whose members are deduplicated.

    Returns the batch with ``batch[ENCODED_KEY][camera] = {"members": [EncodedFrames, ...],
    "refs": [(member position, indices) per sample], "holds": [(admits, retires) per member]}``;
    a member's entry is one that carries its bytes when any sample's does.
    """
    encoded = [s.pop(ENCODED_KEY, {}) for s in samples]
    batch = default_collate(samples)
    if any(encoded):
        per_key: dict[str, dict] = {}
        for key in encoded[0]:
            position: dict[str, int] = {}
            members: list[EncodedFrames] = []
            holds: list[list[int]] = []
            refs = []
            for item in encoded:
                frames = item[key]
                at = position.get(frames.member_id)
                if at is None:
                    at = position[frames.member_id] = len(members)
                    members.append(frames)
                    holds.append([0, 0])
                elif members[at].data is None and frames.data is not None:
                    members[at] = frames
                holds[at][0] += frames.admits
                holds[at][1] += frames.retires
                refs.append((at, frames.indices))
            per_key[key] = {"members": members, "refs": refs, "holds": [tuple(h) for h in holds]}
        batch[ENCODED_KEY] = per_key
    return batch
