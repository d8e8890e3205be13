"""Shard receipts at the destination: the commit unit of a pack (docs/DESIGN_NOTES.md §3).

A shard is committed by uploading its tar and parquet first and its receipt last, then
recording the receipt in the pack journal (``lerobot_shards.packer.run.journal``); a re-run (or another
``--part`` task) keeps a shard whose receipt belongs to this plan and the journal, and
``finalize`` builds the index and manifest from the receipts.
"""

from __future__ import annotations

import json
import logging

from lerobot_shards.core.errors import FormatError, StorageError
from lerobot_shards.core.format import PackPlan, ShardReceipt, shard_name, shard_parquet_path, shard_receipt_path, shard_tar_path
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import PackError
from lerobot_shards.packer.run.journal import JOURNAL_ENV, Journal
from lerobot_shards.packer.shard.build import BuiltShard

log = logging.getLogger(__name__)


def read_receipt(storage: Storage, shard: int, video_keys: list[str]) -> tuple[ShardReceipt, bytes] | None:
    """The shard's receipt and its bytes as read, or None when there is none.

    Raises:
        FormatError: a receipt that does not validate (names the file and field).
        StorageError: the destination failed beyond the retry policy.
    """
    rel = shard_receipt_path(shard)
    if not storage.exists(rel):
        return None
    data = storage.read_bytes(rel)
    return ShardReceipt.from_json(data, shard=shard, video_keys=video_keys, where=storage.describe(rel)), data


def _matches_plan(receipt: ShardReceipt, plan: PackPlan) -> bool:
    """A receipt of ``plan`` accounts for exactly the episodes the plan gives its shard."""
    packed = [int(row["episode_index"]) for row in receipt.episodes]
    return receipt.plan_sha256 == plan.sha256 and sorted(packed + receipt.dropped) == sorted(plan.shards[receipt.shard])


def _files_match(storage: Storage, receipt: ShardReceipt, *, rehash: bool) -> str | None:
    """None when the shard's tar and parquet at the destination are what ``receipt`` records
    (sizes; and digests when ``rehash``: the whole files are read), else what differs."""
    shard = receipt.shard
    for rel, size, digest in (
        (shard_tar_path(shard), receipt.tar_bytes, receipt.tar_sha256),
        (shard_parquet_path(shard), receipt.parquet_bytes, receipt.parquet_sha256),
    ):
        if not storage.exists(rel):
            return f"{rel} is missing"
        if storage.size(rel) != size:
            return f"{rel} has {storage.size(rel)} bytes, its receipt records {size}"
        if rehash and storage.digest(rel)[0] != digest:
            return f"{rel} does not match the sha256 its receipt records"
    return None


def kept_receipt(
    storage: Storage,
    shard: int,
    plan: PackPlan,
    video_keys: list[str],
    journal: Journal,
    *,
    trust_destination: bool = False,
    repair: bool = False,
    damaged: list[str] | None = None,
    unvouched: list[str] | None = None,
) -> ShardReceipt | None:
    """The receipt of a shard a resumed pack keeps, or None when the shard must be (re)built.

    Kept: a valid receipt of ``plan`` for the plan's episodes, whose bytes this machine's
    journal records committing (so its digests are ours), with files of the recorded sizes
    (and digests, with ``repair``: the whole files are read). A receipt the journal does not
    vouch for was written elsewhere: rebuilt (warned), unless ``trust_destination``, where its
    files are re-hashed against it instead. A shard of this plan rebuilt because its receipt
    or files are damaged is appended to ``damaged`` (``"shard-000001: why"``); one the journal
    does not vouch for to ``unvouched`` (the caller then says it once for all), else it is warned.
    """

    def rebuild(why: str) -> None:
        log.warning("%s: %s; rebuilding the shard", storage.describe(shard_receipt_path(shard)), why)
        if damaged is not None:
            damaged.append(f"{shard_name(shard)}: {why}")

    try:
        found = read_receipt(storage, shard, video_keys)
    except (FormatError, StorageError) as err:
        rebuild(str(err))
        return None
    if found is None:
        return None
    receipt, data = found
    if not _matches_plan(receipt, plan):
        return None
    vouched = journal.vouches(shard, plan.sha256, data)
    if not vouched and not trust_destination:
        if unvouched is not None:
            unvouched.append(shard_name(shard))
            return None
        log.warning(
            "%s: not in this machine's pack journal (%s): written by another run or machine; rebuilding the shard "
            "(--trust-destination adopts it after re-hashing its files)",
            storage.describe(shard_receipt_path(shard)),
            journal.dir,
        )
        return None
    differs = _files_match(storage, receipt, rehash=repair or not vouched)
    if differs is not None:
        rebuild(differs)
        return None
    return receipt


def finished_receipts(
    storage: Storage, plan: PackPlan, video_keys: list[str], journal: Journal, *, trust_destination: bool = False
) -> list[ShardReceipt]:
    """Every shard's receipt of ``plan``, for ``finalize``: each one this machine's journal
    records committing, or (``trust_destination``) any valid one, whose tar is then re-hashed
    against it (the parquet is hashed by ``finalize`` as it reads it).

    Raises:
        PackError: a receipt that does not validate (delete it and re-run that shard), shards
            without a receipt of this plan (named: run the missing parts), receipts the
            journal does not record (named, with the journal's directory), or a tar that does
            not match its receipt.
    """
    receipts, missing, unvouched = [], [], []
    for shard in range(len(plan.shards)):
        try:
            found = read_receipt(storage, shard, video_keys)
        except FormatError as err:
            raise PackError(f"cannot finalize: {err}; delete it and re-run that shard's pack") from None
        if found is None or not _matches_plan(found[0], plan):
            missing.append(shard_name(shard))
            continue
        receipt, data = found
        if not journal.vouches(shard, plan.sha256, data):
            if not trust_destination:
                unvouched.append(shard_name(shard))
                continue
            differs = _files_match(storage, receipt, rehash=True)
            if differs is not None:
                raise PackError(f"cannot finalize: {differs}; delete {shard_receipt_path(shard)} and re-run that shard's pack")
        receipts.append(receipt)
    if missing:
        raise PackError(
            f"{storage.url}: shards not packed yet (no valid receipt): {missing[:20]}; run the missing --part jobs, then finalize"
        )
    if unvouched:
        raise PackError(
            f"{storage.url}: {len(unvouched)} shard receipt(s) not in this machine's pack journal ({journal.dir}): "
            f"{unvouched[:20]}; they were written by another machine or run. Finalize where the parts ran "
            f"(or point {JOURNAL_ENV} at a journal the parts share), or pass --trust-destination if only you can "
            "write this destination"
        )
    return receipts


def commit_shard(storage: Storage, built: BuiltShard, journal: Journal) -> None:
    """Publish a built shard: tar, then parquet, then record the receipt in ``journal``, then
    the receipt (the commit). The local files are consumed. A failure before the receipt
    leaves no committed shard: the next run builds it again. Journaling first means a kill
    right after the commit still finds the shard journaled; a journal entry without its
    receipt vouches for nothing (there is nothing at the destination to adopt)."""
    shard = built.receipt["shard"]
    storage.put_file(built.tar_path, shard_tar_path(shard), move=True)
    storage.put_file(built.parquet_path, shard_parquet_path(shard), move=True)
    data = json.dumps(built.receipt, indent=1, sort_keys=True).encode()
    journal.record_shard(shard, built.receipt["plan_sha256"], data)
    storage.write_bytes(shard_receipt_path(shard), data)
