"""``finalize``: build ``index/`` and ``manifest.json`` from the shard receipts.

Needs only the destination (plan, receipts, shard parquet, ``meta/``), so a dependent SLURM
job can run it after the array of ``--part`` tasks. The manifest is written last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    FORMAT_NAME,
    FORMAT_VERSION,
    FPS_FORMAT_VERSION,
    INFO_PATH,
    MANIFEST_PATH,
    META_DIR,
    PLAN_PATH,
    PREROLL_FIELD,
    PREROLL_FORMAT_VERSION,
    SAMPLES_INDEX_PATH,
    FileEntry,
    Manifest,
    PackPlan,
    ParquetProfile,
    ShardEntry,
    ShardReceipt,
    episodes_index_schema,
    pad_column,
    parse_features,
    samples_index_schema,
    sha256_hex,
    shard_name,
    shard_parquet_path,
    video_column,
)
from lerobot_shards.core.format.lerobot_info import LeRobotInfo, parse_lerobot_info
from lerobot_shards.core.format.lerobot_reading import is_fractional_fps
from lerobot_shards.core.format.parquet.arrow_io import parquet_file
from lerobot_shards.core.option_fields import keyword_signature, merge_options
from lerobot_shards.core.storage import Storage
from lerobot_shards.core.windows import pad_counts, resolve_delta_timestamps
from lerobot_shards.packer.errors import PackError
from lerobot_shards.packer.options import PackOptions, PackRunOptions
from lerobot_shards.packer.run.journal import Journal
from lerobot_shards.packer.run.packed_info import packed_features
from lerobot_shards.packer.run.receipts import finished_receipts
from lerobot_shards.packer.version import packer_version


def _has_preroll(rows: list[dict], video_keys: list[str]) -> bool:
    """Whether any member starts before its episode (a receipt records its pre-roll only then):
    the pack is then format 4 (``PREROLL_FORMAT_VERSION``), whose index has the pre-roll columns."""
    return any(video_column(k, PREROLL_FIELD) in r for r in rows for k in video_keys)


def _format_version(rows: list[dict], video_keys: list[str], fps: float) -> int:
    """5 for a fractional fps (its index has the pre-roll columns too), 4 when a member has
    pre-roll, else 3: each pack is written in the oldest version that holds it."""
    if is_fractional_fps(fps):
        return FPS_FORMAT_VERSION
    return PREROLL_FORMAT_VERSION if _has_preroll(rows, video_keys) else FORMAT_VERSION


def _episodes_table(rows: list[dict], video_keys: list[str], *, preroll: bool) -> pa.Table:
    schema = episodes_index_schema(video_keys, preroll=preroll)
    # A pre-roll column holds 0 for the members that start on their episode's first frame.
    columns = {video_column(k, PREROLL_FIELD) for k in video_keys}
    return pa.table(
        {
            name: pa.array([r.get(name, 0) if name in columns else r[name] for r in rows], schema.field(name).type)
            for name in schema.names
        },
        schema=schema,
    )


def _write_parquet(
    storage: Storage, rel: str, table: pa.Table, profile: ParquetProfile, *, plain: Sequence[str] = ()
) -> FileEntry:
    """Write ``table`` to ``rel`` (``plain`` columns stored as they are); returns its size and
    digest for the manifest's ``files``."""
    data = profile.to_bytes(table, plain=plain)
    storage.write_bytes(rel, data)
    return FileEntry(len(data), sha256_hex(data))


def _repeated_digests(episodes: pa.Table, video_keys: Sequence[str]) -> list[str]:
    """The member digest columns in which a digest repeats (episodes whose video bytes are
    identical: a replicated dataset, a camera that recorded the same frames). Compressed, such a
    column takes fewer bytes than readers require of digests (16 a member, so a small index
    cannot claim many members), and the pack would be refused by every reader; stored as they
    are, they take their 64 bytes each. Columns of distinct digests keep the pack's compression."""
    repeated = []
    for key in video_keys:
        column = episodes[video_column(key, "sha256")]
        if len(column.unique()) < len(column):
            repeated.append(video_column(key, "sha256"))
    return repeated


