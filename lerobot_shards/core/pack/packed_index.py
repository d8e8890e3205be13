"""Loading a packed dataset's manifest and indexes, checked, and selecting anchors.

Loaded once per dataset object; everything the epoch plan needs (anchor counts per episode)
comes from here without touching shard data. Every byte is checked on its way in: the
manifest (bounded size, schema, ``content_sha256``, an optional pin), then each file by the
size and SHA-256 the manifest records (``verified_read``), then the episodes index against
the manifest (``lerobot_shards.core.format.parse_episodes_index``).
"""

from __future__ import annotations

import os
import shlex
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from lerobot_shards.core.errors import (
    ArgumentError,
    FormatError,
    IntegrityError,
    NotAPackError,
    ObjectNotFoundError,
    PredicateError,
    ShortReadError,
)
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    INFO_PATH,
    MANIFEST_PATH,
    PLAN_PATH,
    SAMPLES_INDEX_PATH,
    STATS_PATH,
    TASKS_PATH,
    CameraMember,
    EpisodeEntry,
    Manifest,
    check_bytes,
    parse_episodes_index,
    sha256_hex,
    sql_string_literal,
)
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.lerobot_info import LeRobotInfo, parse_lerobot_info
from lerobot_shards.core.format.lerobot_reading import read_tasks
from lerobot_shards.core.format.limits import (
    MAX_DECODED_BYTES,
    MAX_INDEX_FILE_BYTES,
    MAX_JSON_DEPTH,
    MAX_MANIFEST_BYTES,
    MAX_RECORD_BYTES,
    MAX_STATS_BYTES,
    MAX_TASK_BYTES,
    MAX_TASKS,
)
from lerobot_shards.core.format.parquet import Budget, open_bounded
from lerobot_shards.core.storage import Storage, bucket_of

__all__ = [
    "CameraMember",
    "EpisodeEntry",
    "PackedIndex",
    "check_packed_metadata",
    "load_tasks",
    "parse_tasks",
    "read_manifest",
    "read_json_file",
    "read_recorded",
    "read_recorded_all",
    "read_stats",
    "verified_read",
    "verified_reads",
]


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
        folder = storage.url.rstrip("/").rsplit("/", 1)[0] if "/" in storage.url else "."
        raise NotAPackError(f"{storage.url} is a mixture file, not a packed dataset: {_mixture_advice(folder)}", reason="mixture")
    if storage.is_local and os.path.isfile(storage.path("")):
        raise NotAPackError(f"{storage.url} is a file; a packed dataset is the directory that holds manifest.json", reason="file")
    try:
        # One request: at most one byte beyond the bound tells a manifest that is too large.
        data = storage.read_prefix(MANIFEST_PATH, MAX_MANIFEST_BYTES + 1)
    except ObjectNotFoundError as err:
        if storage.is_local and not os.path.exists(storage.path("")):
            raise NotAPackError(f"{storage.url}: no such directory (so no {MANIFEST_PATH})", reason="missing") from None
        if err.missing_bucket:
            raise NotAPackError(
                f"{storage.url}: no such bucket {bucket_of(storage.url)!r} (check the URL and the endpoint, "
                "storage_options / --storage-options)",
                reason="bucket",
            ) from None
        missing = storage.missing_root()
        if missing:
            raise NotAPackError(f"{storage.url}: {missing}", reason="missing") from None
        if storage.exists("mixture.json"):
            raise NotAPackError(
                f"{storage.url} holds a mixture.json, not a packed dataset: {_mixture_advice(storage.url)}", reason="mixture"
            ) from None
        if storage.exists(INFO_PATH) and not storage.exists(PLAN_PATH):  # a pack being written has its plan
            raise NotAPackError(
                f"{storage.url} is a LeRobot dataset, not a pack: pack it with "
                f"`lerobot-shards pack {shlex.quote(storage.url)} {shlex.quote(storage.url.rstrip('/') + '-packed')}`",
                reason="lerobot",
            ) from None
        raise NotAPackError(
            f"{storage.url}: no {MANIFEST_PATH}; not a packed dataset, or its pack has not finished", reason="unfinished"
        ) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise FormatError(f"{where}: more than the {MAX_MANIFEST_BYTES} bytes a manifest may have")
    return Manifest.from_json(data, where=where, expected_sha256=manifest_sha256), "sha256:" + sha256_hex(data)


