"""The values a source format speaks in (``packer.source.base``'s protocol and table): an
episode's record, a file of the pack's ``meta/``, and a format's row."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("lerobot_shards.packer")


@dataclass(frozen=True)
class EpisodeRecord:
    """What a source says of one episode, in the pack's terms.

    Attributes:
        length: its rows.
        dataset_from_index, dataset_to_index: its rows' global ``index`` range, half-open.
        tasks: its task strings, or None where the source does not list them (``episode_tasks``
            then takes them from the rows).
    """

    length: int
    dataset_from_index: int
    dataset_to_index: int
    tasks: tuple[str, ...] | None = None


@dataclass(frozen=True)
class MetadataFile:
    """A file of the pack's ``meta/`` (LeRobot v3's layout): ``rel`` under the pack's root, the
    most bytes it may hold, and its content: a source file copied as it is (``path``), or bytes
    the format made (``data``: a format whose own metadata is not v3's)."""

    rel: str
    bound: int
    path: Path | None = None
    data: bytes | None = None


@dataclass(frozen=True)
class SourceFormat:
    """A row of ``SOURCE_FORMATS``: a format's name, how to tell a root holds it (a local root,
    or a listing of a remote one's metadata folder), which of its metadata files staging fetches
    (``metadata_bound``: the most bytes each may hold, None for a file it does not read), and how
    to open a local root of it."""

    name: str
    detect: Callable[[Path], bool]
    detect_listing: Callable[[Sequence[str]], bool]
    metadata_bound: Callable[[str], int | None]
    open: Callable[..., Any]  # (root, *, follow_symlinks) -> Source


def episodes_with_unknown_tasks(episodes: Mapping[int, EpisodeRecord], known: Iterable[str], tasks_file: str) -> list[int]:
    """The episodes listing a task ``tasks_file`` lacks (warned once, naming up to ten; they are
    packed anyway, as LeRobot reads them)."""
    known = set(known)
    bad = [e for e, record in episodes.items() if any(t not in known for t in record.tasks or ())]
    if bad:
        log.warning("episodes %s list tasks missing from %s; packing them anyway", bad[:10], tasks_file)
    return bad


__all__ = ["EpisodeRecord", "MetadataFile", "SourceFormat", "episodes_with_unknown_tasks"]
