"""The packer's own records in a destination: ``pack-plan.json`` and the shard receipts.

Both are read back when a pack resumes, when another ``--part`` runs and by ``finalize``, so
they are parsed with the same care as a manifest: bounded JSON, every field checked, errors
naming the file and field. A plan fixes which episodes go to which shard (and the source it
was made from); a receipt, written after its shard's tar and parquet, is what makes the shard
count as done.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format.fields import Fields, canonical_json, is_int, load_json, sha256_hex
from lerobot_shards.core.format.indexes import EPISODE_COLUMNS, MEMBER_COLUMN_TYPES
from lerobot_shards.core.format.layout import PREROLL_FIELD, shard_receipt_path, video_column
from lerobot_shards.core.format.limits import (
    MAX_EPISODE_TASKS,
    MAX_FOOTER_BYTES,
    MAX_JSON_DEPTH,
    MAX_RECORD_BYTES,
    MAX_TASK_BYTES,
)
from lerobot_shards.core.format.manifest import FooterEntry

PLAN_PATH = "pack-plan.json"
_MAX_COUNT = 1 << 62  # an index value: what an int64 column holds (finalize writes it there)


def _fits(value: Any, arrow_type: pa.DataType) -> bool:
    """Whether a receipt's JSON value is one of ``arrow_type`` (what finalize writes it as)."""
    if pa.types.is_boolean(arrow_type):
        return isinstance(value, bool)
    if pa.types.is_integer(arrow_type):
        limit = (1 << 31) - 1 if arrow_type.bit_width == 32 else _MAX_COUNT
        return is_int(value) and 0 <= value <= limit
    if pa.types.is_string(arrow_type):
        return isinstance(value, str) and len(value) <= MAX_TASK_BYTES
    if pa.types.is_list(arrow_type):
        return isinstance(value, list) and len(value) <= MAX_EPISODE_TASKS and all(_fits(v, arrow_type.value_type) for v in value)
    return False


PLAN_VERSION = 2


@dataclass(frozen=True)
class PackPlan:
    """``pack-plan.json``: the deterministic assignment of episodes to shards.

    Attributes:
        source: what was packed (``uri`` or ``repo_id``/``revision``, ``codebase_version``)
            and its ``fingerprint``: a resume from another source is refused.
        options: the pack options that shape the output.
        shards: per shard, its episode indices (ascending, disjoint across shards).
    """

    source: dict[str, Any]
    options: dict[str, Any]
    shards: list[list[int]]

    def to_dict(self) -> dict[str, Any]:
        return {"plan_version": PLAN_VERSION, "source": self.source, "options": self.options, "shards": self.shards}

    @property
    def sha256(self) -> str:
        """The plan's identity: SHA-256 of its canonical JSON (receipts record it)."""
        return sha256_hex(canonical_json(self.to_dict()))

    @classmethod
    def from_json(cls, data: bytes | str, *, where: str = PLAN_PATH) -> PackPlan:
        """Parse and validate a plan.

        Raises:
            FormatError: malformed, another plan version, or overlapping/unsorted shards.
        """
        f = Fields(load_json(data, where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH), where)
        version = f.int("plan_version")
        if version != PLAN_VERSION:
            raise FormatError(
                f"{where}: plan_version {version} was written by another lerobot-shards version (this one writes "
                f"{PLAN_VERSION}); pack into an empty destination"
            )
        shards = f.list("shards")
        if not shards:  # the packer never plans nothing ("nothing to pack"): finalize would publish an empty pack
            raise FormatError(f"{where}: a plan without shards; pack-plan.json was altered or damaged: pack again")
        last = -1  # episodes ascend across shards too: shard i's episodes all precede shard i + 1's
        for i, episodes in enumerate(shards):
            ascending = (
                isinstance(episodes, list)
                and bool(episodes)
                and all(is_int(e) for e in episodes)
                and episodes[0] > last
                and all(a < b for a, b in zip(episodes, episodes[1:]))
            )
            if not ascending:
                raise FormatError(
                    f"{where}: shards[{i}] must be a non-empty ascending list of episode indices after those of shard {i - 1}"
                )
            last = episodes[-1]
        return cls(source=f.obj("source").data, options=f.obj("options").data, shards=shards)