def _mixture_advice(folder: str) -> str:
    """What reads a mixture from the command line and from Python."""
    quoted = shlex.quote(folder)
    return (
        f"`lerobot-shards mixture report {quoted}` describes it, and `info`, `sql` and `preview` take each of its packs "
        f"({quoted}/NAME); from Python, open it with lerobot_shards.MixtureDataset"
    )


def verified_read(storage: Storage, manifest: Manifest, rel: str, *, max_bytes: int = MAX_INDEX_FILE_BYTES) -> bytes:
    """The bytes of ``rel`` (an ``index/`` or ``meta/`` file), checked against the size and
    SHA-256 the manifest records for it; nothing is read when it records more than
    ``max_bytes``.

    Raises:
        FormatError: the manifest records nothing for ``rel``, or more than ``max_bytes``.
        IntegrityError: the file differs from what was packed.
        StorageError: the read failed.
    """
    return verified_reads(storage, manifest, [rel], max_bytes=max_bytes)[rel]


def verified_reads(
    storage: Storage, manifest: Manifest, rels: list[str], *, max_bytes: int = MAX_INDEX_FILE_BYTES
) -> dict[str, bytes]:
    """``verified_read`` of each of ``rels`` in one round of requests (see ``read_recorded_all``).

    Raises:
        As ``verified_read``, for the first of ``rels`` that fails.
    """
    recorded = {}
    for rel in rels:
        entry = manifest.file(rel)
        if entry.bytes > max_bytes:
            raise FormatError(
                f"{storage.describe(rel)}: the manifest records {entry.bytes} bytes, more than the {max_bytes} allowed"
            )
        recorded[rel] = (rel, entry.bytes, entry.sha256)
    return read_recorded_all(storage, recorded)


def read_recorded_all(storage: Storage, files: dict[str, tuple[str, int, str]]) -> dict[str, bytes]:
    """``read_recorded`` of each ``{key: (rel, size, sha256)}``, issued together (threads) when
    the storage is remote: one round trip for all instead of one per file.

    Raises:
        As ``read_recorded``, for the first key that fails (in the given order).
    """
    if storage.is_local or len(files) < 2:
        return {key: read_recorded(storage, rel, size=size, sha256=sha) for key, (rel, size, sha) in files.items()}
    with ThreadPoolExecutor(max_workers=len(files), thread_name_prefix="lerobot-shards-open") as pool:
        futures = {
            key: pool.submit(read_recorded, storage, rel, size=size, sha256=sha) for key, (rel, size, sha) in files.items()
        }
        return {key: future.result() for key, future in futures.items()}


def read_json_file(
    storage: Storage, manifest: Manifest, rel: str, *, max_bytes: int = MAX_RECORD_BYTES, allow_nan: bool = False
) -> Any:
    """A ``meta/`` JSON file (``info.json``, ``stats.json``), checked by digest, then parsed
    within ``max_bytes`` and ``MAX_JSON_DEPTH`` (see ``fields.load_json``).

    Raises:
        FormatError: beyond those bounds, or not JSON (names the file).
        IntegrityError: the file differs from what was packed.
    """
    data = verified_read(storage, manifest, rel, max_bytes=max_bytes)
    return load_json(
        data, where=storage.describe(rel), max_bytes=max_bytes, max_depth=MAX_JSON_DEPTH, allow_nan=allow_nan, lerobot_file=True
    )


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
        raise IntegrityError(
            f"{storage.describe(rel)}: shorter than the {size} bytes recorded (damaged or replaced): {err}"
        ) from err
    check_bytes(data, size=size, sha256=sha256, where=storage.describe(rel))
    return data


def load_tasks(storage: Storage, manifest: Manifest) -> dict[int, str]:
    """``{task_index: task}`` from ``meta/tasks.parquet``, checked against the manifest, then
    read within bounds: at most ``MAX_TASKS`` rows of strings of at most ``MAX_TASK_BYTES``,
    decoding to at most ``MAX_EXPANSION`` times the file (``parquet.read_bounded``).

    Raises:
        IntegrityError: the file differs from what was packed.
        FormatError: not a parquet file, without integer ``task_index`` and string ``task``
            columns, or beyond a bound (names the file, the bound and what was found).
    """
    where = storage.describe(TASKS_PATH)
    data = verified_read(storage, manifest, TASKS_PATH)
    return parse_tasks(data, where=where)


