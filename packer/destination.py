"""Where a pack is written: a local directory or any fsspec URL (``s3://bucket/prefix``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import fsspec

from reader.fetch.storage import TEMP_MARKER, default_file_mode, remove_stale_temp_files


class Destination:
    """Write/read files relative to a root, atomically on local disk, as whole objects remotely.

    Objects are written in one piece (local: temp file + rename), so a reader never sees a
    half-written file under its final name; the manifest is written last.
    """

    def __init__(self, root: str, storage_options: dict | None = None):
        self.url = str(root).rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        self.is_local = self.fs.protocol in ("file", ("file", "local")) or "file" in self.fs.protocol
        self.storage_options = dict(storage_options or {})

    def path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def size(self, rel: str) -> int:
        return int(self.fs.size(self.path(rel)))

    def read_bytes(self, rel: str) -> bytes:
        return self.fs.cat_file(self.path(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        target = self.path(rel)
        if self.is_local:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=Path(target).parent, prefix=f".{Path(target).name}{TEMP_MARKER}")
            try:
                os.fchmod(fd, default_file_mode())
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        else:
            self.fs.pipe_file(target, data)
            self.fs.invalidate_cache(target)

    def put_file(self, local_path: str | Path, rel: str) -> None:
        target = self.path(rel)
        if self.is_local:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            os.replace(local_path, target) if _same_device(local_path, target) else _copy(local_path, target)
        else:
            self.fs.put_file(str(local_path), target)
            self.fs.invalidate_cache(target)

    def remove_stale_temp_files(self, *, older_than_s: float = 900.0) -> int:
        """Delete temp files an interrupted writer left in a local destination (see
        ``reader.fetch.storage.remove_stale_temp_files``); object stores have none. Returns the count."""
        return remove_stale_temp_files(Path(self.root), older_than_s=older_than_s) if self.is_local else 0

    def remove(self, rel: str) -> None:
        if self.exists(rel):
            self.fs.rm_file(self.path(rel))

    def open(self, rel: str, mode: str = "rb"):
        return self.fs.open(self.path(rel), mode)

    def list(self, rel_dir: str) -> list[str]:
        base = self.path(rel_dir)
        if not self.fs.exists(base):
            return []
        return sorted(p.rsplit("/", 1)[-1] for p in self.fs.ls(base, detail=False))


def _same_device(source: str | Path, target: str) -> bool:
    try:
        return os.stat(source).st_dev == os.stat(Path(target).parent).st_dev
    except OSError:
        return False


def _copy(source: str | Path, target: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=Path(target).parent, prefix=f".{Path(target).name}{TEMP_MARKER}")
    try:
        os.fchmod(fd, default_file_mode())
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            while chunk := src.read(1 << 22):
                out.write(chunk)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.unlink(source)
