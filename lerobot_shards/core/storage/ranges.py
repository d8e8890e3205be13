"""Coalescing byte ranges of one object into few requests (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lerobot_shards.core.errors import ArgumentError

DEFAULT_MAX_GAP_BYTES = 1 << 20
"""``read_ranges`` merges ranges of one object whose gap is at most this: on object stores a
request costs about as much as a few hundred KB to a few MB of transfer."""

DEFAULT_MAX_REQUEST_BYTES = 64 << 20
"""``read_ranges`` never merges ranges into a request larger than this (a retry refetches it all)."""


@dataclass(frozen=True)
class CoalescedRange:
    """One request ``[offset, offset + size)`` serving the input ranges at positions ``members``."""

    offset: int
    size: int
    members: tuple[int, ...]


def coalesce_ranges(
    ranges: Sequence[tuple[int, int]],
    *,
    max_gap_bytes: int = DEFAULT_MAX_GAP_BYTES,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> list[CoalescedRange]:
    """Merge ``(offset, size)`` ranges of one object into as few requests as the limits allow.

    Ranges are taken in offset order; a range joins the current request when the gap to it is
    at most ``max_gap_bytes`` (overlapping ranges always join) and the merged request stays
    within ``max_request_bytes`` (a single larger range still gets its own request). Empty
    ranges get no request (``members`` of no result mentions them).

    Raises:
        ValueError: a negative offset or size.
    """
    order = []
    for position, (offset, size) in enumerate(ranges):
        if offset < 0 or size < 0:
            raise ArgumentError(f"range {position} is ({offset}, {size}); offsets and sizes must be >= 0")
        if size:
            order.append((offset, offset + size, position))
    order.sort()
    requests: list[CoalescedRange] = []
    start = end = -1
    members: list[int] = []
    for offset, stop, position in order:
        merged_end = max(end, stop)
        if members and offset - end <= max_gap_bytes and merged_end - start <= max_request_bytes:
            end = merged_end
            members.append(position)
            continue
        if members:
            requests.append(CoalescedRange(start, end - start, tuple(members)))
        start, end, members = offset, stop, [position]
    if members:
        requests.append(CoalescedRange(start, end - start, tuple(members)))
    return requests