def _meta_files(storage: Storage, plan: PackPlan, journal: Journal, trust_destination: bool) -> dict[str, FileEntry]:
    """Size and digest of every file in ``meta/``, hashed here and checked against what the
    pack journal records the pack copying (temp files of interrupted writes are not part of
    the dataset: ``Storage.list`` leaves them out).

    Raises:
        PackError: a ``meta/`` file that differs from what the pack wrote, or (unless
            ``trust_destination``) no journal record of the pack's ``meta/``.
    """
    entries = {}
    for rel in storage.list(META_DIR):
        digest, size = storage.digest(rel)
        entries[rel] = FileEntry(size, digest)
    recorded = journal.meta_files(plan.sha256)
    if recorded is None:
        if not trust_destination:
            raise PackError(
                f"{storage.url}: no record of this plan's meta/ in this machine's pack journal ({journal.dir}); "
                "finalize where the pack ran, or pass --trust-destination if only you can write this destination"
            )
        return entries
    if entries != recorded:
        changed = sorted(rel for rel in set(entries) | set(recorded) if entries.get(rel) != recorded.get(rel))
        raise PackError(
            f"{storage.url}: meta/ differs from what the pack wrote ({changed[:10]}); "
            "re-run `lerobot-shards pack` to copy it again"
        )
    return entries


def _features_of_what_was_packed(features: dict, parquet_fields: dict[str, pa.Field]) -> tuple[dict, dict | None]:
    """Make the manifest's tabular features describe the shard parquet when info.json and the
    data parquet disagree (the packer packs what the parquet holds).

    Returns:
        ``(features, drift)``: ``drift`` is None when they agree, else
        ``{"only_in_info": [...], "only_in_parquet": [...]}``.
    """
    if not parquet_fields:
        return features, None
    tabular = [k for k, f in features.items() if f.get("dtype") != "video"]  # JSON built above from parsed features
    only_in_info = [k for k in tabular if k not in parquet_fields]
    only_in_parquet = [k for k in parquet_fields if k not in features]
    if not only_in_info and not only_in_parquet:
        return features, None
    adjusted = {k: f for k, f in features.items() if k not in only_in_info}
    for name in only_in_parquet:
        adjusted[name] = _feature_of_field(parquet_fields[name])
    return adjusted, {"only_in_info": only_in_info, "only_in_parquet": only_in_parquet}


def _feature_of_field(field: pa.Field) -> dict:
    """A LeRobot-style feature entry for a parquet column info.json does not declare."""
    arrow_type, shape = field.type, [1]
    if pa.types.is_fixed_size_list(arrow_type):
        arrow_type, shape = arrow_type.value_type, [arrow_type.list_size]
    elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        arrow_type, shape = arrow_type.value_type, [None]
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        dtype = "string"
    else:
        try:
            dtype = np.dtype(arrow_type.to_pandas_dtype()).name
        except (NotImplementedError, TypeError):
            dtype = str(arrow_type)
    return {"dtype": dtype, "shape": shape, "names": None}


