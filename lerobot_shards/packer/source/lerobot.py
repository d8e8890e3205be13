"""LeRobot v3.0, the packer's first source format: a local root's metadata
(``lerobot_v3_metadata``), rows (``rows.RowReader``: episodes share data files) and videos
(episodes share each camera's files, each a time window in one), what LeRobot reads otherwise
than a pack will (``reading_notes``), and the format's row of ``SOURCE_FORMATS`` (``FORMAT``).

The packer works on a local root; remote roots (buckets, the Hub) are staged locally first with
only the files the selected episodes need (``metadata_bound`` says which metadata files).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.compute as _compute

from lerobot_shards.core.format import INFO_PATH, META_DIR, STATS_PATH, TASKS_PATH, sha256_hex
from lerobot_shards.core.format.fields import canonical_json
from lerobot_shards.core.format.lerobot_reading import stats_problems
from lerobot_shards.core.format.limits import (
    MAX_DATASET_FRAMES,
    MAX_DATASET_MEMBERS,
    SOURCE_SAMPLES_SLACK,
)
from lerobot_shards.packer.errors import SourceError
from lerobot_shards.packer.source.cameras import CameraProbes
from lerobot_shards.packer.source.files import (
    SourceRoot,
    check_file_size,
    parquet_rows,
    parsed_once,
    read_source_file,
    read_source_table,
    sha256_regular,
)
from lerobot_shards.packer.source.lerobot_layout import LeRobotLayout
from lerobot_shards.packer.source.lerobot_v3_metadata import EPISODES_GLOB, V3Metadata, metadata_bound
from lerobot_shards.packer.source.records import EpisodeRecord, MetadataFile, SourceFormat
from lerobot_shards.packer.source.rows import RowReader, SchemaDrift
from lerobot_shards.packer.source.video import VideoLocation, video_duration_s

# pyarrow.compute makes its functions at import; a static checker cannot see them.
pc: Any = _compute

log = logging.getLogger(__name__)


class LeRobotSource(LeRobotLayout):
    """A local LeRobot v3.0 dataset root (the ``Source`` interface, ``packer.source.base``).

    Raises (from the constructor):
        SourceError: missing ``meta/info.json``/episodes/tasks, an unsupported
            ``codebase_version``, or episodes metadata lacking required columns.
    """

    tasks_file = TASKS_PATH

    def __init__(self, root: str | Path, *, follow_symlinks: bool = False):
        self._root = SourceRoot(root, follow_symlinks=follow_symlinks)
        self.root = self._root.root
        self.follow_symlinks = follow_symlinks
        if (self.root / "manifest.json").is_file() and (self.root / "shards").is_dir():
            # A pack keeps its source's meta/ (info.json included): without this it would fail
            # later on data files it does not have.
            raise SourceError(
                f"{self.root} is a packed dataset (manifest.json, shards/), not a LeRobot v3 dataset: "
                "pack its source, or read it with PackedDataset / `lerobot-shards info`"
            )
        self.meta = V3Metadata.read(self._root)
        self.info = self.meta.info
        self.fps: float = self.info.fps
        self.features = self.info.features
        self.video_keys: list[str] = self.features.video_keys
        self.image_keys: list[str] = self.features.image_keys
        self.depth = self.features.depth
        self.episodes: dict[int, EpisodeRecord] = self.meta.episodes
        members = len(self.episodes) * len(self.video_keys)
        if members > MAX_DATASET_MEMBERS:  # a pack of it would be refused by every reader
            raise SourceError(
                f"{self.root}: {len(self.episodes)} episodes x {len(self.video_keys)} cameras = {members} members, "
                f"more than the {MAX_DATASET_MEMBERS} a packed dataset may hold; pack it in parts (--episodes)"
            )
        self.tasks = self.meta.tasks
        self.task_indices = frozenset(self.tasks.names)
        self._rows = RowReader(self.features, self.fps, self.episodes, self.tasks.names, declared_in=self.root / INFO_PATH)
        self._cameras = CameraProbes(self.features)
        self._video_file_ends: dict[str, dict[str, float]] = {}

    def lerobot_info(self) -> dict[str, Any]:
        return self.info.raw

    def known_tasks(self) -> list[str]:
        return list(self.tasks.names.values())

    # -- metadata ---------------------------------------------------------------------------
    def metadata_files(self) -> list[MetadataFile]:
        """The metadata files LeRobot v3 reads (``metadata_bound``), in path order, for the pack
        to copy (``info.json`` is then rewritten as the pack's own); ``unknown_metadata_files``
        lists what it leaves out. Only regular files under the root: a symbolic link (unless
        opened with ``follow_symlinks``) raises ``SourceError`` instead of publishing what it
        points to."""
        out = []
        for rel in self._root.listing(META_DIR):
            bound = metadata_bound(rel)
            if bound is not None:
                path = self.file(rel, what="metadata")
                check_file_size(path, bound, "metadata")
                out.append(MetadataFile(rel, bound, path=path))
        return out

    def unknown_metadata_files(self) -> list[str]:
        """Files under ``meta/`` that LeRobot v3 does not read: not copied into a pack."""
        return [rel for rel in self._root.listing(META_DIR) if metadata_bound(rel) is None]

    # -- files ------------------------------------------------------------------------------
    def data_path(self, episode_index: int) -> Path:
        row = self.meta.records[episode_index]
        rel = self.info.data_file(row["data/chunk_index"], row["data/file_index"])
        return self.file(rel, what=f"data (episode {episode_index})")

    def _video_rel(self, row: dict, video_key: str) -> str:
        return self.info.video_file(video_key, row[f"videos/{video_key}/chunk_index"], row[f"videos/{video_key}/file_index"])

    def video_file(self, episode_index: int, video_key: str) -> Path:
        return self.video_location(episode_index, video_key).path

    def video_location(self, episode_index: int, video_key: str) -> VideoLocation:
        row = self.meta.records[episode_index]
        path = self.file(self._video_rel(row, video_key), what=f"video (episode {episode_index}, camera {video_key})")
        return VideoLocation(
            path, float(row[f"videos/{video_key}/from_timestamp"]), float(row[f"videos/{video_key}/to_timestamp"])
        )

    def max_video_samples(self, episode_index: int, video_key: str) -> int:
        """The most samples the camera's video file holding ``episode_index`` may hold: twice
        the frames up to the last second any of its episodes uses, plus
        ``SOURCE_SAMPLES_SLACK`` (what a copy-mode cut reads of its sample tables is bounded by
        this, not by what the file claims)."""
        lasts = self._video_file_ends.get(video_key)
        if lasts is None:  # one pass over the episodes per camera, no file system calls
            lasts = self._video_file_ends[video_key] = {}
            for row in self.meta.records.values():
                rel = self._video_rel(row, video_key)
                lasts[rel] = max(lasts.get(rel, 0.0), float(row[f"videos/{video_key}/to_timestamp"]))
        return int(2 * lasts[self._video_rel(self.meta.records[episode_index], video_key)] * self.fps) + SOURCE_SAMPLES_SLACK

    # -- rows -------------------------------------------------------------------------------
    # -- what LeRobot reads otherwise -------------------------------------------------------
    def reading_notes(self) -> list[str]:
        """See ``Source.reading_notes``."""
        notes = []
        if self.tasks.layout.lerobot_task_is_row_number:
            notes.append(
                f"{self.root / TASKS_PATH}: written without a pandas index (plain pyarrow), so LeRobot 0.6.1 gives "
                "each sample's task as its row number (0, 1, ...); the pack gives the task string the file holds"
            )
        notes += self._left_out[0]
        stats = self._stats_problems()
        if stats:
            listed = "; ".join(f"{key}: {what}" for key, what in list(stats.items())[:8])
            more = f" and {len(stats) - 8} more features" if len(stats) > 8 else ""
            notes.append(
                f"{self.root / STATS_PATH}: {listed}{more}. LeRobot reads these as they are and normalises with them "
                "(ds.meta.stats); a mixture leaves them out of its aggregate, saying so"
            )
        return notes

    def _stats_problems(self) -> dict[str, str]:
        """``stats_problems`` of ``meta/stats.json`` (none when the source has no stats file).

        Raises:
            SourceError: the file is larger than its bound or not a JSON object.
        """
        value = self._root.stats_json()
        return stats_problems(value) if value is not None else {}

    @functools.cached_property
    def _listed_rows(self) -> tuple[dict[Path, int], dict[Path, int]]:
        """Each data file's rows the episodes list, and the first episode listing it."""
        listed: dict[Path, int] = {}
        first: dict[Path, int] = {}
        for episode, record in self.episodes.items():
            path = self.data_path(episode)
            listed[path] = listed.get(path, 0) + record.length
            first.setdefault(path, episode)
        return listed, first

    def left_out(self) -> dict[str, int]:
        """See ``Source.left_out``: rows no episode lists, files no episode uses."""
        return self._left_out[1]

    @functools.cached_property
    def _left_out(self) -> tuple[list[str], dict[str, int]]:
        """The notes on what is not packed, and its counts (``left_out``): both from one pass."""
        rows_said, rows = self._orphan_rows()
        files_said, files = self._unused_files()
        return rows_said + files_said, {k: v for k, v in (("rows", rows), ("files", files)) if v}

    def _orphan_rows(self) -> tuple[list[str], int]:
        """Rows of the data files that no episode of ``meta/episodes`` lists (counted from each
        file's footer against the lengths of the episodes it holds; named by reading its
        ``episode_index`` column only when they differ). None of them is packed; LeRobot 0.6.1
        cannot read such rows either (its ``__getitem__`` finds no episode record for them)."""
        listed, first = self._listed_rows
        notes, orphans = [], 0
        for path, rows in sorted(listed.items()):
            if not path.is_file():
                continue  # reported where it is read (or not staged: a bucket source fetches what it packs)
            held = parquet_rows(path, first[path])
            if held <= rows:
                continue  # fewer rows than listed is what --on-frame-mismatch decides, per episode
            orphans += held - rows
            table = read_source_table(
                read_source_file(path, "data parquet"),
                path,
                "data parquet",
                max_rows=MAX_DATASET_FRAMES,
                columns=["episode_index"],
            )
            counts = pc.value_counts(table["episode_index"]).to_pylist()
            unlisted = sorted(
                (int(c["values"]), int(c["counts"]))
                for c in counts
                if c["values"] is not None and int(c["values"]) not in self.episodes
            )
            named = ", ".join(f"{e} ({n} rows)" for e, n in unlisted[:10]) + (
                f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else ""
            )
            notes.append(
                f"{path}: {held - rows} of its {held} rows belong to episodes meta/episodes does not list"
                + (f" ({named})" if named else "")
                + ": they are not packed (LeRobot 0.6.1 cannot read them either: no episode record)"
            )
        return notes, orphans

    def _unused_files(self) -> tuple[list[str], int]:
        """Data and video files no episode of ``meta/episodes`` uses (not packed)."""
        videos = {self.video_location(e, k).path for e in self.episodes for k in self.video_keys}
        return unused_files(self.root, (("data", ".parquet", set(self._listed_rows[0])), ("videos", ".mp4", videos)))

    # -- the pack's record of the source ------------------------------------------------------
    def fingerprint(self, episodes: Sequence[int]) -> str:
        """Identify the source content a pack of ``episodes`` reads, for its plan.

        SHA-256 over the relative path, size and SHA-256 of every ``meta/`` file (which holds
        per-episode statistics of every feature, so other values give another digest) and the
        relative path and size of every data and video file the episodes read. Two copies of
        one dataset at different paths agree; a resume from a different dataset does not.
        """
        records = []
        for meta in self.metadata_files():  # what the pack copies: the files LeRobot reads
            assert meta.path is not None  # a v3 source's metadata files are its own
            digest, size = sha256_regular(meta.path, meta.bound, meta.rel)
            records.append([meta.rel, size, digest])
        for rel in self.needed_files(episodes):
            path = self.root / rel
            records.append([rel.as_posix(), path.stat().st_size if path.is_file() else -1, None])
        return "sha256:" + sha256_hex(canonical_json(records))

    def estimated_episode_bytes(self, episode_index: int) -> int:
        """Estimate the packed bytes of an episode from its share of its source files.

        It also checks, before anything is written, that the episode's files exist and open
        (parquet footer, video header), so a bad source fails naming the file and episode.

        Raises:
            SourceError: a data or video file is missing, truncated or not what it claims.
        """
        data_path = self.data_path(episode_index)
        # Tabular rows are small; a per-frame share of the data file is close enough.
        rows = parquet_rows(data_path, episode_index)
        total = data_path.stat().st_size * self.episodes[episode_index].length // max(rows, 1)
        for key in self.video_keys:
            location = self.video_location(episode_index, key)
            if not location.path.is_file():
                raise SourceError(f"{location.path}: missing (video of episode {episode_index}, camera {key})")
            try:
                duration = video_duration_s(location.path)
            except SourceError as err:
                raise SourceError(f"episode {episode_index}, camera {key}: {err}") from None
            share = (location.to_timestamp - location.from_timestamp) / duration if duration > 0 else 1.0
            total += int(location.path.stat().st_size * min(max(share, 0.0), 1.0))
        return total


def unused_files(root: Path, folders: Sequence[tuple[str, str, set[Path]]]) -> tuple[list[str], int]:
    """For each ``(folder, suffix, used)``, a note naming the files of that suffix under
    ``root/folder`` that are not in ``used`` (none of them is packed); and how many they are."""
    notes, count = [], 0
    for folder, suffix, used in folders:
        present = sorted(p for p in (root / folder).rglob(f"*{suffix}") if p.is_file()) if (root / folder).is_dir() else []
        unused = [p.relative_to(root).as_posix() for p in present if p not in used]
        count += len(unused)
        if unused:
            notes.append(
                f"{root / folder}: {len(unused)} file(s) no episode of meta/episodes uses, not packed: "
                + ", ".join(unused[:5])
                + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
            )
    return notes, count


def detect(root: Path) -> bool:
    """A local root holds LeRobot v3: its ``meta/info.json`` and no v2.1 episodes list."""
    return (root / INFO_PATH).is_file() and not (root / META_DIR / "episodes.jsonl").is_file()


def detect_listing(listing: Sequence[str]) -> bool:
    """A remote root's ``meta/`` listing is LeRobot v3's: episodes metadata parquet files."""
    return any(metadata_bound(rel) is not None and rel.startswith("meta/episodes/") for rel in listing)


def open_source(root: str | Path, *, follow_symlinks: bool = False) -> LeRobotSource:
    """A parsed ``LeRobotSource``, reused by the shards a (pool) process builds (``parsed_once``)."""
    meta = Path(root) / META_DIR
    files = [meta / "info.json", meta / "tasks.parquet", *sorted((meta / "episodes").glob(EPISODES_GLOB))]
    return parsed_once(LeRobotSource, root, files, follow_symlinks=follow_symlinks)


FORMAT = SourceFormat("LeRobot v3", detect, detect_listing, metadata_bound, open_source)

__all__ = ["FORMAT", "LeRobotSource", "SchemaDrift", "metadata_bound", "open_source", "unused_files"]
