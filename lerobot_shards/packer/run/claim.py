"""Claiming a destination for a pack: where it may be, which plan it holds, its ``meta/``.

A destination holds one plan. The first run writes ``pack-plan.json``; a resumed run or
another ``--part`` task finds the same plan and goes on; a different plan is refused once
anything of the old one was packed (the error says what differs).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import MANIFEST_PATH, PLAN_PATH, SHARDS_DIR, FileEntry, PackPlan
from lerobot_shards.core.pack.packed_index import check_packed_metadata
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import PackError, SourceError
from lerobot_shards.packer.plan.pack_plan import plan_differences
from lerobot_shards.packer.run.lease import LEASE_DIR
from lerobot_shards.packer.run.staging import staging_dir
from lerobot_shards.packer.source.base import Source
from lerobot_shards.packer.source.records import MetadataFile

log = logging.getLogger(__name__)


def check_destination(storage: Storage, source_root: Path) -> None:
    """A local destination must be a directory (or not exist yet) outside the source: a
    destination inside the source would be packed into itself on the next run.

    Raises:
        PackError: names the destination and what is wrong with it.
    """
    if not storage.is_local:
        return
    target = Path(storage.path("")).resolve()
    if target.exists() and not target.is_dir():
        raise PackError(f"{target}: the destination exists and is not a directory")
    if target == source_root or source_root in target.parents:
        raise PackError(f"{target}: the destination is inside the source {source_root}; choose a directory outside it")


def claim_destination(storage: Storage, plan: PackPlan) -> None:
    """Write ``pack-plan.json``, or check that the one there is the same plan (a resume or
    another ``--part``). A different plan is replaced only while nothing of it was packed
    (for example after a run that stopped on a frame mismatch and is re-run with
    ``on_frame_mismatch="pad"``); otherwise packing refuses to mix two plans. A destination
    without a plan must be empty.

    Raises:
        PackError: the destination holds shards or a manifest of another plan (names what
            differs: the source's fingerprint, an option, the shard assignment), or files
            that are not a pack (a LeRobot dataset, anything else).
    """
    # A sibling --part task may write the plan (and meta/) between our look and the listing
    # of an empty destination: a listing that holds the plan is read as one, never refused.
    if storage.exists(PLAN_PATH) or _refuse_foreign_content(storage):
        unreadable = ""
        try:
            existing = PackPlan.from_json(storage.read_bytes(PLAN_PATH), where=storage.describe(PLAN_PATH))
        except FormatError as err:
            existing, unreadable = None, str(err)
        if existing is not None and existing.sha256 == plan.sha256:
            return
        receipts = [rel for rel in storage.list(SHARDS_DIR) if rel.endswith(".json")]
        if receipts or storage.exists(MANIFEST_PATH):
            differs = plan_differences(existing, plan) if existing is not None else unreadable
            raise PackError(
                f"{storage.url} holds {len(receipts)} packed shard(s) of another plan ({differs}); "
                "pack into an empty destination, or delete this one first"
            )
        log.warning(
            "%s: replacing a plan for different source/options (none of its shards was packed)", storage.describe(PLAN_PATH)
        )
    storage.write_bytes(PLAN_PATH, json.dumps(plan.to_dict(), indent=1, sort_keys=True).encode())


def _refuse_foreign_content(storage: Storage) -> bool:
    """A destination without ``pack-plan.json`` must be empty: packing writes ``meta/`` and
    would overwrite a LeRobot dataset's own ``meta/info.json`` (or mix a pack into anything
    else that lives there). Returns whether the listing found a plan after all (written by
    another ``--part`` since ``claim_destination`` looked).

    Raises:
        PackError: names what the destination holds.
    """
    found = [rel for rel in storage.list("") if not rel.startswith(f"{LEASE_DIR}/")]  # our own lease is no content
    if not found:
        return False
    if PLAN_PATH in found:
        return True
    if "meta/info.json" in found:
        what = "a LeRobot dataset (meta/info.json)"
    else:
        what = f"{len(found)} file(s) that are not a pack, e.g. {found[0]}"
    raise PackError(
        f"{storage.url} is not empty: it holds {what}; pack into a new or empty directory "
        "(packing here would overwrite its files)"
    )


_COPY_CHUNK = 4 << 20


def copy_meta(
    source: Source, storage: Storage, *, rewrite: Mapping[str, Callable[[bytes], bytes]] | None = None
) -> dict[str, FileEntry]:
    """Write the pack's ``meta/`` (``source.metadata_files()``: a source format's files, each
    within its bound, or bytes the format made), each staged into a local temp file while it is
    hashed (what is hashed is what is published), then uploaded; ``rewrite`` maps a file to
    what the pack holds instead (``meta/info.json``: the pack's own, ``packed_info``). A file
    already at the destination with the same bytes is skipped (compared by digest: a file of
    the same size may have been planted).

    Returns:
        The size and digest of every file as written (for the pack journal).

    Raises:
        SourceError: a file holds more bytes than its bound (names it and the bound), or does
            not parse as a reader of the pack would parse it.
    """
    entries = {}
    with staging_dir(storage.url, kind="meta") as folder:
        for meta in source.metadata_files():
            staged = folder / "staged"
            entries[meta.rel] = _stage(meta, staged)
            if rewrite and meta.rel in rewrite:
                data = rewrite[meta.rel](staged.read_bytes())
                staged.write_bytes(data)
                entries[meta.rel] = FileEntry(len(data), hashlib.sha256(data).hexdigest())
            try:  # read back as the pack's readers will read it (bounded above)
                check_packed_metadata(meta.rel, staged.read_bytes(), where=str(meta.path or meta.rel))
            except FormatError as err:
                staged.unlink(missing_ok=True)
                raise SourceError(f"{err}; the pack would not open, so nothing was copied") from None
            entry = entries[meta.rel]
            if not (
                storage.exists(meta.rel) and storage.size(meta.rel) == entry.bytes and storage.digest(meta.rel)[0] == entry.sha256
            ):
                storage.put_file(str(staged), meta.rel, move=True)
            staged.unlink(missing_ok=True)
    return entries


def _stage(meta: MetadataFile, staged: Path) -> FileEntry:
    """A metadata file into the local ``staged`` file: a source file streamed (read in chunks,
    hashed as it is written), or the bytes the format made; its size and digest."""
    if meta.data is not None:
        if len(meta.data) > meta.bound:
            raise SourceError(f"{meta.rel}: the format made {len(meta.data):,} bytes, more than the {meta.bound:,} it may hold")
        staged.write_bytes(meta.data)
        return FileEntry(len(meta.data), hashlib.sha256(meta.data).hexdigest())
    assert meta.path is not None  # a MetadataFile has a path or data
    with open(staged, "wb") as sink:
        return _stream_copy(meta.path, sink, meta.bound, meta.rel)


def _stream_copy(path: Path, sink, bound: int, rel: str) -> FileEntry:
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_COPY_CHUNK):
            size += len(chunk)
            if size > bound:  # the bytes read count, not what the file system says (sparse, growing)
                raise SourceError(
                    f"{path}: {rel} holds more than {bound:,} bytes, more than a LeRobot metadata file "
                    "of its kind may; refusing to copy it"
                )
            digest.update(chunk)
            sink.write(chunk)
    return FileEntry(size, digest.hexdigest())
