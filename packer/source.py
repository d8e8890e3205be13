"""Reading a LeRobot v3.0 dataset root: metadata, per-episode rows and video locations.

The packer works on a local root; remote roots (buckets, the Hub) are staged locally first
by ``packer.remote_source`` and ``packer.hub_source`` with only the files the selected
episodes need.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

log = logging.getLogger(__name__)

SUPPORTED_CODEBASE_VERSION = "v3.0"
REQUIRED_EPISODE_COLUMNS = (
    "episode_index",
    "tasks",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
)


class SourceError(ValueError):
    """The source dataset is missing files, has an unsupported version or is inconsistent."""


@dataclass(frozen=True)
class VideoLocation:
    """Where one episode's frames live in LeRobot's concatenated per-camera mp4."""

    path: Path
    from_timestamp: float
    to_timestamp: float


class LeRobotSource:
    """A local LeRobot v3.0 dataset root.

    Raises (from the constructor):
        SourceError: missing ``meta/info.json``/episodes/tasks, an unsupported
            ``codebase_version`` (v2.x must be converted with LeRobot first), or episodes
            metadata lacking required columns.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)
        info_path = self.root / "meta" / "info.json"
        if not info_path.is_file():
            raise SourceError(f"{info_path}: missing; is {self.root} a LeRobot dataset root?")
        try:
            self.info = json.loads(info_path.read_text())
        except json.JSONDecodeError as err:
            raise SourceError(f"{info_path}: not valid JSON ({err})") from None
        version = self.info.get("codebase_version")
        if version != SUPPORTED_CODEBASE_VERSION:
            hint = ""
            if isinstance(version, str) and version.startswith("v2"):
                hint = (
                    " Convert it to v3.0 first with LeRobot's converter: "
                    "python -m lerobot.datasets.v30.convert_dataset_v21_to_v30 --repo-id=ORG/NAME"
                )
            raise SourceError(
                f"{info_path}: codebase_version {version!r} is not supported (expected "
                f"{SUPPORTED_CODEBASE_VERSION!r}).{hint}"
            )
        for key in ("fps", "features", "data_path"):
            if key not in self.info:
                raise SourceError(f"{info_path}: missing key {key!r}")
        self.fps = int(self.info["fps"])
        self.features: dict = self.info["features"]
        self.video_keys = [k for k, f in self.features.items() if f.get("dtype") == "video"]
        if self.video_keys and not self.info.get("video_path"):
            raise SourceError(f"{info_path}: video features {self.video_keys} but no video_path")
        self.episodes = self._load_episodes()
        self.tasks = self._load_tasks()
        self._data_cache: tuple[Path, pa.Table, dict[int, tuple[int, int]]] | None = None

    # -- metadata ---------------------------------------------------------------------------
    def _load_episodes(self) -> dict[int, dict]:
        files = sorted((self.root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
        if not files:
            raise SourceError(f"{self.root / 'meta' / 'episodes'}: no episodes metadata parquet found")
        rows: dict[int, dict] = {}
        for path in files:
            try:
                table = pq.read_table(path)
            except Exception as err:  # pyarrow raises several types for corrupt files
                raise SourceError(f"{path}: cannot read episodes metadata ({err})") from None
            missing = [c for c in REQUIRED_EPISODE_COLUMNS if c not in table.column_names]
            missing += [
                f"videos/{k}/{f}"
                for k in self.video_keys
                for f in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
                if f"videos/{k}/{f}" not in table.column_names
            ]
            if missing:
                raise SourceError(f"{path}: episodes metadata lacks columns {missing}")
            wanted = [c for c in table.column_names if not c.startswith("stats/")]
            for row in table.select(wanted).to_pylist():
                rows[int(row["episode_index"])] = row
        return dict(sorted(rows.items()))

    def _load_tasks(self) -> pd.DataFrame:
        path = self.root / "meta" / "tasks.parquet"
        if not path.is_file():
            raise SourceError(f"{path}: missing")
        return pd.read_parquet(path)

    @property
    def episode_indices(self) -> list[int]:
        return list(self.episodes)

    def check_tasks(self) -> list[int]:
        """Return episodes whose tasks are missing from tasks.parquet (warned once, kept)."""
        known = set(self.tasks.index)
        bad = [e for e, row in self.episodes.items() if any(t not in known for t in row["tasks"])]
        if bad:
            log.warning("episodes %s list tasks missing from meta/tasks.parquet; packing them anyway", bad[:10])
        return bad

    # -- files ------------------------------------------------------------------------------
    def data_path(self, episode_index: int) -> Path:
        row = self.episodes[episode_index]
        return self.root / self.info["data_path"].format(
            chunk_index=row["data/chunk_index"], file_index=row["data/file_index"]
        )

    def video_location(self, episode_index: int, video_key: str) -> VideoLocation:
        row = self.episodes[episode_index]
        path = self.root / self.info["video_path"].format(
            video_key=video_key,
            chunk_index=row[f"videos/{video_key}/chunk_index"],
            file_index=row[f"videos/{video_key}/file_index"],
        )
        return VideoLocation(path, float(row[f"videos/{video_key}/from_timestamp"]), float(row[f"videos/{video_key}/to_timestamp"]))

    def needed_files(self, episodes: list[int]) -> list[Path]:
        """Every data and video file the given episodes read, relative to the root."""
        files = {self.data_path(e).relative_to(self.root) for e in episodes}
        for e in episodes:
            for key in self.video_keys:
                files.add(self.video_location(e, key).path.relative_to(self.root))
        return sorted(files)

    def episode_rows(self, episode_index: int) -> pa.Table:
        """The episode's rows from its data parquet, all columns with their source types.

        Raises:
            SourceError: the data file is missing/unreadable or holds a different number of
                rows for the episode than its metadata length.
        """
        path = self.data_path(episode_index)
        if self._data_cache is None or self._data_cache[0] != path:
            if not path.is_file():
                raise SourceError(f"{path}: missing (data file of episode {episode_index})")
            try:
                table = pq.read_table(path)
            except Exception as err:
                raise SourceError(f"{path}: cannot read data parquet ({err})") from None
            try:
                spans = _episode_spans(table)
            except SourceError as err:
                raise SourceError(f"{path}: {err}") from None
            self._data_cache = (path, table, spans)
        _, table, spans = self._data_cache
        # LeRobot writes each episode's rows contiguously: slice instead of filtering per
        # episode (a filter per episode is quadratic in the rows of a 100 MB data file).
        start, count = spans.get(episode_index, (0, 0))
        rows = table.slice(start, count)
        expected = int(self.episodes[episode_index]["length"])
        if rows.num_rows != expected:
            raise SourceError(
                f"{path}: episode {episode_index} has {rows.num_rows} rows, metadata says length {expected}"
            )
        if rows.num_rows and rows["frame_index"].to_pylist() != list(range(expected)):
            rows = rows.sort_by("frame_index")
        return rows

    def schema_drift(self, episodes: list[int]) -> SchemaDrift:
        """Compare the tabular features info.json declares with the columns of the data files
        the given episodes live in (parquet footers only).

        Raises:
            SourceError: a data file is missing or is not a readable parquet file.
        """
        # Image features (dtype "image") live in the data parquet too; only videos do not.
        declared = [k for k, f in self.features.items() if f.get("dtype") != "video"]
        first_episode_of: dict[Path, int] = {}
        for episode in episodes:
            first_episode_of.setdefault(self.data_path(episode), episode)
        present: list[str] = []
        for path, episode in sorted(first_episode_of.items()):
            for name in _parquet_schema(path, episode).names:
                if name not in present:
                    present.append(name)
        return SchemaDrift(
            only_in_info=[k for k in declared if k not in present],
            only_in_parquet=[c for c in present if c not in declared],
            columns=present,
        )

    def estimated_episode_bytes(self, episode_index: int) -> int:
        """Estimate the packed bytes of an episode from its share of its source files.

        It also checks, before anything is written, that the episode's files exist and open
        (parquet footer, video header), so a bad source fails naming the file and episode.

        Raises:
            SourceError: a data or video file is missing, truncated or not what it claims.
        """
        row = self.episodes[episode_index]
        total = 0
        data_path = self.data_path(episode_index)
        # Tabular rows are small; a per-frame share of the data file is close enough.
        rows = _parquet_rows(data_path, episode_index)
        total += data_path.stat().st_size * int(row["length"]) // max(rows, 1)
        for key in self.video_keys:
            location = self.video_location(episode_index, key)
            if not location.path.is_file():
                raise SourceError(f"{location.path}: missing (video of episode {episode_index}, camera {key})")
            try:
                duration = _file_duration(location.path)
            except SourceError as err:
                raise SourceError(f"episode {episode_index}, camera {key}: {err}") from None
            share = (location.to_timestamp - location.from_timestamp) / duration if duration > 0 else 1.0
            total += int(location.path.stat().st_size * min(max(share, 0.0), 1.0))
        return total


def _episode_spans(table: pa.Table) -> dict[int, tuple[int, int]]:
    """{episode: (first row, rows)}; falls back to sorting when episodes are interleaved."""
    import numpy as np

    episodes = table["episode_index"].to_numpy()
    if len(episodes) == 0:
        return {}
    change = np.flatnonzero(np.diff(episodes)) + 1
    starts = np.concatenate([[0], change])
    counts = np.diff(np.concatenate([starts, [len(episodes)]]))
    values = episodes[starts]
    if len(set(values.tolist())) != len(values):
        raise SourceError("episode rows are interleaved in a data file; LeRobot v3 writes them contiguously")
    return {int(v): (int(a), int(c)) for v, a, c in zip(values, starts, counts)}


@dataclass(frozen=True)
class SchemaDrift:
    """Tabular features of info.json vs the columns the data parquet actually holds."""

    only_in_info: list[str]
    only_in_parquet: list[str]
    columns: list[str]

    def __bool__(self) -> bool:
        return bool(self.only_in_info or self.only_in_parquet)


# Footer reads and video probes, keyed by (path, size, mtime) so an edited file is re-read.
_ROWS_CACHE: dict[tuple, int] = {}
_SCHEMA_CACHE: dict[tuple, pa.Schema] = {}
_DURATION_CACHE: dict[tuple, float] = {}


def _file_key(path: Path) -> tuple:
    stat = path.stat()
    return (str(path), stat.st_size, stat.st_mtime_ns)


def _parquet_metadata(path: Path, episode: int) -> tuple[tuple, pq.FileMetaData]:
    if not path.is_file():
        raise SourceError(f"{path}: missing (data file of episode {episode})")
    key = _file_key(path)
    try:
        return key, pq.read_metadata(path)
    except Exception as err:  # pyarrow raises ArrowInvalid/OSError for truncated or foreign files
        raise SourceError(f"{path}: not a readable parquet file, truncated? (data file of episode {episode}: {err})") from None


def _parquet_rows(path: Path, episode: int) -> int:
    key = _file_key(path) if path.is_file() else None
    if key not in _ROWS_CACHE:
        key, metadata = _parquet_metadata(path, episode)
        _ROWS_CACHE[key] = metadata.num_rows
        _SCHEMA_CACHE[key] = metadata.schema.to_arrow_schema()
    return _ROWS_CACHE[key]


def _parquet_schema(path: Path, episode: int) -> pa.Schema:
    _parquet_rows(path, episode)
    return _SCHEMA_CACHE[_file_key(path)]


def _file_duration(path: Path) -> float:
    key = _file_key(path)
    if key not in _DURATION_CACHE:
        import av

        try:
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                if stream.duration is not None:
                    _DURATION_CACHE[key] = float(stream.duration * stream.time_base)
                else:
                    _DURATION_CACHE[key] = float((container.duration or 0) / av.time_base)
        except Exception as err:
            raise SourceError(f"{path}: cannot open video ({err})") from None
    return _DURATION_CACHE[key]
