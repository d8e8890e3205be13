"""What the packer reads from a dataset: the ``Source`` interface ``run/`` and ``shard/`` are
typed against, in the pack's own terms, and the table of source formats (the packer's seam).

A format owns its layout: which of its files to stage from a bucket or the Hub (and the most
bytes each may hold), how its metadata, rows and videos are read, and what ``meta/`` the pack
keeps for it (a pack's ``meta/`` is LeRobot v3's, whatever it was packed from: its readers and
LeRobot's own metadata loader read that). A new format is a module implementing ``Source`` and a
row of ``SOURCE_FORMATS`` (docs/ARCHITECTURE.md, "Where a change lands"). Planning, staging,
shard building and publishing see only what is below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from lerobot_shards.packer.source.lerobot import FORMAT as LEROBOT_V3
from lerobot_shards.packer.source.lerobot_v21 import FORMAT as LEROBOT_V21
from lerobot_shards.packer.source.records import EpisodeRecord, MetadataFile, SourceFormat

if TYPE_CHECKING:  # the interface costs no import of PyAV or pyarrow
    import pyarrow as pa

    from lerobot_shards.core.format.features import DepthQuantization, Features
    from lerobot_shards.packer.source.video import VideoLocation


class Source(Protocol):
    """A dataset the packer reads (a local root; buckets and the Hub are staged first).

    Attributes:
        root: the local root.
        fps: frames per second (29.97 stays a float).
        features: the dataset's features, parsed (``Features``); ``video_keys`` the cameras packed.
        depth: the depth cameras (video or image) and how their values are quantized.
        episodes: per episode index, its ``EpisodeRecord``.
    """

    root: Path
    fps: float
    features: Features
    video_keys: list[str]

    # Read-only in the protocol (a source may hold them as plain dicts).
    @property
    def depth(self) -> Mapping[str, DepthQuantization]: ...

    @property
    def episodes(self) -> Mapping[int, EpisodeRecord]: ...

    @property
    def episode_indices(self) -> list[int]:
        """Every episode, ascending."""
        ...

    def description(self) -> dict[str, Any]:
        """How the pack plan and manifest name what was read (``codebase_version``)."""
        ...

    def lerobot_info(self) -> dict[str, Any]:
        """The LeRobot v3 ``info.json`` object the pack's ``meta/info.json`` starts from (its
        features replaced by what the pack holds: ``packer.run.packed_info``)."""
        ...

    def metadata_files(self) -> Sequence[MetadataFile]:
        """The pack's ``meta/`` files (``info.json`` among them, rewritten by the packer), in
        path order; raises ``SourceError`` for a source file it must not read."""
        ...

    def unknown_metadata_files(self) -> Sequence[str]:
        """Files of the source's metadata the format does not read (left out of a pack, and said so)."""
        ...

    def episode_rows(self, episode_index: int, *, fill_missing: bool = False) -> pa.Table:
        """The episode's tabular rows, in frame order (bounded by what the rows may decode to);
        ``fill_missing``: rows missing from the record's length are filled (``--on-frame-mismatch pad``)."""
        ...

    def check_rows(self, episode_index: int, rows: pa.Table) -> None:
        """Raise ``SourceError`` unless ``rows`` is the episode's rows as its record says."""
        ...

    def episode_tasks(self, episode_index: int, rows: pa.Table) -> list[str]:
        """The episode's task strings (what the pack's episodes index keeps), given its rows."""
        ...

    def check_tasks(self) -> list[int]:
        """The episodes whose tasks the task list lacks (warned, packed); raise ``SourceError``
        unless the task list is well formed."""
        ...

    def camera_codecs(self, episodes: Sequence[int]) -> Mapping[str, Mapping[str, Path]]:
        """Per camera, the codecs its video files for ``episodes`` hold (``av1``, ``hevc``,
        ``h264`` or FFmpeg's name of another), each with one file that holds it."""
        ...

    def left_out(self) -> dict[str, int]:
        """What of the source no pack of it holds, counted (``{"rows": n, "files": n}``, zeros left
        out): rows no episode lists, files no episode uses. A pack records it
        (``manifest.source.left_out``) so that a corpus report says it, not only a log."""
        ...

    def reading_notes(self) -> list[str]:
        """Where LeRobot reads this source otherwise than the pack will, though both read it
        (each a sentence naming the file and what differs); ``check`` and ``pack`` say them."""
        ...

    def video_location(self, episode_index: int, video_key: str) -> VideoLocation:
        """Where the episode's video of a camera is: a file and a time window in it."""
        ...

    def video_file(self, episode_index: int, video_key: str) -> Path:
        """The file holding the episode's video of a camera, found without opening it."""
        ...

    def max_video_samples(self, episode_index: int, video_key: str) -> int:
        """The most samples that video file may hold (bounds what reading its tables costs)."""
        ...

    def max_sample_bytes(self, video_key: str) -> int:
        """The largest compressed frame a camera's videos may hold."""
        ...

    def estimated_episode_bytes(self, episode_index: int) -> int:
        """About what packing the episode reads (to balance shards)."""
        ...

    def fingerprint(self, episodes: Sequence[int]) -> str:
        """A digest of what those episodes' shards are built from (a changed source re-packs)."""
        ...

    def schema_drift(self, episodes: Sequence[int]) -> Any:
        """Columns the rows hold and the description does not (or the reverse), or a falsy value."""
        ...

    def needed_files(self, episodes: list[int]) -> list[Path]:
        """Every file (relative to the root) packing ``episodes`` reads beyond the metadata: what
        staging a bucket or Hub source fetches once the metadata is local."""
        ...


SOURCE_FORMATS: tuple[SourceFormat, ...] = (LEROBOT_V21, LEROBOT_V3)
"""The formats in the order they are tried: the most specific first; the last one also opens a
root no format detects, so its error names what the root lacks."""


def format_of(root: str | Path) -> SourceFormat:
    """The format of a local root: the first whose ``detect`` matches, else the last row."""
    path = Path(root)
    return next((f for f in SOURCE_FORMATS if f.detect(path)), SOURCE_FORMATS[-1])


def format_of_listing(listing: Sequence[str]) -> SourceFormat:
    """The format of a remote root from the listing of its ``meta/``: the first whose
    ``detect_listing`` matches, else the last row."""
    return next((f for f in SOURCE_FORMATS if f.detect_listing(listing)), SOURCE_FORMATS[-1])


def open_dataset_source(root: str | Path, *, follow_symlinks: bool = False) -> Source:
    """The ``Source`` over a local root, in its format (``format_of``).

    Raises:
        SourceError: the root is not a dataset the format can read (names the file and why).
    """
    return format_of(root).open(Path(root), follow_symlinks=follow_symlinks)


__all__ = [
    "SOURCE_FORMATS",
    "EpisodeRecord",
    "MetadataFile",
    "Source",
    "SourceFormat",
    "format_of",
    "format_of_listing",
    "open_dataset_source",
]
