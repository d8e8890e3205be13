"""Where a pack stages a shard before committing it: the system temp folder, under names that
say which pack and which process made them, so a re-run of the same pack sweeps what a killed
run left (a SIGKILLed SLURM job cannot clean up after itself; at 512 MB shards on a preemptible
partition the leftovers would fill ``/tmp``).

Names: ``lerobot-shards-<pack tag>-<pid>-<random>``; the pack tag is 12 hex digits of the
SHA-256 of the destination's URL. A folder whose process is no longer alive on this machine is
a leftover; one whose process lives is another running ``--part`` of the same pack, left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "lerobot-shards-"


def pack_tag(dst_url: str) -> str:
    """12 hex digits naming a destination in staging folder names."""
    return hashlib.sha256(dst_url.encode()).hexdigest()[:12]


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
        parts = path.name[len(PREFIX) :].split("-")
        if len(parts) < 3 or not parts[1].isdigit() or _alive(int(parts[1])):
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


__all__ = ["pack_tag", "staging_dir", "sweep"]
