"""Which opened members a ``DecodeStage`` keeps: exactly those a worker still reads.

An LRU sized by guess thrashes on a mixture: with a pool of 16 episodes x 4 cameras x 2
workers, 128 members are live, and a 64-entry LRU opened members 3,727 times in 60 batches
with one hit (measured on an H200, issue 29). Workers know better: they flag an admission's
first and last draws (``lerobot_shards/reader/decode/wire.py``). A member is *held* from its first
admission to its last retirement, so it is opened at most once per admission and dropped as
soon as no worker reads it; what is held is what the workers' pools hold.

Members that arrive without flags (batches built by hand) go to a small LRU instead.
``limit`` bounds the held members if retirements never come (a loop left early, a partial
last batch dropped, or a piece cut by a segment's end after a re-split resume: its last draw
lies in the next segment, so no worker flags it here): beyond it the least recently used is dropped and counted; a later draw
of it without bytes then fails loudly in the stage, never decodes something else.

Pure bookkeeping (no torch, no I/O); used from one thread.
"""

from __future__ import annotations

from collections import OrderedDict

from lerobot_shards.core.errors import ArgumentError


class MemberCache:
    """Opened members by id (see the module docstring).

    Args:
        loose: members without admission flags kept (LRU).
        limit: held members kept at most.
    """

    def __init__(self, *, loose: int = 64, limit: int = 16384):
        if loose < 0 or limit < 1:
            raise ArgumentError(f"loose must be >= 0 and limit >= 1, got {loose} and {limit}")
        self.loose, self.limit = loose, limit
        self._held: OrderedDict[str, list] = OrderedDict()  # id -> [value, holds]
        self._loose: OrderedDict[str, object] = OrderedDict()
        self.counters = {"hits": 0, "misses": 0, "admissions": 0, "retirements": 0, "forced_evictions": 0, "max_held": 0}

    def __len__(self) -> int:
        return len(self._held) + len(self._loose)

    def __contains__(self, member_id: str) -> bool:
        return member_id in self._held or member_id in self._loose

    @property
    def held(self) -> int:
        """Members held for live admissions now."""
        return len(self._held)

    def get(self, member_id: str):
        """The opened member, or None (counted as a hit or a miss)."""
        entry = self._held.get(member_id)
        if entry is not None:
            self._held.move_to_end(member_id)
            self.counters["hits"] += 1
            return entry[0]
        value = self._loose.get(member_id)
        if value is not None:
            self._loose.move_to_end(member_id)
            self.counters["hits"] += 1
            return value
        self.counters["misses"] += 1
        return None

    def put(self, member_id: str, value, *, held: bool) -> None:
        """Keep a newly opened member: held (flags will follow) or in the LRU."""
        if held:
            self._held[member_id] = [value, 0]
            self._bound()
        elif self.loose:
            self._loose[member_id] = value
            while len(self._loose) > self.loose:
                self._loose.popitem(last=False)

    def admit(self, member_id: str, count: int) -> None:
        """``count`` admissions of a member in the cache start reading it."""
        if count <= 0:
            return
        self.counters["admissions"] += count
        entry = self._held.get(member_id)
        if entry is None:
            value = self._loose.pop(member_id, None)
            if value is None:
                return  # dropped at the limit meanwhile: its next bytes-less draw fails in the stage
            entry = self._held[member_id] = [value, 0]
        entry[1] += count
        self._bound()

    def retire(self, member_id: str, count: int) -> None:
        """``count`` admissions read a member for the last time; it goes when none is left."""
        if count <= 0:
            return
        self.counters["retirements"] += count
        entry = self._held.get(member_id)
        if entry is not None:
            entry[1] -= count
            if entry[1] <= 0:
                del self._held[member_id]

    def reset(self) -> None:
        """Forget every member (a new loader will ship each again with its first draw)."""
        self._held.clear()
        self._loose.clear()

    def _bound(self) -> None:
        while len(self._held) > self.limit:
            self._held.popitem(last=False)
            self.counters["forced_evictions"] += 1
        self.counters["max_held"] = max(self.counters["max_held"], len(self._held))