def parse_tasks(data: bytes, *, where: str) -> dict[int, str]:
    """``{task_index: task}`` from the bytes of a LeRobot ``meta/tasks.parquet`` (see ``load_tasks``).

    Raises:
        FormatError: see ``load_tasks``.
    """
    return read_tasks(data, where=where, max_rows=MAX_TASKS, max_task_bytes=MAX_TASK_BYTES).names


def check_packed_metadata(rel: str, data: bytes, *, where: str) -> None:
    """Parse a ``meta/`` file as a reader of the pack will (``info.json``, ``tasks.parquet``,
    ``stats.json``): the packer runs this on every file it copies, so a pack is never written
    that its own ``verify`` or readers refuse.

    Raises:
        FormatError: what the reader's parser raises for those bytes (names ``where``).
    """
    if rel == INFO_PATH:
        parse_lerobot_info(data, where=where)
    elif rel == TASKS_PATH:
        parse_tasks(data, where=where)
    elif rel == STATS_PATH:
        value = load_json(
            data, where=where, max_bytes=MAX_STATS_BYTES, max_depth=MAX_JSON_DEPTH, allow_nan=True, lerobot_file=True
        )
        if not isinstance(value, dict):
            raise FormatError(f"{where}: must hold a JSON object, found {type(value).__name__}")


def read_stats(storage: Storage, manifest: Manifest) -> dict:
    """``meta/stats.json`` as JSON (``{}`` when the pack has none): checked by digest, at most
    ``MAX_STATS_BYTES``; non-finite numbers are kept (LeRobot writes them).

    Raises:
        FormatError: too large, not JSON or not an object (names the file).
        IntegrityError: the file differs from what was packed.
    """
    if STATS_PATH not in manifest.files:
        return {}
    value = read_json_file(storage, manifest, STATS_PATH, max_bytes=MAX_STATS_BYTES, allow_nan=True)
    if not isinstance(value, dict):
        raise FormatError(f"{storage.describe(STATS_PATH)}: must hold a JSON object, found {type(value).__name__}")
    return value


def check_predicate(where: str) -> None:
    """Parse ``where`` as the predicate of ``SELECT ... FROM samples WHERE (...)``, reading
    nothing: a syntax error is the same for every dataset, so callers check once, first.

    Raises:
        PredicateError: DuckDB's parser message (multi-line, with its ``^`` pointer).
    """
    import duckdb

    con = duckdb.connect()
    try:
        con.extract_statements(f"SELECT episode_index, frame_index FROM samples WHERE ({where})")
    except duckdb.Error as err:
        raise PredicateError(f"where={where!r} is not a valid SQL predicate: {err}") from None
    finally:
        con.close()


