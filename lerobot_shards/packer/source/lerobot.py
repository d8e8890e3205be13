"""Reading a LeRobot v3.0 dataset root: metadata, per-episode rows and video locations.

The packer works on a local root; remote roots (buckets, the Hub) are staged locally first
by ``lerobot_shards.packer.source.bucket`` and ``lerobot_shards.packer.source.hub`` with only the files the selected
episodes need.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import pyarrow as pa
import pyarrow.compute as _compute

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import (
    INFO_PATH,
    META_DIR,
    STATS_PATH,
    TASKS_PATH,
    image_column_bytes,
    open_image,
    sha256_hex,
)
from lerobot_shards.core.format.features import (
    LANGUAGE_COLUMNS,
    Features,
    check_language_type,
    image_column_type_ok,
    is_depth_pixel_format,
    value_column_type_ok,
)
from lerobot_shards.core.format.fields import canonical_json, load_json
from lerobot_shards.core.format.layout import source_relative_path
from lerobot_shards.core.format.lerobot_reading import (
    LeRobotTasks,
    cast_as_declared,
    declared_leaf_type,
    read_tasks,
    stats_problems,
)
from lerobot_shards.core.format.limits import (
    MAX_DATASET_EPISODES,
    MAX_DATASET_FRAMES,
    MAX_DATASET_MEMBERS,
    MAX_EPISODE_TASKS,
    MAX_FRAME_PIXELS,
    MAX_INDEX_FILE_BYTES,
    MAX_JSON_DEPTH,
    MAX_RECORD_BYTES,
    MAX_SAMPLE_RAW_MULTIPLE,
    MAX_STATS_BYTES,
    MAX_TASK_BYTES,
    MAX_TASKS,
    SAMPLE_SLACK_BYTES,
    SOURCE_SAMPLES_SLACK,
)
from lerobot_shards.core.format.parquet import feature_budget, read_parquet_schema
from lerobot_shards.packer.errors import MissingRowsError, SourceError, VideoCutError
from lerobot_shards.packer.source.files import (
    check_file_size,
    file_key,
    file_kind,
    parquet_rows,
    parquet_schema,
    read_regular,
    read_source_file,
    read_source_table,
    sha256_regular,
    source_error,
)
from lerobot_shards.packer.source.info import parse_info
from lerobot_shards.packer.source.video import StreamProbe, VideoLocation, probe_stream, video_duration_s

# pyarrow.compute makes its functions at import; a static checker cannot see them.
pc: Any = _compute

log = logging.getLogger(__name__)

REQUIRED_EPISODE_COLUMNS = (
    "episode_index",
    "length",
    "data/chunk_index",
    "data/file_index",
    "dataset_from_index",
    "dataset_to_index",
)


class LeRobotSource:
    """A local LeRobot v3.0 dataset root.

    Raises (from the constructor):
        SourceError: missing ``meta/info.json``/episodes/tasks, an unsupported
            ``codebase_version`` (v2.x must be converted with LeRobot first), or episodes
            metadata lacking required columns.
    """

    def __init__(self, root: str | Path, *, follow_symlinks: bool = False):
        # The root itself may be a link (/data -> /mnt/data); what lies under it may not, unless
        # the caller trusts the source (follow_symlinks): a link would read files outside it.
        self.root = Path(root).resolve()
        self.follow_symlinks = follow_symlinks
        self._checked: dict[str, Path] = {}
        if (self.root / "manifest.json").is_file() and (self.root / "shards").is_dir():
            # A pack keeps its source's meta/ (info.json included): without this it would fail
            # later on data files it does not have.
            raise SourceError(
                f"{self.root} is a packed dataset (manifest.json, shards/), not a LeRobot v3 dataset: "
                "pack its source, or read it with PackedDataset / `lerobot-shards info`"
            )
        info_path = self.file(INFO_PATH, what="metadata", missing=f"is {self.root} a LeRobot dataset root?")
        # Parsed once, here: every later decision reads these typed values (docs/SECURITY.md).
        self.info = parse_info(read_regular(info_path, MAX_RECORD_BYTES, "info.json"), where=str(info_path))
        self.fps: float = self.info.fps
        self.features: Features = self.info.features
        self.video_keys: list[str] = self.features.video_keys
        self.image_keys: list[str] = self.features.image_keys
        self.depth = self.features.depth
        self.episodes = self._load_episodes()
        members = len(self.episodes) * len(self.video_keys)
        if members > MAX_DATASET_MEMBERS:  # a pack of it would be refused by every reader
            raise SourceError(
                f"{self.root}: {len(self.episodes)} episodes x {len(self.video_keys)} cameras = {members} members, "
                f"more than the {MAX_DATASET_MEMBERS} a packed dataset may hold; pack it in parts (--episodes)"
            )
        self._video_file_ends: dict[str, dict[str, float]] = {}
        self.tasks = self._load_tasks()
        self.task_indices = frozenset(self.tasks.names)
        self._data_cache: tuple[tuple, pa.Table, dict[int, tuple[int, int]]] | None = None
        self._probes: dict[Path, StreamProbe] = {}

    def file(self, rel: str, *, what: str = "file", missing: str | None = None) -> Path:
        """The local path of ``rel`` (a path relative to the root, from metadata or a template).

        With ``missing`` (what to tell the user), a file that does not exist is an error;
        without it the caller decides.

        Raises:
            SourceError: ``rel`` could leave the root (absolute, ``..``), a component under
                the root is a symbolic link (unless ``follow_symlinks``), or what it names is not
                a regular file (a device, FIFO, socket or directory, linked to or not: reading
                one never ends or blocks).
        """
        checked = self._checked.get(rel)
        if checked is not None:  # each file is checked once: packing asks for it per episode and camera
            return checked
        try:
            source_relative_path(rel)
        except ValueError:
            raise SourceError(f"{self.root}: {what} path {rel[:300]!r} leaves the dataset root or is not a plain path") from None
        path = self.root / rel
        if not self.follow_symlinks:
            current = self.root
            for part in Path(rel).parts:
                current = current / part
                if current.is_symlink():
                    raise SourceError(
                        f"{current}: a symbolic link inside the source; refused because it may point outside the dataset "
                        "(copy the dataset with `cp -rL`, or pass --follow-symlinks if you trust it)"
                    )
        try:
            mode = path.stat().st_mode  # follows links: what --follow-symlinks would read
        except FileNotFoundError:
            if missing is not None:
                raise SourceError(f"{path}: missing; {missing}") from None
            return path  # not cached: the caller reports it, or it appears later (staging)
        except OSError as err:
            raise SourceError(f"{path}: cannot read the {what} ({err.strerror})") from None
        if not stat.S_ISREG(mode):
            raise SourceError(f"{path}: the {what} is {file_kind(mode)}, not a regular file; a LeRobot dataset holds only files")
        self._checked[rel] = path
        return path

    # -- metadata ---------------------------------------------------------------------------
    def _load_episodes(self) -> dict[int, dict]:
        files = sorted((self.root / META_DIR / "episodes").glob("chunk-*/file-*.parquet"))
        if not files:
            raise SourceError(f"{self.root / 'meta' / 'episodes'}: no episodes metadata parquet found")
        rows: dict[int, dict] = {}
        for path in files:
            path = self.file(path.relative_to(self.root).as_posix(), what="episodes metadata")
            data = read_source_file(path, "episodes metadata")
            try:
                names = read_parquet_schema(data, where=str(path)).names
            except FormatError as err:
                raise source_error(err, path, "episodes metadata") from None
            # Every column's pages are checked (stats/* lists included); only these are decoded.
            wanted = [c for c in names if not c.startswith("stats/")]
            table = read_source_table(
                data,
                path,
                "episodes metadata",
                columns=wanted,
                max_rows=MAX_DATASET_EPISODES,
                values_per_row={"tasks": MAX_EPISODE_TASKS},
            )
            missing = [c for c in REQUIRED_EPISODE_COLUMNS if c not in table.column_names]
            missing += [
                f"videos/{k}/{f}"
                for k in self.video_keys
                for f in ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
                if f"videos/{k}/{f}" not in table.column_names
            ]
            if missing:
                raise SourceError(f"{path}: episodes metadata lacks columns {missing}")
            for row in table.to_pylist():
                # LeRobot's own converters (convert_image_to_video_dataset) write episodes
                # metadata without ``tasks``, and LeRobot reads such datasets (a sample's task
                # comes from its row's task_index): the episode's tasks are then taken from its
                # rows when it is packed (``episode_tasks``).
                row.setdefault("tasks", None)
                _check_episode_row(row, self.video_keys, path)
                rows[int(row["episode_index"])] = row
        return dict(sorted(rows.items()))

    def _load_tasks(self) -> LeRobotTasks:
        """``meta/tasks.parquet`` through the model of LeRobot's reading (``read_tasks``): the
        file every pack copies, and the same parse a reader of the pack applies to it."""
        path = self.file(TASKS_PATH, what="tasks")
        if not path.is_file():
            raise SourceError(f"{path}: missing")
        try:
            return read_tasks(read_source_file(path, "tasks"), where=str(path), max_rows=MAX_TASKS, max_task_bytes=MAX_TASK_BYTES)
        except FormatError as err:
            raise source_error(err, path, "tasks") from None

    @property
    def episode_indices(self) -> list[int]:
        return list(self.episodes)

    def check_tasks(self) -> list[int]:
        """Return episodes whose tasks are missing from tasks.parquet (warned once, kept)."""
        known = set(self.tasks.names.values())
        bad = [e for e, row in self.episodes.items() if any(t not in known for t in row["tasks"] or ())]
        if bad:
            log.warning("episodes %s list tasks missing from meta/tasks.parquet; packing them anyway", bad[:10])
        return bad

    def reading_notes(self) -> list[str]:
        """See ``Source.reading_notes``."""
        notes = []
        if self.tasks.layout.lerobot_task_is_row_number:
            notes.append(
                f"{self.root / TASKS_PATH}: written without a pandas index (plain pyarrow), so LeRobot 0.6.1 gives "
                "each sample's task as its row number (0, 1, ...); the pack gives the task string the file holds"
            )
        notes += self._orphan_notes()
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
        path = self.file(STATS_PATH, what="statistics")
        if not path.is_file():
            return {}
        data = read_regular(path, MAX_STATS_BYTES, "stats.json")
        try:
            value = load_json(
                data, where=str(path), max_bytes=MAX_STATS_BYTES, max_depth=MAX_JSON_DEPTH, allow_nan=True, lerobot_file=True
            )
        except FormatError as err:
            raise SourceError(str(err)) from None
        return stats_problems(value)

    def _orphan_notes(self) -> list[str]:
        """What the data and video files hold that no episode of ``meta/episodes`` lists: rows
        of unlisted episodes (counted from each data file's footer against the lengths of the
        episodes it holds; named by reading its ``episode_index`` column only when they differ)
        and files no episode uses. None of it is packed; LeRobot 0.6.1 cannot read such rows
        either (its ``__getitem__`` finds no episode record for them)."""
        listed: dict[Path, int] = {}
        first: dict[Path, int] = {}
        for episode in self.episodes:
            path = self.data_path(episode)
            listed[path] = listed.get(path, 0) + int(self.episodes[episode]["length"])
            first.setdefault(path, episode)
        notes = []
        for path, rows in sorted(listed.items()):
            if not path.is_file():
                continue  # reported where it is read (or not staged: a bucket source fetches what it packs)
            held = parquet_rows(path, first[path])
            if held <= rows:
                continue  # fewer rows than listed is what --on-frame-mismatch decides, per episode
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
        for folder, suffix, used in (
            ("data", ".parquet", set(listed)),
            ("videos", ".mp4", {self.video_location(e, k).path for e in self.episodes for k in self.video_keys}),
        ):
            present = (
                sorted(p for p in (self.root / folder).rglob(f"*{suffix}") if p.is_file())
                if (self.root / folder).is_dir()
                else []
            )
            unused = [p.relative_to(self.root).as_posix() for p in present if p not in used]
            if unused:
                notes.append(
                    f"{self.root / folder}: {len(unused)} file(s) no episode of meta/episodes uses, not packed: "
                    + ", ".join(unused[:5])
                    + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
                )
        return notes

    # -- files ------------------------------------------------------------------------------
    def data_path(self, episode_index: int) -> Path:
        row = self.episodes[episode_index]
        rel = self.info.data_file(row["data/chunk_index"], row["data/file_index"])
        return self.file(rel, what=f"data (episode {episode_index})")

    def metadata_files(self) -> list[tuple[str, Path, int]]:
        """The metadata files LeRobot v3 reads (``is_metadata_file``), as ``(path relative to the
        root, local path, the most bytes it may hold)`` in path order, for the pack to copy
        verbatim; ``unknown_metadata_files`` lists what it leaves out. Only regular files under
        the root: a symbolic link (unless opened with ``follow_symlinks``) raises ``SourceError``
        instead of publishing what it points to."""
        out = []
        for rel in self._meta_listing():
            bound = metadata_bound(rel)
            if bound is not None:
                path = self.file(rel, what="metadata")
                check_file_size(path, bound, "metadata")
                out.append((rel, path, bound))
        return out

    def unknown_metadata_files(self) -> list[str]:
        """Files under ``meta/`` that LeRobot v3 does not read: not copied into a pack."""
        return [rel for rel in self._meta_listing() if metadata_bound(rel) is None]

    def _meta_listing(self) -> list[str]:
        meta_root = self.root / META_DIR
        # Everything but folders: a FIFO or device named like a file LeRobot reads is refused by
        # ``file`` rather than passed over in silence.
        return sorted(p.relative_to(self.root).as_posix() for p in meta_root.rglob("*") if p.is_symlink() or not p.is_dir())

    def video_location(self, episode_index: int, video_key: str) -> VideoLocation:
        row = self.episodes[episode_index]
        rel = self.info.video_file(video_key, row[f"videos/{video_key}/chunk_index"], row[f"videos/{video_key}/file_index"])
        path = self.file(rel, what=f"video (episode {episode_index}, camera {video_key})")
        return VideoLocation(
            path, float(row[f"videos/{video_key}/from_timestamp"]), float(row[f"videos/{video_key}/to_timestamp"])
        )

    def max_video_samples(self, episode_index: int, video_key: str) -> int:
        """The most samples the camera's video file holding ``episode_index`` may hold: twice
        the frames up to the last second any of its episodes uses, plus
        ``SOURCE_SAMPLES_SLACK`` (what a copy-mode cut reads of its sample tables is bounded by
        this, not by what the file claims)."""

        def rel(row) -> str:
            return self.info.video_file(video_key, row[f"videos/{video_key}/chunk_index"], row[f"videos/{video_key}/file_index"])

        lasts = self._video_file_ends.get(video_key)
        if lasts is None:  # one pass over the episodes per camera, no file system calls
            lasts = self._video_file_ends[video_key] = {}
            for row in self.episodes.values():
                lasts[rel(row)] = max(lasts.get(rel(row), 0.0), float(row[f"videos/{video_key}/to_timestamp"]))
        return int(2 * lasts[rel(self.episodes[episode_index])] * self.fps) + SOURCE_SAMPLES_SLACK

    def max_sample_bytes(self, video_key: str) -> int:
        """The most one compressed frame of the camera may claim: ``MAX_SAMPLE_RAW_MULTIPLE``
        raw frames of the size ``info.json`` records, plus ``SAMPLE_SLACK_BYTES`` (checked
        before a copy-mode cut, or FFmpeg's demuxer, reads any sample)."""
        camera = self.features[video_key].camera
        raw = camera.height * camera.width * 3 if camera is not None else 3 * MAX_FRAME_PIXELS
        return MAX_SAMPLE_RAW_MULTIPLE * raw + SAMPLE_SLACK_BYTES

    def needed_files(self, episodes: Sequence[int]) -> list[Path]:
        """Every data and video file the given episodes read, relative to the root."""
        files = {self.data_path(e).relative_to(self.root) for e in episodes}
        for e in episodes:
            for key in self.video_keys:
                files.add(self.video_location(e, key).path.relative_to(self.root))
        return sorted(files)

    def episode_rows(self, episode_index: int, *, fill_missing: bool = False) -> pa.Table:
        """The episode's rows from its data parquet, all columns with their source types.

        ``fill_missing`` (``--on-frame-mismatch pad``): rows the metadata length says the
        episode has but the file lacks (at its end or in its middle) are filled, each from the
        row before it (the first from the row after), with their own ``frame_index``, ``index``
        and ``timestamp``: every row keeps its own video frame.

        Raises:
            MissingRowsError: fewer rows than the metadata length, their ``frame_index`` values
                naming which are missing (without ``fill_missing``).
            SourceError: the data file is missing or unreadable, holds more rows for the episode
                than its metadata length, or repeats a frame.
        """
        path = self.data_path(episode_index)
        if not path.is_file():
            raise SourceError(f"{path}: missing (data file of episode {episode_index})")
        # Keyed by the file's size and time too: ``open_source`` keeps a parsed source for a
        # process, which may pack the same root again after its data changed.
        key = file_key(path)
        if self._data_cache is None or self._data_cache[0] != key:
            table = read_source_table(
                read_source_file(path, "data parquet"),
                path,
                "data parquet",
                max_rows=MAX_DATASET_FRAMES,
                values_per_row=self._values_per_row,
            )
            absent = [c for c in _ROW_COLUMNS if c not in table.column_names]
            if absent:  # LeRobot's datasets load refuses a file without a declared column; we need them too
                raise SourceError(
                    f"{path}: the data parquet has no column {', '.join(absent)}, which every LeRobot row holds; "
                    "write the dataset again with LeRobot (or add the column)"
                )
            empty = [c for c in _ROW_COLUMNS if table[c].null_count]
            if empty:  # rows are found by these: a null places a row nowhere
                raise SourceError(
                    f"{path}: column {', '.join(empty)} holds nulls; every LeRobot row has its {empty[0]}: "
                    "write the dataset again with LeRobot (or fill the column)"
                )
            for name in _ROW_COLUMNS:  # rows are found and checked by these: cast first, as LeRobot loads them
                if name in self._declared_leaves:
                    try:
                        cast = cast_as_declared(table[name], self._declared_leaves[name], where=f"{path}: column {name!r}")
                    except FormatError as err:
                        raise SourceError(str(err)) from None
                    table = table.set_column(table.schema.get_field_index(name), pa.field(name, cast.type), cast)
                if name != "timestamp" and not pa.types.is_integer(table[name].type):
                    raise SourceError(
                        f"{path}: column {name} holds {table[name].type}, not integers (meta/info.json declares no integer "
                        "type for it either); write the dataset again with LeRobot"
                    )
            try:
                spans = _episode_spans(table)
            except SourceError as err:
                raise SourceError(f"{path}: {err}") from None
            self._data_cache = (key, table, spans)
        _, table, spans = self._data_cache
        # LeRobot writes each episode's rows contiguously: slice instead of filtering per
        # episode (a filter per episode is quadratic in the rows of a 100 MB data file).
        start, count = spans.get(episode_index, (0, 0))
        rows = table.slice(start, count)
        expected = int(self.episodes[episode_index]["length"])
        if rows.num_rows and rows["frame_index"].to_pylist() != list(range(rows.num_rows)):
            rows = rows.sort_by("frame_index")
        if rows.num_rows < expected:
            present = rows["frame_index"].to_pylist() if "frame_index" in rows.column_names else []
            missing = sorted(set(range(expected)) - {f for f in present if isinstance(f, int)})
            if not fill_missing:
                raise MissingRowsError(
                    f"{path}: episode {episode_index} has {rows.num_rows} rows, metadata says length {expected} "
                    f"(frame_index {_ranges(missing)} missing)",
                    episode=episode_index,
                    missing=tuple(missing),
                    rows=rows.num_rows,
                )
            rows = self._filled(episode_index, rows, expected, path)
        elif rows.num_rows > expected:
            raise SourceError(f"{path}: episode {episode_index} has {rows.num_rows} rows, metadata says length {expected}")
        self._check_row_values(episode_index, rows, path)
        return self._as_declared(episode_index, rows, path)

    @functools.cached_property
    def _declared_leaves(self) -> dict[str, pa.DataType]:
        """Each value feature's declared element type (``declared_leaf_type``).

        Raises:
            SourceError: a dtype ``datasets`` does not know (LeRobot cannot load the dataset).
        """
        leaves = {}
        for key, spec in self.features.items():
            if spec.kind != "value":
                continue
            leaf = declared_leaf_type(spec.dtype)
            if leaf is None:
                raise SourceError(
                    f"{self.root / INFO_PATH}: feature {key!r} has dtype {spec.dtype[:40]!r}, which is no type LeRobot "
                    "(datasets.Value) loads a column as: use one of float32, float64, int64, int32, bool, string"
                )
            leaves[key] = leaf
        return leaves

    def _as_declared(self, episode_index: int, rows: pa.Table, path: Path) -> pa.Table:
        """``rows`` with every value feature cast to its declared type, as LeRobot loads them
        (``cast_as_declared``): a pack stores what LeRobot returns, not what the file holds."""
        for key, leaf in self._declared_leaves.items():
            if key not in rows.column_names:
                continue
            column = rows[key]
            try:
                cast = cast_as_declared(column, leaf, where=f"{path}: episode {episode_index}, column {key!r}")
            except FormatError as err:
                raise SourceError(str(err)) from None
            if cast is not column:
                rows = rows.set_column(rows.schema.get_field_index(key), pa.field(key, cast.type), cast)
        return rows

    def _filled(self, episode_index: int, rows: pa.Table, length: int, path: Path) -> pa.Table:
        """``rows`` with the missing frames of ``0..length-1`` filled (``episode_rows``)."""
        frames = rows["frame_index"].to_pylist() if "frame_index" in rows.column_names else []
        if (
            not rows.num_rows
            or any(not isinstance(f, int) or not 0 <= f < length for f in frames)
            or len(set(frames)) != len(frames)
        ):
            held = _ranges(sorted({f for f in frames if isinstance(f, int)})) or "(none)"
            raise SourceError(
                f"{path}: episode {episode_index}: frame_index {held} cannot be filled to the metadata length {length} "
                "(no rows, repeated or out-of-range frames)"
            )
        at = {f: i for i, f in enumerate(frames)}
        source_row, last = [], None
        for frame in range(length):
            last = at.get(frame, last)
            source_row.append(last if last is not None else at[min(at)])
        filled = rows.take(pa.array(source_row, pa.int64()))
        start = int(self.episodes[episode_index]["dataset_from_index"])
        own = {
            "frame_index": pa.array(range(length), filled.schema.field("frame_index").type)
            if "frame_index" in filled.column_names
            else None,
            "index": pa.array(range(start, start + length), filled.schema.field("index").type)
            if "index" in filled.column_names
            else None,
            "timestamp": pa.array([f / self.fps for f in range(length)], filled.schema.field("timestamp").type)
            if "timestamp" in filled.column_names
            else None,
        }
        for name, values in own.items():
            if values is not None:
                filled = filled.set_column(filled.schema.get_field_index(name), name, values)
        return filled

    @functools.cached_property
    def _values_per_row(self) -> dict[str, int]:
        """What a data parquet's columns may hold per row (the reader's own caps)."""
        return feature_budget(self.features)

    @functools.cached_property
    def _exact_elements(self) -> dict[str, int]:
        """Values per frame of each fixed-shape tabular feature (language lists have no shape)."""
        return {k: f.elements for k, f in self.features.items() if f.kind == "value" and None not in f.shape}

    def _check_row_values(self, episode_index: int, rows: pa.Table, path: Path) -> None:
        """What the rows hold must be what the metadata claims: each tabular feature's values
        per frame are its shape's product, and the rows' ``index`` runs from the episode's
        ``dataset_from_index`` to its ``dataset_to_index``.

        Raises:
            SourceError: names the file, episode, column, what was found and what was declared.
        """
        where = f"{path}: episode {episode_index}"
        for name in self.features:
            if name in rows.column_names and rows[name].null_count:
                # LeRobot makes a tensor (or a list) of every value a row holds: a null fails its
                # __getitem__ ("Could not infer dtype of NoneType"); ours would be a NaN or None.
                nulls = rows[name].is_null().to_pylist()
                frames = [f for f, null in enumerate(nulls) if null]
                raise SourceError(
                    f"{where}: column {name} holds no value (null) at frame_index {_ranges(frames)}; LeRobot fails "
                    "to read those rows: fill them, or leave the episode out (--episodes)"
                )
        for name, feature in self.features.items():
            if feature.kind != "value" or name not in rows.column_names or not rows.num_rows:
                continue
            shape = list(feature.shape)
            kind = rows[name].type
            if shape != [1] and not (pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)):
                # datasets loads a feature of shape [1] as a value, any other as a sequence or
                # an ArrayND, which a column of one value a row cannot be cast to: LeRobot's load
                # fails, and so does the pack.
                raise SourceError(
                    f"{where}: column {name} holds one value a frame; meta/info.json declares shape {shape}, which "
                    "LeRobot loads as a sequence or an array and fails to cast it to: declare shape [1]"
                )
        for name, elements in self._exact_elements.items():
            if name not in rows.column_names or not rows.num_rows:
                continue
            found = _values_per_frame(rows[name].type, rows[name])
            if found is not None and found != {elements}:
                raise SourceError(
                    f"{where}: column {name} holds {sorted(found)[:5]} values per frame; meta/info.json "
                    f"declares shape {list(self.features[name].shape)} ({elements} values)"
                )
        row = self.episodes[episode_index]
        start, stop = row["dataset_from_index"], row["dataset_to_index"]
        if "index" in rows.column_names and rows.num_rows:
            first, last = rows["index"][0].as_py(), rows["index"][rows.num_rows - 1].as_py()
            if stop - start != rows.num_rows or first != start or last != stop - 1:
                raise SourceError(
                    f"{where}: rows have index {first}..{last}; the episodes metadata says "
                    f"dataset_from_index {start}, dataset_to_index {stop}"
                )

    def schema_drift(self, episodes: Sequence[int]) -> SchemaDrift:
        """Compare the tabular features info.json declares with the columns of the data files
        the given episodes live in (parquet footers only).

        Raises:
            SourceError: a data file is missing or is not a readable parquet file.
        """
        _ = self._declared_leaves  # a dtype LeRobot cannot load is refused before anything is written
        # Image features (dtype "image") live in the data parquet too; only videos do not.
        declared = [k for k, f in self.features.items() if not f.is_video]
        first_episode_of: dict[Path, int] = {}
        for episode in episodes:
            first_episode_of.setdefault(self.data_path(episode), episode)
        present: list[str] = []
        for path, episode in sorted(first_episode_of.items()):
            schema = parquet_schema(path, episode)
            self._check_column_types(schema, path)
            for name in schema.names:
                if name not in present:
                    present.append(name)
        lost = [k for k in declared if k not in present and self.features[k].is_image]
        if lost:  # a camera, not a tabular column: leaving it out would drop it in silence
            raise SourceError(
                f"{sorted(first_episode_of)[0]}: image feature(s) {lost} declared in meta/info.json are not columns of "
                "the data parquet; LeRobot cannot load the dataset: restore the column from the recording, or remove "
                "the feature from meta/info.json to pack without it"
            )
        self.camera_codecs(episodes)
        return SchemaDrift(
            only_in_info=[k for k in declared if k not in present],
            only_in_parquet=[c for c in present if c not in declared],
            columns=present,
        )

    def camera_codecs(self, episodes: Sequence[int]) -> dict[str, dict[str, Path]]:
        """See ``Source.camera_codecs``: one probe per video file (``probe_stream``, no decode),
        kept for the source's life; a depth camera's files are checked to hold one plane of codes.

        Raises:
            SourceError: a file that does not open as video, or a depth camera whose stream is
                colour (names the camera, the file and the pixel format found).
        """
        found: dict[str, dict[str, Path]] = {}
        for key in self.video_keys:
            codecs = found.setdefault(key, {})
            for path in sorted({self.video_location(e, key).path for e in episodes}):
                if not path.is_file():
                    continue  # reported missing where it is read
                probe = self._probes.get(path)
                if probe is None:
                    try:
                        probe = self._probes[path] = probe_stream(path)
                    except VideoCutError as err:
                        raise SourceError(str(err)) from None
                if key in self.depth and probe.pix_fmt is not None and not is_depth_pixel_format(probe.pix_fmt):
                    # Colour whose luma would pass for plausible depth.
                    raise SourceError(
                        f"{path}: depth camera {key}: the stream (its codec configuration) is {probe.pix_fmt}, not one "
                        "plane of depth codes; its feature declares is_depth_map, which LeRobot writes only for gray12le video"
                    )
                codecs.setdefault(probe.codec, path)
        return found

    def _check_column_types(self, schema: pa.Schema, path: Path) -> None:
        """Columns whose type the features fix (LeRobot's language rows, pictures) have it.

        Raises:
            SourceError: names the file, the column, the type found and the one expected.
        """
        for name in LANGUAGE_COLUMNS:
            if name in schema.names:
                try:
                    check_language_type(name, schema.field(name).type, where=str(path))
                except FormatError as err:
                    raise SourceError(str(err)) from None
        for key in self.image_keys:
            if key in schema.names and not image_column_type_ok(schema.field(key).type):
                raise SourceError(
                    f"{path}: image feature {key!r} is stored as {str(schema.field(key).type)[:120]}; LeRobot stores "
                    "pictures as {bytes, path} structs"
                )
        # Every other column (declared or not) is a value LeRobot returns as a tensor or text:
        # a struct or bytes column there (pictures without their image feature) would reach
        # samples as raw bytes.
        for name in schema.names:
            feature = self.features.get(name)
            if name in LANGUAGE_COLUMNS or (feature is not None and feature.kind != "value"):
                continue
            if not value_column_type_ok(schema.field(name).type):
                what = "feature" if feature is not None else "column (not in meta/info.json)"
                raise SourceError(
                    f"{path}: {what} {name!r} of dtype {feature.dtype if feature else '?'!r} holds "
                    f"{str(schema.field(name).type)[:120]}, which is no value LeRobot returns (numbers, bools, text or "
                    "lists of them); pictures need their feature declared with dtype 'image'"
                )

    def fingerprint(self, episodes: Sequence[int]) -> str:
        """Identify the source content a pack of ``episodes`` reads, for its plan.

        SHA-256 over the relative path, size and SHA-256 of every ``meta/`` file (which holds
        per-episode statistics of every feature, so other values give another digest) and the
        relative path and size of every data and video file the episodes read. Two copies of
        one dataset at different paths agree; a resume from a different dataset does not.
        """
        records = []
        for rel, path, bound in self.metadata_files():  # what the pack copies: the files LeRobot reads
            digest, size = sha256_regular(path, bound, rel)
            records.append([rel, size, digest])
        for rel in self.needed_files(episodes):
            path = self.root / rel
            records.append([rel.as_posix(), path.stat().st_size if path.is_file() else -1, None])
        return "sha256:" + sha256_hex(canonical_json(records))

    def check_rows(self, episode_index: int, rows: pa.Table) -> None:
        """Check an episode's rows before packing them: every ``task_index`` names a task of
        ``meta/tasks.parquet`` (a reader resolves each sample's task string through it).

        Raises:
            SourceError: unknown task indices (names the data file and episode).
        """
        self._check_images(episode_index, rows)
        if "task_index" not in rows.column_names or not rows.num_rows:
            return
        unknown = sorted(set(rows["task_index"].to_pylist()) - self.task_indices)
        if unknown:
            raise SourceError(
                f"{self.data_path(episode_index)}: episode {episode_index} has task_index {unknown[:10]}, which "
                f"{self.root / 'meta/tasks.parquet'} does not define (it has {len(self.task_indices)} tasks)"
            )

    def _check_images(self, episode_index: int, rows: pa.Table) -> None:
        """Every picture of an image feature is stored as LeRobot stores it (embedded bytes in
        a ``{bytes, path}`` struct) in a format readers open, exactly of its feature's shape
        (headers only: nothing is decoded here).

        Raises:
            SourceError: names the data file, episode, feature, frame and what is wrong.
        """
        for key in self.image_keys:
            if key not in rows.column_names or not rows.num_rows:
                continue
            where = f"{self.data_path(episode_index)}: episode {episode_index}, image feature {key}"
            if not image_column_type_ok(rows[key].type):
                raise SourceError(f"{where}: stored as {rows[key].type}; LeRobot stores pictures as {{bytes, path}} structs")
            camera = self.features[key].camera
            assert camera is not None  # an image feature is a camera (parse_feature)
            for frame, cell in enumerate(rows[key].to_pylist()):
                data = image_column_bytes(cell)
                if data is None:
                    raise SourceError(
                        f"{where}, frame {frame}: no embedded picture bytes (a path only); re-save the dataset "
                        "with LeRobot, which embeds them"
                    )
                try:
                    open_image(data, camera=camera, where=f"{where}, frame {frame}", load=False)
                except FormatError as err:
                    raise SourceError(str(err)) from None

    def episode_tasks(self, episode_index: int, rows: pa.Table) -> list[str]:
        """The episode's task strings: its metadata's ``tasks``, or, where the episodes metadata
        has no ``tasks`` column, the tasks of its rows' ``task_index`` in order of first
        appearance (``check_rows`` has checked every index names a task)."""
        recorded = self.episodes[episode_index]["tasks"]
        if recorded is not None:
            return list(recorded)
        if "task_index" not in rows.column_names or not rows.num_rows:
            return []
        names = self._task_names
        distinct = list(dict.fromkeys(rows["task_index"].to_pylist()))
        if len(distinct) > MAX_EPISODE_TASKS:
            raise SourceError(
                f"{self.data_path(episode_index)}: episode {episode_index} has {len(distinct)} distinct tasks; "
                f"at most {MAX_EPISODE_TASKS} are allowed"
            )
        return [names[int(i)] for i in distinct]

    @property
    def _task_names(self) -> dict[int, str]:
        return self.tasks.names

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
        rows = parquet_rows(data_path, episode_index)
        total += data_path.stat().st_size * int(row["length"]) // max(rows, 1)
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


