"""Loading a packed dataset's manifest and indexes, and selecting anchors.

Loaded once per consumer; everything the epoch plan needs (anchor counts per episode) comes
from here without touching shard data.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from reader.format import (
    EPISODES_INDEX_PATH,
    MANIFEST_PATH,
    SAMPLES_INDEX_PATH,
    FormatError,
    Manifest,
    video_column,
)
from reader.storage import ObjectNotFoundError, Storage


@dataclass(frozen=True)
class CameraMember:
    offset: int
    size: int
    frames: int
    crc32: int
    codec: str


@dataclass(frozen=True)
class EpisodeEntry:
    """One packed episode: where its rows and members are."""

    episode_index: int
    shard: int
    length: int
    dataset_from_index: int
    row_start: int
    row_group: int
    tasks: tuple[str, ...]
    cameras: dict[str, CameraMember]

    @property
    def byte_range(self) -> tuple[int, int]:
        """``(offset, size)`` covering every member (they are adjacent in the tar)."""
        if not self.cameras:
            return 0, 0
        start = min(m.offset for m in self.cameras.values())
        stop = max(m.offset + m.size for m in self.cameras.values())
        return start, stop - start


class PackedIndex:
    """Manifest + ``index/episodes.parquet`` (+ the sample index when filtering anchors).

    Attributes:
        manifest: the validated ``Manifest``.
        episodes: selected ``EpisodeEntry`` list, ascending episode index.
        anchor_counts: (E,) anchors per selected episode.
        anchor_frames: ``None`` when every frame is an anchor, else per episode an int64
            array of anchor frame positions (ascending).
    """

    def __init__(
        self,
        storage: Storage,
        *,
        episodes: list[int] | None = None,
        where: str | None = None,
    ):
        self.storage = storage
        try:
            self.manifest = Manifest.from_json(storage.read_bytes(MANIFEST_PATH), where=storage.describe(MANIFEST_PATH))
        except ObjectNotFoundError:
            raise FormatError(
                f"{storage.describe(MANIFEST_PATH)}: missing; not a packed dataset, or its pack has not finished"
            ) from None
        table = pq.read_table(io.BytesIO(storage.read_bytes(EPISODES_INDEX_PATH)))
        all_entries = self._entries(table)
        self._check_against_manifest(all_entries)
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

    def _entries(self, table: pa.Table) -> list[EpisodeEntry]:
        manifest = self.manifest
        required = ["episode_index", "shard", "length", "dataset_from_index", "row_start", "row_group", "tasks"]
        required += [video_column(k, f) for k in manifest.video_keys for f in ("offset", "size", "frames", "crc32", "codec")]
        missing = [c for c in required if c not in table.column_names]
        if missing:
            raise FormatError(f"{self.storage.describe(EPISODES_INDEX_PATH)}: missing columns {missing}")
        columns = {c: table[c].to_pylist() for c in required}
        entries = []
        for i in range(table.num_rows):
            cameras = {
                key: CameraMember(
                    offset=columns[video_column(key, "offset")][i],
                    size=columns[video_column(key, "size")][i],
                    frames=columns[video_column(key, "frames")][i],
                    crc32=columns[video_column(key, "crc32")][i],
                    codec=columns[video_column(key, "codec")][i],
                )
                for key in manifest.video_keys
            }
            entries.append(
                EpisodeEntry(
                    episode_index=columns["episode_index"][i],
                    shard=columns["shard"][i],
                    length=columns["length"][i],
                    dataset_from_index=columns["dataset_from_index"][i],
                    row_start=columns["row_start"][i],
                    row_group=columns["row_group"][i],
                    tasks=tuple(columns["tasks"][i]),
                    cameras=cameras,
                )
            )
        return entries

    def _check_against_manifest(self, entries: list[EpisodeEntry]) -> None:
        manifest = self.manifest
        where = self.storage.describe(EPISODES_INDEX_PATH)
        if len(entries) != manifest.totals["episodes"]:
            raise FormatError(f"{where}: {len(entries)} episodes but the manifest says {manifest.totals['episodes']}")
        frames = sum(e.length for e in entries)
        if frames != manifest.totals["frames"]:
            raise FormatError(f"{where}: {frames} frames but the manifest says {manifest.totals['frames']}")
        shard_bytes = {s.index: s.tar_bytes for s in manifest.shards}
        for e in entries:
            if e.shard not in shard_bytes:
                raise FormatError(f"{where}: episode {e.episode_index} is in shard {e.shard}, which the manifest lacks")
            for key, member in e.cameras.items():
                if member.offset < 0 or member.offset + member.size > shard_bytes[e.shard]:
                    raise FormatError(
                        f"{where}: episode {e.episode_index} camera {key}: member [{member.offset}, "
                        f"{member.offset + member.size}) lies outside shard {e.shard} ({shard_bytes[e.shard]} bytes)"
                    )

    def _filtered_anchors(self, where: str) -> list[np.ndarray]:
        """Anchors matching a DuckDB SQL predicate over ``index/samples.parquet``.

        DuckDB reads the file itself (remote roots through the storage's fsspec filesystem),
        so only the columns the predicate uses are read, never the whole index into memory.
        """
        import duckdb  # only needed for where=

        con = duckdb.connect()
        try:
            root = self.storage.register_with_duckdb(con)
            source = f"{root}/{SAMPLES_INDEX_PATH}".replace("'", "''")
            try:
                selected = con.execute(
                    f"SELECT episode_index, frame_index FROM read_parquet('{source}') WHERE ({where}) "
                    "ORDER BY episode_index, frame_index"
                ).fetchnumpy()
            except duckdb.IOException as err:
                raise FormatError(f"{self.storage.object_url(SAMPLES_INDEX_PATH)}: cannot read it for where= ({err})") from None
            except duckdb.Error as err:
                raise ValueError(f"where={where!r} is not a valid predicate over {SAMPLES_INDEX_PATH}: {err}") from None
        finally:
            con.close()
        episode = np.asarray(selected["episode_index"], dtype=np.int64)
        frame = np.asarray(selected["frame_index"], dtype=np.int64)
        anchors = []
        for entry in self.episodes:
            lo, hi = np.searchsorted(episode, entry.episode_index), np.searchsorted(episode, entry.episode_index, side="right")
            anchors.append(np.ascontiguousarray(frame[lo:hi], dtype=np.int64))
        return anchors

    def anchor_frame(self, episode_position: int, anchor_positions: np.ndarray) -> np.ndarray:
        """Frame positions of anchors given their positions in the episode's anchor list."""
        if self.anchor_frames is None:
            return anchor_positions
        return self.anchor_frames[episode_position][anchor_positions]
