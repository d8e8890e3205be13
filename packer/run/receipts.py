"""Shard receipts at the destination: the commit unit of a pack (docs/DESIGN_NOTES.md §3).

A shard is committed by uploading its tar and parquet first and its receipt last; a re-run
(or another ``--part`` task) keeps a shard whose receipt belongs to this plan, and
``finalize`` builds the index and manifest from the receipts.
"""

from __future__ import annotations

import json
import logging

from packer.errors import PackError
from packer.shard.build import BuiltShard
from reader.errors import FormatError, StorageError
from reader.format import PackPlan, ShardReceipt, shard_name, shard_parquet_path, shard_receipt_path, shard_tar_path
from reader.storage import Storage

log = logging.getLogger(__name__)


def read_receipt(storage: Storage, shard: int, video_keys: list[str]) -> ShardReceipt | None:
    """The shard's receipt, or None when there is none.

    Raises:
        FormatError: a receipt that does not validate (names the file and field).
        StorageError: the destination failed beyond the retry policy.
    """
    rel = shard_receipt_path(shard)
    if not storage.exists(rel):
        return None
    return ShardReceipt.from_json(storage.read_bytes(rel), shard=shard, video_keys=video_keys, where=storage.describe(rel))


def kept_receipt(storage: Storage, shard: int, plan_sha256: str, video_keys: list[str]) -> ShardReceipt | None:
    """The receipt of a shard a resumed pack keeps, or None when the shard must be (re)built:
    no receipt, one that does not validate (warned), one of another plan, or shard files
    whose sizes differ from what it records."""
    try:
        receipt = read_receipt(storage, shard, video_keys)
    except (FormatError, StorageError) as err:
        log.warning("%s: %s; rebuilding the shard", storage.describe(shard_receipt_path(shard)), err)
        return None
    if receipt is None or receipt.plan_sha256 != plan_sha256:
        return None
    for rel, size in ((shard_tar_path(shard), receipt.tar_bytes), (shard_parquet_path(shard), receipt.parquet_bytes)):
        if not storage.exists(rel) or storage.size(rel) != size:
            return None
    return receipt


def finished_receipts(storage: Storage, plan: PackPlan, video_keys: list[str]) -> list[ShardReceipt]:
    """Every shard's receipt of ``plan``, for ``finalize``.

    Raises:
        PackError: a receipt that does not validate (delete it and re-run that shard), or
            shards without a receipt of this plan (named: run the missing parts).
    """
    receipts, missing = [], []
    for shard in range(len(plan.shards)):
        try:
            receipt = read_receipt(storage, shard, video_keys)
        except FormatError as err:
            raise PackError(f"cannot finalize: {err}; delete it and re-run that shard's pack") from None
        if receipt is None or receipt.plan_sha256 != plan.sha256:
            missing.append(shard_name(shard))
        else:
            receipts.append(receipt)
    if missing:
        raise PackError(f"{storage.url}: shards not packed yet (no valid receipt): {missing[:20]}; "
                        "run the missing --part jobs, then finalize")
    return receipts


def commit_shard(storage: Storage, built: BuiltShard) -> None:
    """Publish a built shard: tar, then parquet, then the receipt (the commit). The local
    files are consumed. A failure before the receipt leaves no committed shard: the next run
    builds it again."""
    shard = built.receipt["shard"]
    storage.put_file(built.tar_path, shard_tar_path(shard), move=True)
    storage.put_file(built.parquet_path, shard_parquet_path(shard), move=True)
    storage.write_bytes(shard_receipt_path(shard), json.dumps(built.receipt, indent=1, sort_keys=True).encode())
