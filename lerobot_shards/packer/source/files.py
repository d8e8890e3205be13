"""Hardened reads of a local source's files, for every source format (issue 54's split: the
model of LeRobot's reading is ``core/format/lerobot_reading.py``, a format's parse is its module,
and how a file is found under the root, opened, bounded and cached is here: ``SourceRoot``).

A source file is opened only if it is a regular file (checked on the open descriptor: no race
with the path, no FIFO that blocks), read in chunks against a bound counted in bytes read (a
sparse or growing file cannot make the packer allocate what it claims), and parquet files are
read through the bounded reader; data files' footers are cached by (path, size, mtime).
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from lerobot_shards.core.address_space import limit_error
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import STATS_PATH
from lerobot_shards.core.format.fields import load_json
from lerobot_shards.core.format.layout import source_relative_path
from lerobot_shards.core.format.limits import MAX_FOOTER_BYTES, MAX_INDEX_FILE_BYTES, MAX_JSON_DEPTH, MAX_STATS_BYTES
from lerobot_shards.core.format.parquet import Budget, read_bounded
from lerobot_shards.core.format.parquet.arrow_io import check_footer
from lerobot_shards.packer.errors import SourceError

T = TypeVar("T")

# A file read whole may claim more bytes than the disk holds for it (a sparse file: holes read as
# zeros, free to its publisher) only by this much: honest files are written, not seeked over.
SPARSE_SLACK_BYTES = 16 << 20


class SourceRoot:
    """A local dataset root, whose files are read only where they lie under it.

    Args:
        root: the root (it may itself be a link: ``/data -> /mnt/data``).
        follow_symlinks: trust links under the root (what they point to is read).
    """

    def __init__(self, root: str | Path, *, follow_symlinks: bool = False):
        self.root = Path(root).resolve()
        self.follow_symlinks = follow_symlinks
        self._checked: dict[str, Path] = {}

    def stats_json(self) -> object | None:
        """``meta/stats.json`` parsed as LeRobot writes it (non-finite numbers kept), or None
        when the root has none.

        Raises:
            SourceError: the file is a link or not a regular file, larger than its bound, or not JSON.
        """
        path = self.file(STATS_PATH, what="statistics")
        if not path.is_file():
            return None
        data = read_regular(path, MAX_STATS_BYTES, "stats.json")
        try:
            return load_json(
                data, where=str(path), max_bytes=MAX_STATS_BYTES, max_depth=MAX_JSON_DEPTH, allow_nan=True, lerobot_file=True
            )
        except FormatError as err:
            raise SourceError(str(err)) from None

    def file(self, rel: str, *, what: str = "file", missing: str | None = None) -> Path:
        """The local path of ``rel`` (a path relative to the root, from metadata or a template).

        With ``missing`` (what to tell the user), a file that does not exist is an error;
        without it the caller decides.

        Raises:
            SourceError: ``rel`` could leave the root (absolute, ``..``), a component under
                the root is a symbolic link (unless ``follow_symlinks``), or what it names is not
                a regular file (a device, FIFO, socket or directory, linked to or not: reading
                one never ends or blocks).
        """
        checked = self._checked.get(rel)
        if checked is not None:  # each file is checked once: packing asks for it per episode and camera
            return checked
        try:
            source_relative_path(rel)
        except ValueError:
            raise SourceError(f"{self.root}: {what} path {rel[:300]!r} leaves the dataset root or is not a plain path") from None
        path = self.root / rel
        if not self.follow_symlinks:
            self._refuse_links(rel)
        try:
            mode = path.stat().st_mode  # follows links: what --follow-symlinks would read
        except FileNotFoundError:
            if missing is not None:
                raise SourceError(f"{path}: missing; {missing}") from None
            return path  # not cached: the caller reports it, or it appears later (staging)
        except OSError as err:
            raise SourceError(f"{path}: cannot read the {what} ({err.strerror})") from None
        if not stat.S_ISREG(mode):
            raise SourceError(f"{path}: the {what} is {file_kind(mode)}, not a regular file; a LeRobot dataset holds only files")
        self._checked[rel] = path
        return path

    def _refuse_links(self, rel: str) -> None:
        current = self.root
        for part in Path(rel).parts:
            current = current / part
            if current.is_symlink():
                raise SourceError(
                    f"{current}: a symbolic link inside the source; refused because it may point outside the dataset "
                    "(copy the dataset with `cp -rL`, or pass --follow-symlinks if you trust it)"
                )

    def listing(self, folder: str) -> list[str]:
        """Every entry under ``folder`` but folders, relative to the root, sorted: a FIFO or a
        device named like a file a format reads is then refused by ``file``, not passed over."""
        base = self.root / folder
        return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*") if p.is_symlink() or not p.is_dir())


def parsed_once(make: Callable[..., T], root: str | Path, files: Sequence[Path], *, follow_symlinks: bool) -> T:
    """``make(root, follow_symlinks=...)``, reused while ``files`` (the format's metadata files)
    keep their sizes and times: parsing a source reads every metadata file, and each shard a
    (pool) process builds would otherwise pay for it again; a long-lived process sees an edited
    source."""
    signature = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files if p.is_file())
    return _parsed(make, str(root), follow_symlinks, signature)


@functools.lru_cache(maxsize=2)
def _parsed(make: Callable[..., Any], root: str, follow_symlinks: bool, signature: tuple) -> Any:
    return make(root, follow_symlinks=follow_symlinks)


def check_file_size(path: Path, bound: int, what: str) -> int:
    """The size of a file read whole or copied, checked against ``bound`` and against what the
    file system allocated for it (a sparse file's apparent size costs its publisher nothing, so
    it buys nothing: more than ``SPARSE_SLACK_BYTES`` of holes is refused).

    Raises:
        SourceError: missing, beyond ``bound``, or sparse (names the sizes).
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SourceError(f"{path}: missing ({what})") from None
    if not stat.S_ISREG(info.st_mode):
        raise SourceError(f"{path}: the {what} is {file_kind(info.st_mode)}, not a regular file")
    check_stat_size(path, info, bound, what)
    return info.st_size


def check_stat_size(path: Path, info: os.stat_result, bound: int, what: str) -> None:
    if info.st_size > bound:
        raise SourceError(f"{path}: {info.st_size:,} bytes of {what}; at most {bound:,} are read")
    allocated = getattr(info, "st_blocks", None)
    if allocated is not None and info.st_size - allocated * 512 > SPARSE_SLACK_BYTES:
        raise SourceError(
            f"{path}: a sparse file ({what}): it claims {info.st_size:,} bytes with {allocated * 512:,} on disk; "
            "refusing to read its holes"
        )


def read_source_file(path: Path, what: str) -> bytes:
    """A source parquet's bytes, refused before reading when larger than any read may be."""
    return read_regular(path, MAX_INDEX_FILE_BYTES, what)


def file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def open_regular(path: Path, what: str) -> tuple[BinaryIO, os.stat_result]:
    """Open a local source file for reading, only if it is a regular file: checked on the open
    descriptor (no race with the path), opened without blocking so a FIFO cannot stall it.

    Raises:
        SourceError: missing, unreadable, or not a regular file (names its kind).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise SourceError(f"{path}: missing ({what})") from None
    except OSError as err:
        raise SourceError(f"{path}: cannot open the {what} ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SourceError(f"{path}: the {what} is {file_kind(info.st_mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: Path, bound: int, what: str) -> bytes:
    """A regular source file's bytes (``open_regular``), at most ``bound``: the bytes read count,
    not what the file system says (a file that grows while read is refused too).

    Raises:
        SourceError: as ``open_regular``; larger than ``bound``, or sparse (``check_file_size``).
    """
    handle, info = open_regular(path, what)
    chunks: list[bytes] = []
    read = 0
    with handle:
        check_stat_size(path, info, bound, what)
        # In chunks: one read of ``bound + 1`` bytes asks the allocator for the whole bound (4 GiB
        # for a parquet file) up front, which a virtual-memory limit (ulimit -v, SLURM's
        # VSizeFactor, overcommit off) refuses with a MemoryError. Memory follows the bytes.
        while chunk := handle.read(min(_READ_CHUNK, bound + 1 - read)):
            chunks.append(chunk)
            read += len(chunk)
            if read > bound:
                raise SourceError(f"{path}: more than {bound:,} bytes of {what}; at most {bound:,} are read")
    return b"".join(chunks)


_READ_CHUNK = 1 << 22


def sha256_regular(path: Path, bound: int, what: str) -> tuple[str, int]:
    """``(SHA-256 hex, size)`` of a regular source file of at most ``bound`` bytes, streamed.

    Raises:
        SourceError: as ``read_regular``.
    """
    handle, info = open_regular(path, what)
    digest, size = hashlib.sha256(), 0
    with handle:
        check_stat_size(path, info, bound, what)
        while chunk := handle.read(1 << 22):
            size += len(chunk)
            if size > bound:
                raise SourceError(f"{path}: more than {bound:,} bytes of {what}; at most {bound:,} are read")
            digest.update(chunk)
    return digest.hexdigest(), size


def read_source_table(
    data: bytes,
    path: Path,
    what: str,
    *,
    max_rows: int,
    columns: list[str] | None = None,
    values_per_row: dict[str, int] | None = None,
) -> pa.Table:
    """Read a source parquet bounded by what it decodes to (``lerobot_shards.core.format.parquet``): rows,
    values per row of list columns, decoded bytes.

    Raises:
        SourceError: the file is not parquet, or claims or expands beyond a bound (named).
    """
    try:
        return read_bounded(
            data, where=str(path), columns=columns, max_rows=max_rows, budget=Budget(values_per_row=values_per_row or {})
        )
    except FormatError as err:
        raise source_error(err, path, what) from None


def source_error(err: FormatError, path: Path, what: str) -> SourceError:
    """``err`` (which names ``path``) as "PATH: cannot read WHAT: why"."""
    text, prefix = str(err), f"{path}: "
    return SourceError(f"{path}: cannot read {what}: {text.removeprefix(prefix)}")


# Footer reads, keyed by (path, size, mtime) so an edited file is re-read.
_ROWS_CACHE: dict[tuple, int] = {}
_SCHEMA_CACHE: dict[tuple, pa.Schema] = {}


def file_key(path: Path) -> tuple:
    stat = path.stat()
    return (str(path), stat.st_size, stat.st_mtime_ns)


def parquet_metadata(path: Path, episode: int) -> tuple[tuple, pq.FileMetaData]:
    if not path.is_file():
        raise SourceError(f"{path}: missing (data file of episode {episode})")
    key = file_key(path)
    try:
        _check_footer_of(path)  # counted before pyarrow builds ~1.5 KB per column chunk
        return key, pq.read_metadata(path)
    except FormatError as err:
        raise SourceError(f"{err} (data file of episode {episode})") from None
    except Exception as err:  # pyarrow raises ArrowInvalid/OSError for truncated or foreign files
        limited = limit_error(err, f"{path}: reading its footer")  # this process's limit, not the file
        if limited is not None:
            raise limited from err
        raise SourceError(f"{path}: not a readable parquet file, truncated? (data file of episode {episode}: {err})") from None


def _check_footer_of(path: Path) -> None:
    """``check_footer`` on a source parquet's footer, read alone (at most ``MAX_FOOTER_BYTES``)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 12:
            return  # pyarrow names what is wrong
        handle.seek(size - 8)
        tail = handle.read(8)
        length = int.from_bytes(tail[:4], "little")
        if tail[4:] != b"PAR1" or length + 12 > size:
            return
        if length > MAX_FOOTER_BYTES:
            raise FormatError(f"{path}: a parquet footer of {length:,} bytes; at most {MAX_FOOTER_BYTES:,} are read")
        handle.seek(size - 8 - length)
        footer = handle.read(length)
    # The body before the footer is the file's: pages for its chunks must fit there.
    check_footer(footer + tail, where=str(path), body_bytes=size - 8 - length - 4)


def parquet_rows(path: Path, episode: int) -> int:
    key = file_key(path) if path.is_file() else None
    if key not in _ROWS_CACHE:
        key, metadata = parquet_metadata(path, episode)
        _ROWS_CACHE[key] = metadata.num_rows
        _SCHEMA_CACHE[key] = metadata.schema.to_arrow_schema()
    return _ROWS_CACHE[key]


def parquet_schema(path: Path, episode: int) -> pa.Schema:
    parquet_rows(path, episode)
    return _SCHEMA_CACHE[file_key(path)]


__all__ = [
    "SourceRoot",
    "SPARSE_SLACK_BYTES",
    "check_file_size",
    "check_stat_size",
    "file_key",
    "file_kind",
    "open_regular",
    "parquet_rows",
    "parquet_schema",
    "read_regular",
    "read_source_file",
    "read_source_table",
    "sha256_regular",
    "source_error",
]