_EPISODES_METADATA = re.compile(r"meta/episodes/chunk-\d+/file-\d+\.parquet")
# The metadata files LeRobot v3 reads, and the most bytes each may hold (what reading it allows:
# info.json and stats.json are parsed whole, the parquet files read whole within the index bound).
_METADATA_BOUNDS = {INFO_PATH: MAX_RECORD_BYTES, STATS_PATH: MAX_STATS_BYTES, TASKS_PATH: MAX_INDEX_FILE_BYTES}


def metadata_bound(rel: str) -> int | None:
    """The most bytes a LeRobot v3 metadata file at ``rel`` may hold, or None when LeRobot does
    not read such a file (``meta/info.json``, ``meta/stats.json``, ``meta/tasks.parquet`` and
    ``meta/episodes/chunk-*/file-*.parquet`` are all it reads)."""
    if rel in _METADATA_BOUNDS:
        return _METADATA_BOUNDS[rel]
    return MAX_INDEX_FILE_BYTES if _EPISODES_METADATA.fullmatch(rel) else None


def _is_finite_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_episode_row(row: dict, video_keys: list[str], path: Path) -> None:
    """Indices that become file names and frame ranges must be what they claim to be."""
    where = f"{path}: episode {str(row.get('episode_index'))[:40]}"
    for column in ("episode_index", "length", "data/chunk_index", "data/file_index", "dataset_from_index", "dataset_to_index"):
        value = row.get(column)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise SourceError(f"{where}: {column} must be a non-negative integer, found {str(value)[:40]!r}")
    for key in video_keys:
        for column in (f"videos/{key}/chunk_index", f"videos/{key}/file_index"):
            value = row.get(column)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise SourceError(f"{where}: {column} must be a non-negative integer, found {str(value)[:40]!r}")
        start, stop = row.get(f"videos/{key}/from_timestamp"), row.get(f"videos/{key}/to_timestamp")
        if not (_is_finite_number(start) and _is_finite_number(stop) and 0 <= start <= stop):
            raise SourceError(
                f"{where}: videos/{key}/from_timestamp and to_timestamp must be finite seconds with "
                f"0 <= from <= to, found {str(start)[:40]}, {str(stop)[:40]}"
            )
    if row["dataset_to_index"] - row["dataset_from_index"] != row["length"]:
        raise SourceError(
            f"{where}: dataset_from_index {row['dataset_from_index']} to dataset_to_index "
            f"{row['dataset_to_index']} is not its length {row['length']}"
        )
    if row.get("tasks") is None:
        return  # no tasks column: taken from the rows (LeRobotSource.episode_tasks)
    if not isinstance(row.get("tasks"), list) or not all(isinstance(task, str) for task in row["tasks"]):
        raise SourceError(f"{where}: tasks must be a list of strings")
    if any(len(task.encode()) > MAX_TASK_BYTES for task in row["tasks"]):
        raise SourceError(f"{where}: a task string longer than {MAX_TASK_BYTES:,} bytes")


