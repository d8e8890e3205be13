"""Where a pack stages a shard before committing it: the system temp folder, under names that
say which pack and which process made them, so a re-run of the same pack sweeps what a killed
run left (a SIGKILLed SLURM job cannot clean up after itself; at 512 MB shards on a preemptible
partition the leftovers would fill ``/tmp``).

Names: ``lerobot-shards-<pack tag>-<pid>-<kind>-<random>``; the pack tag is 12 hex digits of
the SHA-256 of the destination as resolved (a local folder's real absolute path, so ``out``,
``./out`` and ``/abs/out`` are one pack; a bucket's URL without its trailing ``/``). A folder
whose process is no longer alive on this machine is a leftover; one whose process lives is
another running ``--part`` of the same pack, left alone. The temp folder is shared with every
user of the machine, so the sweep trusts no name it finds: the pid must be 1-7 ASCII digits
within Linux's pid range, and a link is removed as a link, never followed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "lerobot-shards-"
_PID_MAX = 1 << 22  # Linux's highest pid_max (kernel/pid.c PID_MAX_LIMIT on 64-bit)
_PID = re.compile(r"[0-9]{1,7}")  # ASCII only: str.isdigit() admits "²", which int() refuses


def resolved_destination(dst_url: str) -> str:
    """The destination as one string per place: a local folder's real absolute path (links
    resolved, relative paths made absolute), a remote URL without its trailing ``/``."""
    protocol, sep, path = dst_url.partition("://")
    if not sep:
        return os.path.realpath(dst_url)
    if protocol in ("file", "local"):
        return os.path.realpath(path)
    return dst_url.rstrip("/")


def pack_tag(dst_url: str) -> str:
    """12 hex digits naming a destination (as resolved) in staging folder names."""
    return hashlib.sha256(resolved_destination(dst_url).encode()).hexdigest()[:12]


def _leftover_pid(name: str) -> int | None:
    """The pid a staging folder's name gives, or None when the name is not one we wrote."""
    parts = name[len(PREFIX) :].split("-")
    if len(parts) < 3 or not _PID.fullmatch(parts[1]):
        return None
    pid = int(parts[1])
    return pid if 0 < pid <= _PID_MAX else None


@contextlib.contextmanager
def staging_dir(dst_url: str, *, kind: str = "shard") -> Iterator[Path]:
    """A private folder in the system temp folder for one staging step of the pack of
    ``dst_url``, removed when the step ends (a killed process's is swept by ``sweep``)."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pack_tag(dst_url)}-{os.getpid()}-{kind}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    return True


def sweep(dst_url: str) -> list[Path]:
    """Remove what killed runs of the pack of ``dst_url`` left in the system temp folder (their
    process is gone); returns what was removed."""
    removed = []
    root = Path(tempfile.gettempdir())
    for path in root.glob(f"{PREFIX}{pack_tag(dst_url)}-*"):
        pid = _leftover_pid(path.name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # rmtree removes links inside as links; it never follows one
            else:
                path.unlink()
        except OSError:
            continue  # not ours to remove (another user's, or gone already): left as found
        removed.append(path)
    return removed


__all__ = ["pack_tag", "resolved_destination", "staging_dir", "sweep"]
