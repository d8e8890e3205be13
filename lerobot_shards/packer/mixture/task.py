"""One SLURM array task of ``slurm/pack_mixture.sbatch``: pack one line of a sources file.

The command line is ``lerobot-shards mixture task DST --sources FILE [--index I] [-- PACK
OPTIONS]`` (``lerobot_shards/cli/mixture.py``); this module is what it runs. The line's dataset
(``lerobot_shards.packer.mixture.sources``) is packed into ``DST/<name>/`` by ``pack_dataset`` with the pack
options given.

* Already packed and verified (``manifest.json`` and ``verify`` clean): skipped.
* Packed: verified (unless ``verify_after=False``); a clean result removes any old failure record.
* Any error (bad source, pack error, verify problems, SIGTERM from ``scancel`` or the time
  limit): recorded in ``DST/_failures/<name>.json`` as ``{name, source, error, error_type,
  traceback, host, slurm, time}``, and the task exits 0 (143 after SIGTERM), so one bad
  dataset never stops the array; ``mixture create`` lists it. A half-written
  ``DST/<name>/`` is left for the next submission to resume.
* A bad sources file or index, or a destination that takes no writes, is a configuration
  error (``ConfigurationError``, exit 2), nothing recorded.

Library code: ``run`` returns a ``TaskOutcome`` (its ``exit_code`` is what the task exits
with) or raises; the command line prints and exits.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from lerobot_shards.core.errors import ConfigurationError, StorageError
from lerobot_shards.core.format import MANIFEST_PATH
from lerobot_shards.core.storage import Storage
from lerobot_shards.packer.errors import PackError, PackInterrupted, SourcesError
from lerobot_shards.packer.mixture.create import failure_path
from lerobot_shards.packer.mixture.sources import MixtureSource, read_sources
from lerobot_shards.packer.run.pack import pack_dataset
from lerobot_shards.packer.verify_pack import verify

EXIT_TERMINATED = 143


class TaskTerminated(PackInterrupted):
    """SIGTERM arrived (``scancel``, or the job's time limit) while packing."""


@dataclass(frozen=True)
class TaskOutcome:
    """What one array task did with its line.

    ``status``: ``"packed"``, ``"verified"`` (packed, then verified clean), ``"skipped"``
    (already packed and verified), ``"failed"`` (recorded at ``record``) or ``"terminated"``
    (SIGTERM; recorded too). ``error``: the failure in one line, or ``""``.
    """

    name: str
    status: str
    error: str = ""
    record: str = ""

    @property
    def exit_code(self) -> int:
        """The task's exit status: 143 after SIGTERM (as SLURM reports a terminated step), else 0:
        a failed dataset is recorded, never a failed array."""
        return EXIT_TERMINATED if self.status == "terminated" else 0


def run(
    sources_file: str,
    index: int,
    dst: str,
    pack_options: dict | None = None,
    *,
    verify_after: bool = True,
    storage_options: dict | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> TaskOutcome:
    """Pack line ``index`` (0-based, counting only dataset lines) of ``sources_file`` into ``DST/<name>``.

    ``pack_options`` are keyword arguments of ``pack_dataset`` (``video``, ``windows``, ...);
    ``say`` receives the task's progress lines (the command line prints them to the job's log).

    Returns:
        The ``TaskOutcome``; a dataset's failure is recorded and returned, not raised.

    Raises:
        SourcesError: the sources file cannot be read or has no line ``index`` (exit 2).
        ConfigurationError: ``dst`` takes no writes (exit 2): the array's configuration, not a
            dataset's failure.
    """
    source = _task_source(sources_file, index)
    root = Storage(dst, storage_options)
    try:
        root.check_writable()
    except StorageError as err:
        raise ConfigurationError(str(err)) from None
    target = f"{root.url}/{source.name}"
    say(f"[{source.name}] task {index}: {source.source} -> {target}")
    if _packed_and_verified(target, storage_options):
        root.remove(failure_path(source.name), missing_ok=True)
        say(f"[{source.name}] already packed and verified: skipped")
        return TaskOutcome(source.name, "skipped")
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        _pack(source, target, dict(pack_options or {}))
        if verify_after:
            problems = verify(target, storage_options=storage_options).problems
            if problems:
                raise PackError(f"verify found {len(problems)} problem(s) after packing: " + "; ".join(problems[:5]))
    except Exception as err:  # recorded, not raised: the array's other datasets go on
        _record_failure(root, source, err)
        status = "terminated" if isinstance(err, TaskTerminated) else "failed"
        return TaskOutcome(source.name, status, f"{type(err).__name__}: {err}", root.object_url(failure_path(source.name)))
    finally:
        signal.signal(signal.SIGTERM, previous)
    root.remove(failure_path(source.name), missing_ok=True)
    say(f"[{source.name}] packed and verified" if verify_after else f"[{source.name}] packed")
    return TaskOutcome(source.name, "verified" if verify_after else "packed")


def _task_source(sources_file: str, index: int) -> MixtureSource:
    """Line ``index`` of the sources file.

    Raises:
        SourcesError: the file cannot be read, or has no such line.
    """
    sources = read_sources(sources_file)
    if not 0 <= index < len(sources):
        raise SourcesError(f"index {index} is outside the {len(sources)} sources of {sources_file} (0..{len(sources) - 1})")
    return sources[index]


def _pack(source: MixtureSource, target: str, pack_options: dict) -> None:
    """Pack one source into ``target`` with ``pack_options`` (``pack_dataset`` keywords)."""
    if source.is_hub:
        pack_dataset(None, target, repo_id=source.repo_id, revision=source.revision, **pack_options)
    else:
        pack_dataset(source.source, target, **pack_options)


def _packed_and_verified(target: str, storage_options: dict | None) -> bool:
    if not Storage(target, storage_options).exists(MANIFEST_PATH):
        return False
    return verify(target, storage_options=storage_options).ok


def _raise_terminated(signum, frame) -> None:
    raise TaskTerminated(f"received signal {signal.Signals(signum).name} (scancel or the job's time limit)")


def _record_failure(root: Storage, source: MixtureSource, err: BaseException) -> None:
    record = {
        "name": source.name,
        "source": source.source,
        "line": source.line,
        "error": f"{type(err).__name__}: {err}",
        "error_type": type(err).__name__,
        "traceback": "".join(traceback.format_exception(err)),
        "host": socket.gethostname(),
        "slurm": {k: os.environ[k] for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID") if k in os.environ},
        "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    root.write_bytes(failure_path(source.name), (json.dumps(record, indent=1) + "\n").encode())


def array_index(index: int | None, offset: int) -> int | None:
    """The task's line: ``index`` if given, else ``$SLURM_ARRAY_TASK_ID + offset``; None
    outside an array."""
    if index is not None:
        return index
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    if task is None or not task.strip().isdigit():
        return None
    return int(task) + offset


__all__ = ["EXIT_TERMINATED", "TaskOutcome", "TaskTerminated", "array_index", "run"]