@keyword_signature(PackRunOptions)
def finalize(
    dst: str,
    *,
    run: PackRunOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    **overrides: Any,
) -> Manifest:
    """Write ``index/episodes.parquet``, ``index/samples.parquet`` and ``manifest.json``.

    ``progress(shards indexed, shards)`` is called after each shard's rows are indexed. Of the
    run options (``run``, or its fields by name) finalize uses how to reach ``dst``
    (``storage_options``, ``retry``) and the pack journal: only what the journal (``journal``,
    see ``pack_dataset``) records this machine writing is published: receipts byte for byte,
    ``meta/`` by digest, and each shard parquet is hashed as it is read.
    ``trust_destination`` accepts receipts written elsewhere, re-hashing their files.

    Returns:
        The written ``Manifest``.

    Raises:
        PackError: no plan, shards without a valid receipt (names them), receipts or
            ``meta/`` files the journal does not record, or files that differ from them.
        StorageError: the destination failed beyond the retry policy.
        ArgumentError: a keyword that is no run option.
    """
    run = merge_options(PackRunOptions, run, overrides, caller="finalize")
    storage = Storage(dst, run.storage_options, retry=run.retry)
    plan, journal = _read_plan(storage, run)
    files = _meta_files(storage, plan, journal, run.trust_destination)
    info = _read_info(storage, files)
    video_keys = info.features.video_keys
    receipts = finished_receipts(storage, plan, video_keys, journal, trust_destination=run.trust_destination)
    try:  # the plan is the destination's file: its options are parsed once, here
        options = PackOptions.from_recorded(plan.options, where=storage.describe(PLAN_PATH))
    except FormatError as err:
        raise PackError(f"{storage.url}: cannot finalize: {err}") from None
    fps = info.fps
    windows = {name: resolve_delta_timestamps(w, fps, tolerance_s=options.tolerance_s) for name, w in options.windows.items()}
    profile = options.parquet_profile()
    episode_rows, sample_tables, shard_entries = [], [], []
    parquet_fields: dict[str, pa.Field] = {}
    for receipt in receipts:
        episode_rows += [{**row, "shard": receipt.shard} for row in receipt.episodes]
        shard_entries.append(_shard_entry(receipt))
        parquet = _checked_shard_parquet(storage, receipt)
        for field in parquet.schema_arrow:
            parquet_fields.setdefault(field.name, field)
        sample_tables.append(_sample_rows(parquet, receipt, windows))
        if progress is not None:
            progress(len(sample_tables), len(receipts))

    episode_rows.sort(key=lambda r: r["episode_index"])
    version = _format_version(episode_rows, video_keys, fps)
    episodes = _episodes_table(episode_rows, video_keys, preroll=version >= PREROLL_FORMAT_VERSION)
    files[EPISODES_INDEX_PATH] = _write_parquet(
        storage, EPISODES_INDEX_PATH, episodes, profile, plain=_repeated_digests(episodes, video_keys)
    )
    schema = samples_index_schema(options.windows)
    samples = pa.concat_tables(sample_tables).sort_by("index") if sample_tables else schema.empty_table()
    files[SAMPLES_INDEX_PATH] = _write_parquet(storage, SAMPLES_INDEX_PATH, samples.cast(schema), profile)
    features, drift = _features_of_what_was_packed(packed_features(info.features, info.raw, options), parquet_fields)
    manifest = _manifest(plan, options, fps, features, video_keys, shard_entries, files, episode_rows, receipts, drift)
    storage.write_bytes(MANIFEST_PATH, manifest.to_json().encode())
    return manifest


# -- the steps of finalize ------------------------------------------------------------------------


def _read_plan(storage: Storage, run: PackRunOptions) -> tuple[PackPlan, Journal]:
    """The destination's recorded plan and this machine's journal for it.

    Raises:
        PackError: no plan (pack first), or one that does not parse.
    """
    if not storage.exists(PLAN_PATH):
        raise PackError(f"{storage.url}: no {PLAN_PATH}; run `lerobot-shards pack` first")
    journal = Journal(storage.url, run.journal)
    try:
        return PackPlan.from_json(storage.read_bytes(PLAN_PATH), where=storage.describe(PLAN_PATH)), journal
    except FormatError as err:
        raise PackError(f"{storage.url}: cannot finalize: {err}") from None


def _read_info(storage: Storage, files: dict) -> LeRobotInfo:
    """The packed ``meta/info.json``, checked against the digest the journal recorded for it.

    Raises:
        PackError: it changed since the pack copied it, or does not parse.
    """
    info_bytes = storage.read_bytes(INFO_PATH)
    if INFO_PATH not in files or sha256_hex(info_bytes) != files[INFO_PATH].sha256:
        raise PackError(f"{storage.describe(INFO_PATH)}: changed while finalizing; re-run finalize")
    try:  # the pack's own info.json (packed_info wrote it), parsed as a reader of the pack parses it
        return parse_lerobot_info(info_bytes, where=storage.describe(INFO_PATH))
    except FormatError as err:
        raise PackError(f"{storage.url}: cannot finalize: {err}") from None


def _shard_entry(receipt: ShardReceipt) -> ShardEntry:
    """The manifest's record of one shard, from its receipt."""
    return ShardEntry(
        index=receipt.shard,
        name=shard_name(receipt.shard),
        num_episodes=len(receipt.episodes),
        frames=receipt.frames,
        tar_bytes=receipt.tar_bytes,
        tar_sha256=receipt.tar_sha256,
        parquet_bytes=receipt.parquet_bytes,
        parquet_sha256=receipt.parquet_sha256,
        parquet_footer=receipt.parquet_footer,
    )


