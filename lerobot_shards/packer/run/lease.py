"""A destination lease: one running pack per part of a destination.

Two packs of the same part into one destination both ran: each rewrote the other's shards, and
nothing said so. A pack now holds a lease on its part (``--part i/n``, or the whole pack) from
claiming the destination to its end; a second pack whose shards meet a held lease's is refused
by name (host, pid, SLURM job, since when). Parts of one plan (same ``n``, another ``i``) never
meet: an array's tasks run side by side.

- Local destinations: ``DST/.leases/<part>.json`` under an advisory lock (``flock``), held by
  the running process; the kernel drops it when the process dies, so a killed pack's lease is
  taken over at once (and said so).
- Buckets (no locks): the same file with an expiry, renewed by a thread every quarter of
  ``TTL_S`` while the pack runs. A lease that expired, or that this host's dead process or this
  SLURM job (requeued) wrote, is taken over with a line saying so. Between reading the leases
  and writing ours another pack may write its own: the lease is read back after a pause and
  the later writer yields, which narrows the race to clocks and pauses, not closes it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lerobot_shards.core.errors import LeRobotShardsError
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import PackError

log = logging.getLogger(__name__)

LEASE_DIR = ".leases"
TTL_S = 3600.0  # a bucket lease lives this long past its last renewal
_SETTLE_S = 1.0  # a bucket lease is read back after this pause


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: the record in its file."""

    host: str
    pid: int
    job: str  # "$SLURM_JOB_ID" (array: "<job>_<task>"), or ""
    since: float
    expires: float
    token: str

    @classmethod
    def mine(cls) -> Holder:
        now = time.time()
        job = os.environ.get("SLURM_JOB_ID", "")
        if job and os.environ.get("SLURM_ARRAY_TASK_ID"):
            job = f"{os.environ.get('SLURM_ARRAY_JOB_ID', job)}_{os.environ['SLURM_ARRAY_TASK_ID']}"
        return cls(socket.gethostname(), os.getpid(), job, now, now + TTL_S, os.urandom(8).hex())

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        """The record, or None when the file is not one (then it holds nothing)."""
        try:
            value = json.loads(data[:4096])
            return cls(
                str(value["host"])[:200],
                int(value["pid"]),
                str(value.get("job", ""))[:100],
                float(value["since"]),
                float(value["expires"]),
                str(value["token"])[:64],
            )
        except (ValueError, KeyError, TypeError):
            return None

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()

    def describe(self) -> str:
        job = f", SLURM job {self.job}" if self.job else ""
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host}{job}, since {started}"


def part_name(part: tuple[int, int] | None) -> str:
    """A lease's file stem: ``part-0-of-4``, or ``all`` for a whole pack."""
    return "all" if part is None else f"part-{part[0]}-of-{part[1]}"


def _meets(a: str, b: str) -> bool:
    """Whether two parts' shards can meet: the same part, a whole pack beside any part, or parts
    of different splits; never two parts of one split."""
    if a == b or "all" in (a, b):
        return True
    return a.rsplit("-of-", 1)[1] != b.rsplit("-of-", 1)[1]


def _busy(storage: Storage, name: str, holder: Holder) -> PackError:
    return PackError(
        f"{storage.url} is being packed by another run ({part_name_text(name)}: {holder.describe()}); "
        "two packs of the same shards overwrite each other's: wait for it to end, or stop it "
        "(scancel, kill) and run this again"
    )


def part_name_text(name: str) -> str:
    return "the whole pack" if name == "all" else name.replace("-", " ").replace("part ", "--part ", 1)


@contextlib.contextmanager
def destination_lease(storage: Storage, part: tuple[int, int] | None) -> Iterator[None]:
    """Hold this run's lease on ``storage`` while the block runs; remove it after.

    Raises:
        PackError: another live pack holds a lease whose shards meet this run's (names it).
    """
    if storage.is_local:
        with _local_lease(storage, part_name(part)):
            yield
    else:
        with _bucket_lease(storage, part_name(part)):
            yield


