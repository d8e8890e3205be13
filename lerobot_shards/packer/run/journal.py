"""The pack journal: what this machine's pack runs wrote to a destination, kept outside it.

A destination prefix (a bucket a SLURM array writes to) may be writable by others. Anything
read back from it (a shard receipt, its digests, ``meta/``) could have been planted: the plan
digest a receipt names is computable by anyone who can read the source. So a resumed pack
adopts a shard, and ``finalize`` publishes its digests in the manifest, only when the receipt
at the destination is byte for byte the one this machine's run committed, as recorded here
(docs/SECURITY.md, "Who may write the destination").

Layout: ``<root>/<sha256 of the destination URL>/`` holding ``meta.json`` (the plan digest and
the size and digest of every ``meta/`` file the run wrote, taken from the local bytes) and
``shard-NNNNNN.json`` (plan digest and the receipt's sha256). The receipt carries the tar and
parquet digests, computed from the local files before upload. Entries are replaced atomically,
so the ``--part`` tasks of an array may share one journal (``$HOME`` on a cluster).

The root is ``$LEROBOT_SHARDS_JOURNAL``, else ``$XDG_CACHE_HOME/lerobot-shards/journal``,
else ``~/.cache/lerobot-shards/journal``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import FileEntry, sha256_hex, shard_name
from lerobot_shards.core.format.fields import Fields, load_json
from lerobot_shards.core.format.limits import MAX_JSON_DEPTH, MAX_MANIFEST_BYTES, MAX_RECORD_BYTES

log = logging.getLogger(__name__)

JOURNAL_ENV = "LEROBOT_SHARDS_JOURNAL"


def default_journal_root() -> Path:
    """``$LEROBOT_SHARDS_JOURNAL``, else the user's cache directory's ``lerobot-shards/journal``."""
    if os.environ.get(JOURNAL_ENV):
        return Path(os.environ[JOURNAL_ENV]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "lerobot-shards" / "journal"


class Journal:
    """The journal of one destination (``url`` as ``Storage.url`` spells it).

    Picklable (a path), so pool processes record the shards they commit.
    """

    def __init__(self, url: str, root: str | os.PathLike | None = None) -> None:
        self.url = url
        self.root = Path(root).expanduser() if root is not None else default_journal_root()
        self.dir = self.root / hashlib.sha256(url.encode()).hexdigest()[:32]

    def __repr__(self) -> str:
        return f"Journal({self.url!r} at {self.dir})"

    # -- writing ----------------------------------------------------------------------------

    def _write(self, name: str, record: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=self.dir)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(record, handle, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.dir / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def record_meta(self, plan_sha256: str, files: dict[str, FileEntry]) -> None:
        """Record the ``meta/`` files a run wrote (or found identical) for ``plan_sha256``."""
        self._write(
            "meta.json",
            {
                "url": self.url,
                "plan_sha256": plan_sha256,
                "files": {rel: {"bytes": e.bytes, "sha256": e.sha256} for rel, e in sorted(files.items())},
            },
        )

    def record_shard(self, shard: int, plan_sha256: str, receipt_bytes: bytes) -> None:
        """Record that this machine committed ``receipt_bytes`` as shard ``shard``'s receipt."""
        self._write(
            f"{shard_name(shard)}.json",
            {"url": self.url, "shard": shard, "plan_sha256": plan_sha256, "receipt_sha256": sha256_hex(receipt_bytes)},
        )

    # -- reading ----------------------------------------------------------------------------

    def _read(self, name: str, max_bytes: int) -> Fields | None:
        path = self.dir / name
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return Fields(load_json(data, where=str(path), max_bytes=max_bytes, max_depth=MAX_JSON_DEPTH), str(path))
        except FormatError as err:
            log.warning("%s; ignoring this journal entry", err)
            return None

    def meta_files(self, plan_sha256: str) -> dict[str, FileEntry] | None:
        """The ``meta/`` files recorded for ``plan_sha256``, or None when none were."""
        f = self._read("meta.json", MAX_MANIFEST_BYTES)
        try:
            if f is None or f.data.get("plan_sha256") != plan_sha256:
                return None
            files = f.obj("files")
            return {rel: FileEntry(files.obj(rel).int("bytes"), files.obj(rel).sha256("sha256")) for rel in files.data}
        except FormatError as err:
            log.warning("%s; ignoring this journal entry", err)
            return None

    def vouches(self, shard: int, plan_sha256: str, receipt_bytes: bytes) -> bool:
        """Whether this machine committed exactly ``receipt_bytes`` for ``shard`` of the plan."""
        f = self._read(f"{shard_name(shard)}.json", MAX_RECORD_BYTES)
        if f is None:
            return False
        return f.data.get("plan_sha256") == plan_sha256 and f.data.get("receipt_sha256") == sha256_hex(receipt_bytes)
