"""What every LeRobot layout (v3, v2.1) does alike once its format has said where an episode's
rows and videos lie: rows read and checked as LeRobot reads them (``rows.RowReader``), cameras
probed (``cameras.CameraProbes``), tasks checked against the format's tasks file, the files an
episode selection needs. A format subclasses ``LeRobotLayout`` and supplies ``data_path``,
``video_file``, ``known_tasks`` and ``tasks_file``; everything else of the ``Source`` interface
is its own.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lerobot_shards.packer.source.cameras import CameraProbes, max_sample_bytes
from lerobot_shards.packer.source.files import SourceRoot
from lerobot_shards.packer.source.records import EpisodeRecord, episodes_with_unknown_tasks
from lerobot_shards.packer.source.rows import RowReader, SchemaDrift, first_episode_of

if TYPE_CHECKING:
    from lerobot_shards.core.format.features import Features


class LeRobotLayout(ABC):
    """The shared half of a LeRobot source (see the module). Subclasses set ``_root``, ``root``,
    ``info``, ``fps``, ``features``, ``video_keys``, ``episodes``, ``_rows`` and ``_cameras``
    in their constructor."""

    tasks_file: str  # the format's tasks file, relative to the root (named in messages)
    _root: SourceRoot
    root: Path
    info: Any
    fps: float
    features: Features
    video_keys: list[str]
    episodes: dict[int, EpisodeRecord]
    _rows: RowReader
    _cameras: CameraProbes

    @abstractmethod
    def data_path(self, episode_index: int) -> Path:
        """The episode's data parquet (checked to lie under the root)."""

    @abstractmethod
    def video_file(self, episode_index: int, video_key: str) -> Path:
        """The file holding the episode's frames of ``video_key`` (checked to lie under the root)."""

    @abstractmethod
    def known_tasks(self) -> Iterable[str]:
        """The task strings the format's tasks file holds."""

    def file(self, rel: str, *, what: str = "file", missing: str | None = None) -> Path:
        """``SourceRoot.file``: the local path of ``rel``, checked to lie under the root."""
        return self._root.file(rel, what=what, missing=missing)

    @property
    def episode_indices(self) -> list[int]:
        return list(self.episodes)

    def description(self) -> dict[str, Any]:
        return {"codebase_version": self.info.codebase_version}

    def check_tasks(self) -> list[int]:
        """Return episodes listing tasks the tasks file lacks (warned once, kept)."""
        return episodes_with_unknown_tasks(self.episodes, self.known_tasks(), self.tasks_file)

    def max_sample_bytes(self, video_key: str) -> int:
        return max_sample_bytes(self.features, video_key)

    def needed_files(self, episodes: Sequence[int]) -> list[Path]:
        """Every data and video file the given episodes read, relative to the root."""
        files = {self.data_path(e).relative_to(self.root) for e in episodes}
        files |= {self.video_file(e, key).relative_to(self.root) for e in episodes for key in self.video_keys}
        return sorted(files)

    # -- rows -------------------------------------------------------------------------------
    def episode_rows(self, episode_index: int, *, fill_missing: bool = False) -> pa.Table:
        """``RowReader.rows`` from the episode's data file (in v3 shared with other episodes)."""
        return self._rows.rows(episode_index, self.data_path(episode_index), fill_missing=fill_missing)

    def check_rows(self, episode_index: int, rows: pa.Table) -> None:
        self._rows.check_rows(episode_index, rows, self.data_path(episode_index), tasks_file=self.root / self.tasks_file)

    def episode_tasks(self, episode_index: int, rows: pa.Table) -> list[str]:
        return self._rows.episode_tasks(episode_index, rows, self.data_path(episode_index))

    def schema_drift(self, episodes: Sequence[int]) -> SchemaDrift:
        """The features declared against the columns of the data files the episodes live in
        (footers only); the cameras' files probed too (``camera_codecs``).

        Raises:
            SourceError: a data file is missing or unreadable, or a column not what it must be.
        """
        drift = self._rows.schema_drift(first_episode_of([(e, self.data_path(e)) for e in episodes]))
        self.camera_codecs(episodes)
        return drift

    def camera_codecs(self, episodes: Sequence[int]) -> dict[str, dict[str, Path]]:
        """See ``Source.camera_codecs`` (``CameraProbes``)."""
        return self._cameras.codecs(lambda key: (self.video_file(e, key) for e in episodes))


__all__ = ["LeRobotLayout"]