@contextlib.contextmanager
def _local_lease(storage: Storage, name: str) -> Iterator[None]:
    import fcntl

    folder = Path(storage.root) / LEASE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = Holder.parse(os.pread(fd, 4096, 0)) or Holder("another host", 0, "", time.time(), 0, "")
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise _busy(storage, name, holder) from None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break  # locked, and still the file at that name
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed it as we locked it: lock the file at the name now
    try:
        try:  # the file is ours from here (we hold its lock): it goes however this ends
            left = Holder.parse(os.pread(fd, 4096, 0))
            for other in sorted(folder.glob("*.json")):
                if other.name != path.name and _meets(name, other.stem):
                    _check_unlocked(storage, other)
            if left is not None:
                log.warning("%s: took over the lease a stopped run left (%s)", storage.url, left.describe())
            os.ftruncate(fd, 0)
            os.pwrite(fd, Holder.mine().to_bytes(), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()  # still under our lock: no one else's file
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty: other parts' leases stay
    finally:
        os.close(fd)


def _check_unlocked(storage: Storage, path: Path) -> None:
    """Refuse when another part's lease file that meets ours is locked (its pack runs)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # gone, or not a file of ours
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            holder = Holder.parse(os.pread(fd, 4096, 0)) or Holder("another host", 0, "", time.time(), 0, "")
            raise _busy(storage, path.stem, holder) from None
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def running_packs(storage: Storage) -> list[Holder]:
    """The runs packing into ``storage`` now: local leases whose lock a live process holds,
    bucket leases not expired whose process may still run (``_alive_here``). For what ``verify``
    says of a pack without its manifest: being written (wait), or stopped (re-run, finalize)."""
    if not storage.is_local:
        return [h for h in _bucket_holders(storage).values() if time.time() <= h.expires and _alive_here(h)]
    import fcntl

    folder = Path(storage.path(LEASE_DIR))
    held = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError as err:
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                held.append(Holder.parse(os.pread(fd, 4096, 0)) or Holder("another host", 0, "", time.time(), 0, ""))
        finally:
            os.close(fd)
    return held


def _alive_here(holder: Holder) -> bool:
    """Whether the lease's process may still run: always for another machine's; on this one
    when it lives and is not this process (an earlier call of ours that failed to remove it)."""
    if holder.host != socket.gethostname():
        return True  # another machine's process: not ours to judge
    if holder.pid == os.getpid():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _bucket_holders(storage: Storage) -> dict[str, Holder]:
    out = {}
    for rel in storage.list(LEASE_DIR):
        if rel.endswith(".json") and rel.count("/") == 1 and storage.size(rel) <= 4096:
            holder = Holder.parse(storage.read_bytes(rel))
            if holder is not None:
                out[rel.rsplit("/", 1)[1].removesuffix(".json")] = holder
    return out


@contextlib.contextmanager
def _bucket_lease(storage: Storage, name: str) -> Iterator[None]:
    mine = Holder.mine()
    rel = f"{LEASE_DIR}/{name}.json"
    for other, holder in _bucket_holders(storage).items():
        if not _meets(name, other):
            continue
        if time.time() > holder.expires or not _alive_here(holder) or (mine.job and holder.job == mine.job):
            if other == name:
                log.warning("%s: took over the lease a stopped run left (%s)", storage.url, holder.describe())
            continue
        raise _busy(storage, other, holder)
    storage.write_bytes(rel, mine.to_bytes())
    time.sleep(_SETTLE_S)
    now = Holder.parse(storage.read_bytes(rel)) if storage.exists(rel) else None
    if now is not None and now.token != mine.token:
        raise _busy(storage, name, now)  # another pack wrote its lease after ours: it goes on
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(TTL_S / 4):
            with contextlib.suppress(LeRobotShardsError, OSError):
                now = time.time()
                storage.write_bytes(rel, Holder(mine.host, mine.pid, mine.job, mine.since, now + TTL_S, mine.token).to_bytes())

    thread = threading.Thread(target=renew, name="lerobot-shards-lease", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
        with contextlib.suppress(LeRobotShardsError, OSError):
            held = Holder.parse(storage.read_bytes(rel))
            if held is not None and held.token == mine.token:
                storage.remove(rel, missing_ok=True)


__all__ = ["running_packs", "LEASE_DIR", "TTL_S", "destination_lease", "part_name"]