class PackedIndex:
    """Manifest + ``index/episodes.parquet`` (+ the sample index when filtering anchors).

    Attributes:
        manifest: the validated ``Manifest``.
        manifest_sha256: ``"sha256:<hex>"`` of the manifest's bytes (its pin).
        episodes: the selected episodes, an ``EpisodeTable`` (columns), ascending episode index.
        all_episodes: every episode of the dataset (the selection's superset).
        anchor_counts: (E,) anchors per selected episode.
        anchor_frames, anchor_start: ``None`` when every frame is an anchor, else the anchor
            frame positions of all selected episodes in one int64 array, episode ``i``'s at
            ``anchor_frames[anchor_start[i]:anchor_start[i + 1]]`` (ascending).

    Opening costs O(episodes x cameras) vectorized (no Python step per episode), plus the
    ``where`` query over the sample index when given.

    ``tasks`` is ``{task_index: task}`` of ``meta/tasks.parquet`` (see ``load_tasks``).
    ``with_tasks`` also reads each episode's task list (``EpisodeEntry.tasks``; otherwise
    empty: a sample's task comes from ``meta/tasks.parquet`` through its row).

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
        with_tasks: bool = False,
    ):
        self.storage = storage
        self.manifest, self.manifest_sha256 = read_manifest(storage, manifest_sha256=manifest_sha256)
        # Everything else opening needs, in one round of requests (a distant bucket: a round
        # trip each, once), each checked against the manifest before it is parsed.
        wanted = [EPISODES_INDEX_PATH, TASKS_PATH] + [INFO_PATH] * (INFO_PATH in self.manifest.files)
        if where is not None:
            check_predicate(where)  # before the sample index is read: a syntax error needs no data
        self._files = verified_reads(storage, self.manifest, wanted + [SAMPLES_INDEX_PATH] * (where is not None))
        table = parse_episodes_index(
            self._files.pop(EPISODES_INDEX_PATH),
            self.manifest,
            where=storage.describe(EPISODES_INDEX_PATH),
            with_tasks=with_tasks,
        )
        self.all_episodes = table
        self._check_info()
        self.tasks = parse_tasks(self._files.pop(TASKS_PATH), where=storage.describe(TASKS_PATH))
        if episodes is not None:
            wanted = np.unique(np.asarray(list(episodes), dtype=np.int64))
            found = table.positions(wanted)
            if (found < 0).any():
                unknown = wanted[found < 0][:20].tolist()
                raise ArgumentError(f"episodes {unknown} are not in {storage.url} (it has {len(table)} episodes)")
            table = table.take(found)
        self.episodes = table
        self.anchor_frames: np.ndarray | None = None
        self.anchor_start: np.ndarray | None = None
        if where is None:
            self.anchor_counts = table.length
        else:
            self.anchor_frames, self.anchor_start = self._filtered_anchors(where)
            self.anchor_counts = np.diff(self.anchor_start)
        if episodes is not None or where is not None:
            if int(self.anchor_counts.sum()) == 0:
                selection = " and ".join(
                    s
                    for s in (
                        f"episodes={list(episodes)[:10]}" if episodes is not None else "",
                        f"where={where!r}" if where is not None else "",
                    )
                    if s
                )
                raise ArgumentError(f"{selection} selects no anchor of {storage.url} ({self.manifest.totals['frames']} frames)")

    def _check_info(self) -> None:
        """``meta/info.json`` (checked by digest) must agree with the manifest on what both
        record: the fps (the windows, and so every windowed sample, depend on it) and each
        feature's kind, dtype and depth quantizer (the manifest's decide how samples are read,
        the packed copy is what LeRobot metadata gives); a value feature's shape too (cameras'
        may differ by ``--resize``). Kept parsed as ``self.info`` (None when the pack has none).

        Raises:
            FormatError: names the field on which the two disagree.
        """
        self.info: LeRobotInfo | None = None
        if INFO_PATH not in self.manifest.files:
            if self.storage.exists(INFO_PATH):  # packs copy meta/info.json: one not listed was dropped from the list
                raise IntegrityError(
                    f"{self.storage.describe(INFO_PATH)} is in the pack but its manifest does not list it: one of the "
                    "two was altered after packing; pack it again"
                )
            return
        where = self.storage.describe(INFO_PATH)
        info = parse_lerobot_info(self._files.pop(INFO_PATH), where=where)
        if info.fps != self.manifest.fps:
            raise FormatError(f"{where}: fps {info.fps} disagrees with the manifest's {self.manifest.fps}")
        # The two differ in keys only where the packer said so: a column only the data parquet
        # had, or a feature only info.json declared (the manifest's schema_drift).
        drift = self.manifest.extra.get("schema_drift")
        drift = drift if isinstance(drift, dict) else {}
        only_parquet, only_info = drift.get("only_in_parquet") or [], drift.get("only_in_info") or []
        unexplained = sorted(
            [k for k in self.manifest.features if k not in info.features and k not in only_parquet]
            + [k for k in info.features if k not in self.manifest.features and k not in only_info]
        )
        if unexplained:
            raise FormatError(
                f"{where}: features {unexplained[:10]} are in one of info.json and the manifest only, which its "
                "schema_drift does not explain: one of the two was altered after packing"
            )
        for key, packed in self.manifest.features.items():
            source = info.features.get(key)
            if source is None:
                continue  # a column only the data parquet had (the manifest's schema_drift)
            same = (packed.kind, packed.dtype, packed.depth) == (source.kind, source.dtype, source.depth)
            # names too: meta.features is the manifest's, and a trainer reads the names from it
            # (a re-sealed manifest with other names changed what `meta` said, found by the fuzzer).
            named = packed.raw.get("names") == source.raw.get("names")
            # Shapes of values and language columns too (a camera's may change: --resize).
            shaped = packed.kind in ("video", "image") or packed.raw.get("shape") == source.raw.get("shape")
            if not same or not named or not shaped or (packed.kind == "value" and packed.shape != source.shape):
                raise FormatError(
                    f"{where}: feature {key!r} disagrees with the manifest's (dtype, shape, names or depth "
                    "quantizer): one of the two was altered after packing"
                )
        self.info = info

    def _filtered_anchors(self, where: str) -> tuple[np.ndarray, np.ndarray]:
        """Anchors matching a DuckDB SQL predicate over ``index/samples.parquet``.

        The file is read once and checked against its recorded digest, its row count against
        the manifest's frames and its pages against the format's bounds (``open_bounded``),
        then DuckDB queries that checked copy (in a private temporary file), so only the
        columns the predicate uses are decoded and the rows it sees are the packed ones.
        """
        import duckdb  # only needed for where=

        data = self._files.pop(SAMPLES_INDEX_PATH)
        frames = self.manifest.totals["frames"]
        open_bounded(
            data,
            where=self.storage.describe(SAMPLES_INDEX_PATH),
            rows=frames,
            max_rows=frames,
            rows_expected=f"the manifest records {frames} frames",
            budget=Budget(max_bytes=MAX_DECODED_BYTES),
        )
        with tempfile.TemporaryDirectory(prefix="lerobot-shards-where-") as tmp:
            path = os.path.join(tmp, "samples.parquet")
            with open(path, "wb") as handle:
                handle.write(data)
            del data
            con = duckdb.connect()
            try:
                # A view named as the CLI's: DuckDB's message then quotes `samples`, not a temp path.
                con.execute(f"CREATE VIEW samples AS SELECT * FROM read_parquet({sql_string_literal(path)})")
                selected = con.execute(
                    f"SELECT episode_index, frame_index FROM samples WHERE ({where}) ORDER BY episode_index, frame_index"
                ).fetchnumpy()
            except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException) as err:
                # The predicate itself is wrong (a column this index lacks, a typo): DuckDB's lines kept.
                raise PredicateError(f"where={where!r} is not a valid predicate over {SAMPLES_INDEX_PATH}: {err}") from None
            except duckdb.Error as err:
                raise ArgumentError(f"where={where!r} is not a valid predicate over {SAMPLES_INDEX_PATH}: {err}") from None
            finally:
                con.close()
        episode = np.asarray(selected["episode_index"], dtype=np.int64)
        frame = np.asarray(selected["frame_index"], dtype=np.int64)
        # Rows come sorted by (episode, frame); each selected episode's anchors are one slice.
        table = self.episodes
        start = np.searchsorted(episode, table.episode_index, side="left")
        stop = np.searchsorted(episode, table.episode_index, side="right")
        counts = stop - start
        owner = np.repeat(np.arange(len(table)), counts)
        rows = (
            np.arange(int(counts.sum()), dtype=np.int64)
            - np.repeat(np.cumsum(counts) - counts, counts)
            + np.repeat(start, counts)
        )
        frames = frame[rows]
        same = owner[1:] == owner[:-1]
        bad = (frames < 0) | (frames >= table.length[owner])
        bad[1:] |= same & (frames[1:] <= frames[:-1])
        if bad.any():
            e = int(table.episode_index[owner[int(np.argmax(bad))]])
            raise FormatError(
                f"{self.storage.describe(SAMPLES_INDEX_PATH)}: anchors of episode {e} "
                f"are not distinct frames in [0, {int(table.length[owner[int(np.argmax(bad))]])})"
            )
        return np.ascontiguousarray(frames), np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def anchor_frame(self, episode_position: int, anchor_positions: np.ndarray) -> np.ndarray:
        """Frame positions of anchors given their positions in the episode's anchor list."""
        if self.anchor_frames is None or self.anchor_start is None:
            return anchor_positions
        return self.anchor_frames[self.anchor_start[episode_position] + np.asarray(anchor_positions, dtype=np.int64)]