def _values_per_frame(kind: pa.DataType, column: pa.ChunkedArray) -> set[int] | None:
    """The distinct numbers of values per row of a (nested) list column; {1} for a scalar;
    None for types without a fixed element count (strings, structs)."""
    if pa.types.is_fixed_size_list(kind):
        inner = _values_per_frame(kind.value_type, pc.list_flatten(column)) if len(column) else {1}
        return None if inner is None or len(inner) != 1 else {kind.list_size * next(iter(inner))}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        lengths = set(pc.unique(pc.list_value_length(column)).to_pylist())
        inner = _values_per_frame(kind.value_type, pc.list_flatten(column)) if len(column) else {1}
        if inner is None or len(inner) != 1 or None in lengths:
            return None if inner is None else {-1}
        return {n * next(iter(inner)) for n in lengths}
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return {1}
    return None


def _ranges(values: list[int], limit: int = 10) -> str:
    """``[1, 2, 3, 7]`` as ``1-3,7`` (the first ``limit`` runs, then how many more)."""
    runs: list[str] = []
    start = previous = None
    for value in values:
        if previous is not None and value == previous + 1:
            previous = value
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = value
    if start is not None:
        runs.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(runs[:limit]) + (f" and {len(runs) - limit} more runs" if len(runs) > limit else "")


_ROW_COLUMNS = ("index", "episode_index", "frame_index", "timestamp", "task_index")


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


def open_source(root: str | Path, *, follow_symlinks: bool = False) -> LeRobotSource:
    """A parsed ``LeRobotSource``, reused by the shards a (pool) process builds.

    Parsing a source reads every episodes metadata file, so each shard of a large dataset
    would otherwise pay for it again. The cache is keyed by the metadata files' sizes and
    times too, so a long-lived process sees an edited source.
    """
    meta = Path(root) / META_DIR
    files = [meta / "info.json", meta / "tasks.parquet", *sorted((meta / "episodes").glob("chunk-*/file-*.parquet"))]
    signature = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())
    return _parsed_source(str(root), follow_symlinks, signature)


@functools.lru_cache(maxsize=2)
def _parsed_source(root: str, follow_symlinks: bool, signature: tuple) -> LeRobotSource:
    return LeRobotSource(root, follow_symlinks=follow_symlinks)
