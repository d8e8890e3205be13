"""LeRobot v2.1, read directly: a data parquet and an mp4 per episode and camera
(``data/chunk-000/episode_000007.parquet``, ``videos/chunk-000/<camera>/episode_000007.mp4``),
its episodes in ``meta/episodes.jsonl``, tasks in ``meta/tasks.jsonl``, per-episode statistics in
``meta/episodes_stats.jsonl``. Much of the Hub's community data is still v2.1.

LeRobot 0.6.1 reads v2.1 only after its converter (``convert_dataset_v21_to_v30``) rewrites it:
rows concatenated with every value kept, videos concatenated by stream copy, ``meta/`` made v3's
(``dataset_from_index`` running row counts, ``stats.json`` aggregated from the per-episode
statistics). A pack of a v2.1 root gives the samples LeRobot gives on that converted copy, without
the rewrite: each episode's mp4 is stream-copied as it is (nothing concatenated), its rows read
as LeRobot reads them (``rows.RowReader``), row ``j``'s frame is the one at ``timestamp_j`` in the
episode's own file, and the pack's ``meta/`` is what the converter would write
(``V21Metadata.pack_files``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lerobot_shards.core.format import INFO_PATH, META_DIR, sha256_hex
from lerobot_shards.core.format.fields import canonical_json
from lerobot_shards.core.format.limits import MAX_DATASET_MEMBERS, SOURCE_SAMPLES_SLACK
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.cameras import CameraProbes
from lerobot_shards.packer.source.files import SourceRoot, parsed_once, sha256_regular
from lerobot_shards.packer.source.lerobot import unused_files
from lerobot_shards.packer.source.lerobot_layout import LeRobotLayout
from lerobot_shards.packer.source.lerobot_v21_metadata import EPISODES_JSONL, TASKS_JSONL, V21Metadata, metadata_bound
from lerobot_shards.packer.source.records import EpisodeRecord, MetadataFile, SourceFormat
from lerobot_shards.packer.source.rows import RowReader
from lerobot_shards.packer.source.video import VideoLocation, video_duration_s

log = logging.getLogger(__name__)


class LeRobotV21Source(LeRobotLayout):
    """A local LeRobot v2.1 dataset root (the ``Source`` interface, ``packer.source.base``).

    Raises (from the constructor):
        SourceError: a metadata file missing or malformed (names it and why), or more members
            than a pack may hold.
    """

    tasks_file = TASKS_JSONL

    def __init__(self, root: str | Path, *, follow_symlinks: bool = False):
        self._root = SourceRoot(root, follow_symlinks=follow_symlinks)
        self.root = self._root.root
        self.follow_symlinks = follow_symlinks
        self.meta = V21Metadata.read(self._root)
        self.info = self.meta.info
        self.fps: float = self.info.fps
        self.features = self.info.features
        self.video_keys: list[str] = self.features.video_keys
        self.depth = self.features.depth
        self.episodes: dict[int, EpisodeRecord] = self.meta.episodes
        members = len(self.episodes) * len(self.video_keys)
        if members > MAX_DATASET_MEMBERS:
            raise SourceError(
                f"{self.root}: {len(self.episodes)} episodes x {len(self.video_keys)} cameras = {members} members, "
                f"more than the {MAX_DATASET_MEMBERS} a packed dataset may hold; pack it in parts (--episodes)"
            )
        self._rows = RowReader(self.features, self.fps, self.episodes, self.meta.tasks, declared_in=self.root / INFO_PATH)
        self._cameras = CameraProbes(self.features)

    def lerobot_info(self) -> dict[str, Any]:
        """``info.json`` as LeRobot's converter writes it (``V21Metadata.converted_info``)."""
        return self.meta.converted_info()

    def known_tasks(self) -> list[str]:
        return list(self.meta.tasks.values())

    # -- metadata ---------------------------------------------------------------------------
    def metadata_files(self) -> list[MetadataFile]:
        """The pack's ``meta/``: LeRobot v3's files, made as the converter makes them."""
        return self.meta.pack_files()

    def unknown_metadata_files(self) -> list[str]:
        return [rel for rel in self._root.listing(META_DIR) if metadata_bound(rel) is None]

    # -- files ------------------------------------------------------------------------------
    def _rel(self, episode_index: int, video_key: str | None = None) -> str:
        chunk = episode_index // self.meta.chunks_size
        if video_key is None:
            return self.info.data_path.format(episode_chunk=chunk, episode_index=episode_index)
        assert self.info.video_path is not None  # checked when parsed: a dataset with videos has it
        return self.info.video_path.format(episode_chunk=chunk, video_key=video_key, episode_index=episode_index)

    def data_path(self, episode_index: int) -> Path:
        return self._root.file(self._rel(episode_index), what=f"data (episode {episode_index})")

    def video_file(self, episode_index: int, video_key: str) -> Path:
        return self._root.file(self._rel(episode_index, video_key), what=f"video (episode {episode_index}, camera {video_key})")

    def video_location(self, episode_index: int, video_key: str) -> VideoLocation:
        """The episode's own file, whole: from 0 to its stream's duration (what the converter
        records as the episode's window once it concatenates the files); ``length / fps`` for a
        file that is not there (reported missing where it is read)."""
        path = self.video_file(episode_index, video_key)
        end = _duration(path) if path.is_file() else self.episodes[episode_index].length / self.fps
        return VideoLocation(path, 0.0, end)

    def max_video_samples(self, episode_index: int, video_key: str) -> int:
        """Twice the frames of the file's duration, plus ``SOURCE_SAMPLES_SLACK``."""
        return int(2 * self.video_location(episode_index, video_key).to_timestamp * self.fps) + SOURCE_SAMPLES_SLACK

    # -- rows -------------------------------------------------------------------------------
    # -- what LeRobot reads otherwise -------------------------------------------------------
    def reading_notes(self) -> list[str]:
        """Where LeRobot (after its converter) reads this dataset otherwise than the pack, or
        cannot read it: the metadata's own notes (``V21Metadata.notes``), files no episode uses."""
        return self.meta.notes() + self._unused[0]

    def left_out(self) -> dict[str, int]:
        """See ``Source.left_out``: files no episode uses (a v2.1 file holds one episode's rows)."""
        return {"files": self._unused[1]} if self._unused[1] else {}

    @functools.cached_property
    def _unused(self) -> tuple[list[str], int]:
        data = {self.data_path(e) for e in self.episodes}
        videos = {self.video_file(e, k) for e in self.episodes for k in self.video_keys}
        return unused_files(self.root, (("data", ".parquet", data), ("videos", ".mp4", videos)))

    # -- the pack's record of the source ------------------------------------------------------
    def fingerprint(self, episodes: Sequence[int]) -> str:
        """SHA-256 over the relative path, size and SHA-256 of every metadata file v2.1 has, and
        the relative path and size of every data and video file the episodes read."""
        records = []
        for rel in self._root.listing(META_DIR):
            bound = metadata_bound(rel)
            if bound is not None:
                digest, size = sha256_regular(self._root.file(rel, what="metadata"), bound, rel)
                records.append([rel, size, digest])
        for rel in self.needed_files(episodes):
            path = self.root / rel
            records.append([rel.as_posix(), path.stat().st_size if path.is_file() else -1, None])
        return "sha256:" + sha256_hex(canonical_json(records))

    def estimated_episode_bytes(self, episode_index: int) -> int:
        """The episode's own files' sizes (checked to exist and open as video first).

        Raises:
            SourceError: a data or video file is missing or does not open.
        """
        total = self.data_path(episode_index).stat().st_size if self.data_path(episode_index).is_file() else 0
        for key in self.video_keys:
            path = self.video_file(episode_index, key)
            if not path.is_file():
                raise SourceError(f"{path}: missing (video of episode {episode_index}, camera {key})")
            try:
                video_duration_s(path)
            except SourceError as err:
                raise SourceError(f"episode {episode_index}, camera {key}: {err}") from None
            total += path.stat().st_size
        return total


def _duration(path: Path) -> float:
    """The file's video stream's duration, as LeRobot's converter reads it (``to_timestamp``)."""
    return video_duration_s(path)


def detect(root: Path) -> bool:
    """A local root holds LeRobot v2.1: its ``meta/episodes.jsonl``."""
    return (root / EPISODES_JSONL).is_file()


def detect_listing(listing: Sequence[str]) -> bool:
    """A remote root's ``meta/`` listing is v2.1's: it holds ``meta/episodes.jsonl``."""
    return EPISODES_JSONL in listing


def open_source(root: str | Path, *, follow_symlinks: bool = False) -> LeRobotV21Source:
    """A parsed ``LeRobotV21Source``, reused by the shards a (pool) process builds (``parsed_once``)."""
    meta = Path(root) / META_DIR
    files = [meta / name for name in ("info.json", "episodes.jsonl", "tasks.jsonl", "episodes_stats.jsonl", "stats.json")]
    return parsed_once(LeRobotV21Source, root, files, follow_symlinks=follow_symlinks)


FORMAT = SourceFormat("LeRobot v2.1", detect, detect_listing, metadata_bound, open_source)

__all__ = ["FORMAT", "LeRobotV21Source", "open_source"]