@dataclass(frozen=True)
class ShardReceipt:
    """A shard's receipt: the episodes index rows of its episodes and its files' checksums.

    Attributes mirror the JSON (docs/FORMAT.md); ``episodes`` are index rows without
    ``shard``, validated for keys and types.
    """

    shard: int
    plan_sha256: str
    episodes: list[dict[str, Any]]
    frames: int
    tar_bytes: int
    tar_sha256: str
    parquet_bytes: int
    parquet_sha256: str
    parquet_footer: FooterEntry
    dropped: list[int]
    padded: list[int]
    reencoded: list[int]
    bytes_in: int
    trimmed: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        data = asdict(self)
        if not data["trimmed"]:
            del data["trimmed"]  # written only when an episode was trimmed
        return data

    @classmethod
    def from_json(cls, data: bytes | str, *, shard: int, video_keys: list[str], where: str | None = None) -> ShardReceipt:
        """Parse and validate the receipt of shard ``shard``.

        Raises:
            FormatError: malformed, for another shard, or rows lacking index columns.
        """
        where = where or shard_receipt_path(shard)
        f = Fields(load_json(data, where=where, max_bytes=MAX_RECORD_BYTES, max_depth=MAX_JSON_DEPTH), where)
        if f.int("shard") != shard:
            raise FormatError(f"{where}: receipt of shard {f.data['shard']}, expected shard {shard}")
        footer = f.obj("parquet_footer")
        rows = f.list("episodes")
        expected = {name for name, _ in EPISODE_COLUMNS if name != "shard"}
        expected |= {video_column(k, name) for k in video_keys for name in MEMBER_COLUMN_TYPES}
        # A member's pre-roll is recorded only where it has one (format 4), a positive count.
        preroll = {video_column(k, PREROLL_FIELD) for k in video_keys}
        types = dict(EPISODE_COLUMNS)
        types |= {video_column(k, name): arrow_type for k in video_keys for name, arrow_type in MEMBER_COLUMN_TYPES.items()}
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or set(row) - preroll != expected:
                found = sorted(row)[:40] if isinstance(row, dict) else type(row).__name__
                raise FormatError(f"{where}: episodes[{i}] must hold exactly the index columns {sorted(expected)}, found {found}")
            if any(not is_int(row[k]) or not 1 <= row[k] <= _MAX_COUNT for k in preroll & set(row)):
                raise FormatError(f"{where}: episodes[{i}]: a member's preroll must be a positive frame count")
            for name in expected:
                if not _fits(row[name], types[name]):
                    raise FormatError(
                        f"{where}: episodes[{i}] field {name!r} must be a value of {types[name]}, found {str(row[name])[:80]!r}"
                    )
        receipt = cls(
            shard=shard,
            plan_sha256=f.sha256("plan_sha256"),
            episodes=rows,
            frames=f.int("frames"),
            tar_bytes=f.int("tar_bytes"),
            tar_sha256=f.sha256("tar_sha256"),
            parquet_bytes=f.int("parquet_bytes"),
            parquet_sha256=f.sha256("parquet_sha256"),
            parquet_footer=FooterEntry(
                footer.int("offset"), footer.int("bytes", lo=12, hi=MAX_FOOTER_BYTES), footer.sha256("sha256")
            ),
            dropped=f.int_list("dropped"),
            padded=f.int_list("padded"),
            reencoded=f.int_list("reencoded"),
            bytes_in=f.int("bytes_in"),
            trimmed=f.optional("trimmed", f.int_list) or [],
        )
        if sum(int(r["length"]) for r in rows if is_int(r["length"])) != receipt.frames:
            raise FormatError(f"{where}: frames {receipt.frames} is not the sum of its episodes' lengths")
        return receipt


__all__ = ["PLAN_PATH", "PLAN_VERSION", "PackPlan", "ShardReceipt"]
