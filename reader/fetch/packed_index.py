"""Loading a packed dataset's manifest and indexes, checked, and selecting anchors.

Loaded once per dataset object; everything the epoch plan needs (anchor counts per episode)
comes from here without touching shard data. Every byte is checked on its way in: the
manifest (bounded size, schema, ``content_sha256``, an optional pin), then each file by the
size and SHA-256 the manifest records (``verified_read``), then the episodes index against
the manifest (``reader.format.parse_episodes_index``).
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import pyarrow as pa

from reader.errors import FormatError, IntegrityError, ObjectNotFoundError, ShortReadError
from reader.format import (
    EPISODES_INDEX_PATH,
    INFO_PATH,
    MANIFEST_PATH,
    SAMPLES_INDEX_PATH,
    TASKS_PATH,
    CameraMember,
    EpisodeEntry,
    Manifest,
    check_bytes,
    parse_episodes_index,
    sha256_hex,
    sql_string_literal,
)
from reader.format.arrow_io import read_parquet_bytes
from reader.format.layout import MAX_MANIFEST_BYTES
from reader.storage import Storage

__all__ = ["CameraMember", "EpisodeEntry", "PackedIndex", "load_tasks", "read_manifest", "read_recorded", "verified_read"]


def read_manifest(storage: Storage, *, manifest_sha256: str | None = None) -> tuple[Manifest, str]:
    """Read and validate ``manifest.json`` (see ``Manifest.from_json``).

    Returns:
        ``(manifest, pin)``: the pin is ``"sha256:<hex>"`` of the bytes read.

    Raises:
        FormatError: no manifest (not a packed dataset, or its pack has not finished; a root
            that does not exist at all says so), or one that does not validate.
        PinMismatchError: not the pinned manifest.
    """
    where = storage.describe(MANIFEST_PATH)
    if storage.url.rstrip("/").endswith("/mixture.json") or storage.url == "mixture.json":
        raise FormatError(f"{storage.url} is a mixture file, not a packed dataset: open it with reader.MixtureDataset")
    if storage.is_local and os.path.isfile(storage.path("")):
        raise FormatError(f"{storage.url} is a file; a packed dataset is the directory that holds manifest.json")
    try:
        size = storage.size(MANIFEST_PATH)
    except ObjectNotFoundError:
        if storage.is_local and not os.path.exists(storage.path("")):
            raise FormatError(f"{storage.url}: no such directory (so no {MANIFEST_PATH})") from None
        if storage.exists("mixture.json"):
            raise FormatError(f"{storage.url} holds a mixture.json, not a packed dataset: open it with reader.MixtureDataset") from None
        raise FormatError(f"{storage.url}: no {MANIFEST_PATH}; not a packed dataset, or its pack has not finished") from None
    if size > MAX_MANIFEST_BYTES:
        raise FormatError(f"{where}: {size} bytes, more than the {MAX_MANIFEST_BYTES} a manifest may have")
    data = storage.read_bytes(MANIFEST_PATH)
    return Manifest.from_json(data, where=where, expected_sha256=manifest_sha256), "sha256:" + sha256_hex(data)


def verified_read(storage: Storage, manifest: Manifest, rel: str) -> bytes:
    """The bytes of ``rel`` (an ``index/`` or ``meta/`` file), checked against the size and
    SHA-256 the manifest records for it.

    Raises:
        FormatError: the manifest records nothing for ``rel``.
        IntegrityError: the file differs from what was packed.
        StorageError: the read failed.
    """
    entry = manifest.file(rel)
    return read_recorded(storage, rel, size=entry.bytes, sha256=entry.sha256)


def read_recorded(storage: Storage, rel: str, *, size: int, sha256: str) -> bytes:
    """Exactly the ``size`` bytes a digest covers, from the start of ``rel``, checked: one
    request, and nothing beyond the recorded size is ever read (a file that grew cannot make
    a reader allocate more; its first ``size`` bytes must still be the recorded ones).

    Raises:
        IntegrityError: the file is shorter, or its bytes differ from the recorded digest.
        StorageError: the read failed.
    """
    try:
        data = storage.read_range(rel, 0, size)
    except ShortReadError as err:
        raise IntegrityError(f"{storage.describe(rel)}: shorter than the {size} bytes recorded (damaged or replaced): {err}") from err
    check_bytes(data, size=size, sha256=sha256, where=storage.describe(rel))
    return data


def load_tasks(storage: Storage, manifest: Manifest) -> dict[int, str]:
    """``{task_index: task}`` from ``meta/tasks.parquet``, checked against the manifest.

    Raises:
        IntegrityError: the file differs from what was packed.
        FormatError: not a parquet file, or without ``task_index`` and ``task`` columns.
    """
    where = storage.describe(TASKS_PATH)
    data = verified_read(storage, manifest, TASKS_PATH)
    try:
        table = read_parquet_bytes(data)
    except (pa.ArrowException, OSError) as err:
        raise FormatError(f"{where}: not a readable parquet file ({err})") from None
    if "task" not in table.column_names or "task_index" not in table.column_names:
        raise FormatError(f"{where}: needs columns task_index and task, found {table.column_names[:10]}")
    return dict(zip(table["task_index"].to_pylist(), table["task"].to_pylist()))


class PackedIndex:
    """Manifest + ``index/episodes.parquet`` (+ the sample index when filtering anchors).

    Attributes:
        manifest: the validated ``Manifest``.
        manifest_sha256: ``"sha256:<hex>"`` of the manifest's bytes (its pin).
        episodes: selected ``EpisodeEntry`` list, ascending episode index.
        all_episodes: every episode of the dataset (the selection's superset).
        anchor_counts: (E,) anchors per selected episode.
        anchor_frames: ``None`` when every frame is an anchor, else per episode an int64
            array of anchor frame positions (ascending).

    Raises (from the constructor):
        FormatError, IntegrityError, PinMismatchError: see ``read_manifest`` and
            ``verified_read``; the episodes index does not validate.
        ValueError: unknown ``episodes``, a bad ``where`` predicate, or a selection that
            matches no anchor.
    """

    def __init__(
        self,
        storage: Storage,
        *,
        episodes: list[int] | None = None,
        where: str | None = None,
        manifest_sha256: str | None = None,
    ):
        self.storage = storage
        self.manifest, self.manifest_sha256 = read_manifest(storage, manifest_sha256=manifest_sha256)
        data = verified_read(storage, self.manifest, EPISODES_INDEX_PATH)
        all_entries = parse_episodes_index(data, self.manifest, where=storage.describe(EPISODES_INDEX_PATH))
        self.all_episodes = all_entries
        self._check_info()
        if episodes is not None:
            wanted = sorted(set(int(e) for e in episodes))
            known = {e.episode_index for e in all_entries}
            unknown = [e for e in wanted if e not in known]
            if unknown:
                raise ValueError(f"episodes {unknown[:20]} are not in {storage.url} (it has {len(known)} episodes)")
            wanted_set = set(wanted)
            all_entries = [e for e in all_entries if e.episode_index in wanted_set]
        self.episodes = all_entries
        self.position = {e.episode_index: i for i, e in enumerate(self.episodes)}
        lengths = np.array([e.length for e in self.episodes], dtype=np.int64)
        self.anchor_frames: list[np.ndarray] | None = None
        if where is None:
            self.anchor_counts = lengths
        else:
            self.anchor_frames = self._filtered_anchors(where)
            self.anchor_counts = np.array([len(a) for a in self.anchor_frames], dtype=np.int64)
        if episodes is not None or where is not None:
            if int(self.anchor_counts.sum()) == 0:
                selection = " and ".join(s for s in (f"episodes={list(episodes)[:10]}" if episodes is not None else "",
                                                     f"where={where!r}" if where is not None else "") if s)
                raise ValueError(f"{selection} selects no anchor of {storage.url} ({self.manifest.totals['frames']} frames)")

    def _check_info(self) -> None:
        """``meta/info.json`` (checked by digest) must agree with the manifest on fps: the
        windows, and so every windowed sample, depend on it. Kept as ``self.info``."""
        self.info: dict = {}
        if INFO_PATH not in self.manifest.files:
            return
        where = self.storage.describe(INFO_PATH)
        try:
            info = json.loads(verified_read(self.storage, self.manifest, INFO_PATH))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
            raise FormatError(f"{where}: not valid JSON ({type(err).__name__})") from None
        if not isinstance(info, dict) or info.get("fps") != self.manifest.fps:
            found = info.get("fps") if isinstance(info, dict) else None
            raise FormatError(f"{where}: fps {str(found)[:20]} disagrees with the manifest's {self.manifest.fps}")
        self.info = info

    def _filtered_anchors(self, where: str) -> list[np.ndarray]:
        """Anchors matching a DuckDB SQL predicate over ``index/samples.parquet``.

        The file is read once and checked against its recorded digest, then DuckDB queries
        that checked copy (in a private temporary file), so only the columns the predicate
        uses are decoded and the rows it sees are the packed ones.
        """
        import duckdb  # only needed for where=

        data = verified_read(self.storage, self.manifest, SAMPLES_INDEX_PATH)
        with tempfile.TemporaryDirectory(prefix="lerobot-shards-where-") as tmp:
            path = os.path.join(tmp, "samples.parquet")
            with open(path, "wb") as handle:
                handle.write(data)
            del data
            con = duckdb.connect()
            try:
                selected = con.execute(
                    f"SELECT episode_index, frame_index FROM read_parquet({sql_string_literal(path)}) WHERE ({where}) "
                    "ORDER BY episode_index, frame_index"
                ).fetchnumpy()
            except duckdb.Error as err:
                raise ValueError(f"where={where!r} is not a valid predicate over {SAMPLES_INDEX_PATH}: {err}") from None
            finally:
                con.close()
        episode = np.asarray(selected["episode_index"], dtype=np.int64)
        frame = np.asarray(selected["frame_index"], dtype=np.int64)
        anchors = []
        for entry in self.episodes:
            lo, hi = np.searchsorted(episode, entry.episode_index), np.searchsorted(episode, entry.episode_index, side="right")
            frames = np.ascontiguousarray(frame[lo:hi], dtype=np.int64)
            if len(frames) and (frames[0] < 0 or frames[-1] >= entry.length or (np.diff(frames) <= 0).any()):
                raise FormatError(f"{self.storage.describe(SAMPLES_INDEX_PATH)}: anchors of episode {entry.episode_index} "
                                  f"are not distinct frames in [0, {entry.length})")
            anchors.append(frames)
        return anchors

    def anchor_frame(self, episode_position: int, anchor_positions: np.ndarray) -> np.ndarray:
        """Frame positions of anchors given their positions in the episode's anchor list."""
        if self.anchor_frames is None:
            return anchor_positions
        return self.anchor_frames[episode_position][anchor_positions]