def _checked_shard_parquet(storage: Storage, receipt: ShardReceipt):
    """A shard's parquet, read once and hashed against its receipt before it is parsed.

    Raises:
        PackError: the bytes differ from what the receipt records.
    """
    path = shard_parquet_path(receipt.shard)
    parquet_bytes = storage.read_bytes(path)
    if len(parquet_bytes) != receipt.parquet_bytes or sha256_hex(parquet_bytes) != receipt.parquet_sha256:
        raise PackError(
            f"{storage.describe(path)}: does not match the digest its receipt records "
            "(changed after the pack wrote it); delete its receipt and re-run that shard's pack"
        )
    return parquet_file(parquet_bytes)


def _sample_rows(parquet, receipt: ShardReceipt, windows: dict[str, dict[str, np.ndarray]]) -> pa.Table:
    """One shard's rows of ``index/samples.parquet``: where each frame lives, and how many slots
    of each window key fall before or after its episode."""
    table = parquet.read(columns=["index", "episode_index", "frame_index", "timestamp", "task_index"], use_threads=False)
    lengths = {r["episode_index"]: r["length"] for r in receipt.episodes}
    episode_of_row = table["episode_index"].to_numpy()
    frame_index = table["frame_index"].to_numpy()
    length = np.array([lengths[e] for e in episode_of_row], dtype=np.int64) if len(episode_of_row) else np.zeros(0, np.int64)
    columns = {
        "index": table["index"].cast(pa.int64()),
        "episode_index": table["episode_index"].cast(pa.int64()),
        "frame_index": table["frame_index"].cast(pa.int64()),
        "shard": pa.array(np.full(table.num_rows, receipt.shard, dtype=np.int32)),
        "row": pa.array(np.arange(table.num_rows, dtype=np.int64)),
        "timestamp": table["timestamp"].cast(pa.float32()),
        "task_index": table["task_index"].cast(pa.int64()),
    }
    for name, offsets in windows.items():
        for key, key_offsets in offsets.items():
            before, after = pad_counts(frame_index, length, key_offsets)
            columns[pad_column(name, key, "before")] = pa.array(before)
            columns[pad_column(name, key, "after")] = pa.array(after)
    return pa.table(columns)


def _manifest(
    plan: PackPlan,
    parsed: PackOptions,
    fps: float,
    features: dict,
    video_keys: list[str],
    shard_entries: list[ShardEntry],
    files: dict,
    episode_rows: list[dict],
    receipts: list[ShardReceipt],
    drift: dict | None,
) -> Manifest:
    """The manifest that publishes the pack: what was packed, every file's digest, the totals."""
    extra: dict = {
        "dropped_episodes": sorted(e for r in receipts for e in r.dropped),
        "padded_episodes": sorted(e for r in receipts for e in r.padded),
        "reencoded_episodes": sorted(e for r in receipts for e in r.reencoded),
    }
    trimmed = sorted(e for r in receipts for e in r.trimmed)
    if trimmed:  # only then: manifests of packs without a longer video keep their bytes
        extra["trimmed_episodes"] = trimmed
    if drift:
        extra["schema_drift"] = drift
    return Manifest(
        format=FORMAT_NAME,
        format_version=_format_version(episode_rows, video_keys, fps),
        packer_version=packer_version(),
        options={k: v for k, v in plan.options.items() if k not in ("row_group_max_bytes",)},
        source=plan.source,
        fps=fps,
        features=parse_features(features, where=MANIFEST_PATH),
        video_keys=video_keys,
        windows=parsed.windows,
        tolerance_s=parsed.tolerance_s,
        shards=shard_entries,
        files=dict(sorted(files.items())),
        totals={
            "episodes": len(episode_rows),
            "frames": int(sum(r["length"] for r in episode_rows)),
            "shards": len(shard_entries),
            "bytes": int(sum(s.tar_bytes + s.parquet_bytes for s in shard_entries)),
        },
        extra=extra,
    )
