"""Local files written atomically: a temp file in the target's directory renamed into place,
with the mode a new file gets; and the cleanup of temp files a killed writer left behind."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path


def default_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: ``0o666`` less the process umask.

    ``tempfile.mkstemp`` creates files ``0o600``; a file renamed into a dataset must instead be
    readable by whoever may read the directory (``0o644`` under umask 022), like any other.
    """
    try:
        with open("/proc/self/status") as status:  # reading it does not change the umask
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (racy only with threads changing it too)
    os.umask(mask)
    return 0o666 & ~mask


TEMP_MARKER = ".tmp-"
"""Temporary files of atomic writes are named ``.<target name>.tmp-<random>`` in the target's
directory; ``remove_stale_temp_files`` deletes old ones that a killed writer left behind."""


def is_temp_name(name: str) -> bool:
    """Whether a file name is one of our atomic writes' temp files (``.<name>.tmp-<random>``)."""
    return name.startswith(".") and TEMP_MARKER in name


def atomic_write(target: Path, chunks: Sequence[bytes] | Iterator[bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}{TEMP_MARKER}")
    try:
        os.fchmod(fd, default_file_mode())
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def remove_stale_temp_files(directory: Path, *, older_than_s: float = 900.0) -> int:
    """Delete temp files of atomic writes (``TEMP_MARKER`` in the name) under ``directory``
    whose last write is older than ``older_than_s``: left by a writer that was killed or ran
    out of space. A live writer keeps its file's mtime fresh, so concurrent writers (other
    ``--part`` jobs) are never disturbed. Returns how many were deleted."""
    removed, now = 0, time.time()
    for path in directory.rglob(f"*{TEMP_MARKER}*") if directory.is_dir() else []:
        try:
            if path.is_file() and not path.is_symlink() and now - path.stat().st_mtime > older_than_s:
                path.unlink()
                removed += 1
        except OSError:
            continue  # gone already, or not ours to delete
    return removed


def atomic_copy(source: Path, target: Path) -> None:
    with open(source, "rb") as handle:
        atomic_write(target, iter(lambda: handle.read(1 << 22), b""))


def same_device(source: Path, directory: Path) -> bool:
    directory.mkdir(parents=True, exist_ok=True)
    try:
        return os.stat(source).st_dev == os.stat(directory).st_dev
    except OSError:
        return False


def atomic_rename(source: Path, target: Path) -> None:
    """Rename a finished local file into place with the mode a new file gets (a temp file
    made by ``tempfile`` is ``0o600``; a published one must be readable like any other)."""
    os.chmod(source, default_file_mode())
    os.replace(source, target)
