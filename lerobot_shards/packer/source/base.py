"""What the packer reads from a dataset: the ``Source`` interface ``run/`` and ``shard/`` are
typed against, and the table of source formats (the packer's seam for new formats).

LeRobot v3 is the one format today (``lerobot_shards.packer.source.lerobot.LeRobotSource``). A new format
(RLDS/Open-X, say) is a module implementing ``Source`` and a row of ``SOURCE_FORMATS``: its
``detect`` says whether a local root holds that format, ``open`` parses it. Planning, shard
building and publishing see only the interface below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the interface costs no import of PyAV or pyarrow
    import pyarrow as pa

    from lerobot_shards.core.format.features import DepthQuantization, Features
    from lerobot_shards.core.format.lerobot_info import LeRobotInfo
    from lerobot_shards.packer.source.video import VideoLocation


class Source(Protocol):
    """A dataset the packer reads (a local root; buckets and the Hub are staged first).

    Attributes:
        root: the local root.
        info: the dataset's description as LeRobot's ``meta/info.json`` holds it, parsed
            (``LeRobotInfo``: a pack keeps the file): a new format describes itself in it.
        fps, features, video_keys: as in ``info`` (``features`` parsed: ``Features``);
            ``video_keys`` are the cameras packed.
        depth: the depth cameras (video or image) and how their values are quantized.
        episodes: per episode index, its record: ``length``, ``dataset_from_index``,
            ``dataset_to_index``, ``tasks`` (None where the source does not list them:
            ``episode_tasks`` then takes them from the rows).
    """

    root: Path
    info: LeRobotInfo
    fps: float
    features: Features
    video_keys: list[str]

    # Read-only in the protocol (a source may hold them as plain dicts).
    @property
    def depth(self) -> Mapping[str, DepthQuantization]: ...

    @property
    def episodes(self) -> Mapping[int, Mapping[str, Any]]: ...

    @property
    def episode_indices(self) -> list[int]:
        """Every episode, ascending."""
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

    def reading_notes(self) -> list[str]:
        """Where LeRobot reads this source otherwise than the pack will, though both read it
        (each a sentence naming the file and what differs); ``check`` and ``pack`` say them."""
        ...

    def video_location(self, episode_index: int, video_key: str) -> VideoLocation:
        """Where the episode's video of a camera is: a file and a time window in it."""
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

    def metadata_files(self) -> Sequence[tuple[str, Path, int]]:
        """The metadata files the pack keeps verbatim (``meta/...``): ``(path relative to the
        root, local path, the most bytes it may hold)``; raises ``SourceError`` for a file it
        must not read."""
        ...

    def unknown_metadata_files(self) -> Sequence[str]:
        """Files under ``meta/`` the format does not read (left out of a pack, and said so)."""
        ...

    def needed_files(self, episodes: list[int]) -> list[Path]:
        """Every file (relative to the root) packing ``episodes`` reads beyond the metadata: what
        staging a bucket or Hub source fetches once the metadata is local."""
        ...


@dataclass(frozen=True)
class SourceFormat:
    """A row of ``SOURCE_FORMATS``: a format's name, how to tell a root holds it, how to open it."""

    name: str
    detect: Callable[[Path], bool]
    open: Callable[..., Source]


def _lerobot_v3(root: Path) -> bool:
    return (root / "meta" / "info.json").is_file()


def _open_lerobot(root: Path, *, follow_symlinks: bool = False) -> Source:
    from lerobot_shards.packer.source.lerobot import open_source

    return open_source(root, follow_symlinks=follow_symlinks)


SOURCE_FORMATS: tuple[SourceFormat, ...] = (SourceFormat("LeRobot v3", _lerobot_v3, _open_lerobot),)


def open_dataset_source(root: str | Path, *, follow_symlinks: bool = False) -> Source:
    """The ``Source`` over a local root, in the first format whose ``detect`` matches; when none
    does, the first format opens it (its error then names what the root lacks).

    Raises:
        SourceError: the root is not a dataset the format can read (names the file and why).
    """
    path = Path(root)
    chosen = next((f for f in SOURCE_FORMATS if f.detect(path)), SOURCE_FORMATS[0])
    return chosen.open(path, follow_symlinks=follow_symlinks)
