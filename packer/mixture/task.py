"""One SLURM array task of ``slurm/pack_mixture.sbatch``: pack one line of a sources file.

    python -m packer.mixture.task DST --sources sources.txt [--index I] [-- PACK OPTIONS]

``--index`` defaults to ``$SLURM_ARRAY_TASK_ID + --offset`` (offsets let arrays larger
than SLURM's MaxArraySize be submitted in pieces). The line's dataset
(``packer.mixture.sources``) is packed into ``DST/<name>/`` by ``lerobot-shards pack`` with
the options after ``--`` (``--video hevc``, ``--window ...``, ``--storage-options ...``).

* Already packed and verified (``manifest.json`` and ``verify`` clean): skipped.
* Packed: verified (unless ``--no-verify``); a clean result removes any old failure record.
* Any error (bad source, pack error, verify problems, SIGTERM from ``scancel`` or the time
  limit): recorded in ``DST/_failures/<name>.json`` as ``{name, source, error, error_type,
  traceback, host, slurm, time}``, and the task exits 0 (143 after SIGTERM), so one bad
  dataset never stops the array; ``mixture create`` lists it. A half-written
  ``DST/<name>/`` is left for the next submission to resume.
* A bad sources file or index is a configuration error: exit 2, nothing recorded.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import socket
import sys
import traceback

from packer.destination import Destination
from packer.mixture.create import failure_path
from packer.mixture.sources import (
    MixtureSource,
    SourcesError,
    dataset_name,
    read_sources,
)

__all__ = ["dataset_name", "main", "read_sources", "run"]

EXIT_CONFIG = 2
EXIT_TERMINATED = 143


class TaskTerminated(Exception):
    """SIGTERM arrived (``scancel``, or the job's time limit) while packing."""


def run(
    sources_file: str,
    index: int,
    dst: str,
    pack_args: list[str] | None = None,
    *,
    verify_after: bool = True,
    storage_options: dict | None = None,
) -> int:
    """Pack line ``index`` (0-based, counting only dataset lines) of ``sources_file`` into ``DST/<name>``.

    Returns the process exit code (see the module docstring).
    """
    try:
        sources = read_sources(sources_file)
    except SourcesError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    if not 0 <= index < len(sources):
        print(f"error: index {index} is outside the {len(sources)} sources of {sources_file} (0..{len(sources) - 1})", file=sys.stderr)
        return EXIT_CONFIG
    source = sources[index]
    root = Destination(dst, storage_options)
    target = f"{root.url}/{source.name}"
    print(f"[{source.name}] task {index}: {source.source} -> {target}", flush=True)
    if _packed_and_verified(target, storage_options):
        root.remove(failure_path(source.name))
        print(f"[{source.name}] already packed and verified: skipped", flush=True)
        return 0
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        _pack(source, target, list(pack_args or []))
        if verify_after:
            from packer.tools.verify import verify

            problems = verify(target, storage_options=storage_options).problems
            if problems:
                raise RuntimeError(f"verify found {len(problems)} problem(s) after packing: " + "; ".join(problems[:5]))
    except (Exception, TaskTerminated) as err:  # recorded, not raised: the array's other datasets go on
        _record_failure(root, source, err)
        print(f"[{source.name}] FAILED: {_describe(err)} (recorded in {root.url}/{failure_path(source.name)})", file=sys.stderr, flush=True)
        return EXIT_TERMINATED if isinstance(err, TaskTerminated) else 0
    finally:
        signal.signal(signal.SIGTERM, previous)
    root.remove(failure_path(source.name))
    print(f"[{source.name}] packed and verified" if verify_after else f"[{source.name}] packed", flush=True)
    return 0


def _pack(source: MixtureSource, target: str, pack_args: list[str]) -> None:
    """Run ``lerobot-shards pack`` in-process (same options, same errors as the CLI)."""
    from packer.cli.pack import pack

    pack.main(args=[*source.pack_args(target), *pack_args], prog_name="lerobot-shards pack", standalone_mode=False)


def _packed_and_verified(target: str, storage_options: dict | None) -> bool:
    if not Destination(target, storage_options).exists("manifest.json"):
        return False
    from packer.tools.verify import verify

    return verify(target, storage_options=storage_options).ok


def _raise_terminated(signum, frame) -> None:
    raise TaskTerminated(f"received signal {signal.Signals(signum).name} (scancel or the job's time limit)")


def _describe(err: BaseException) -> str:
    # The pack CLI turns library errors into ClickException "from None": report the original.
    original = err.__context__ if type(err).__name__ == "ClickException" and err.__context__ is not None else err
    return f"{type(original).__name__}: {err}"


def _record_failure(root: Destination, source: MixtureSource, err: BaseException) -> None:
    original = err.__context__ if type(err).__name__ == "ClickException" and err.__context__ is not None else err
    record = {
        "name": source.name,
        "source": source.source,
        "line": source.line,
        "error": _describe(err),
        "error_type": type(original).__name__,
        "traceback": "".join(traceback.format_exception(err)),
        "host": socket.gethostname(),
        "slurm": {k: os.environ[k] for k in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID") if k in os.environ},
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    root.write_bytes(failure_path(source.name), (json.dumps(record, indent=1) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pack_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pack_args = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m packer.mixture.task", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dst", help="mixture root: datasets go to DST/<name>/")
    parser.add_argument("--sources", required=True, help="sources file (see packer.mixture.sources)")
    parser.add_argument("--index", type=int, default=None, help="0-based dataset line (default: $SLURM_ARRAY_TASK_ID + --offset)")
    parser.add_argument("--offset", type=int, default=0, help="added to $SLURM_ARRAY_TASK_ID (default 0)")
    parser.add_argument("--video", default=None, choices=["copy", "hevc", "h264"], help="shorthand for `-- --video MODE`")
    parser.add_argument("--workers", type=int, default=None, help="shorthand for `-- --workers N`")
    parser.add_argument("--no-verify", action="store_true", help="do not verify after packing")
    parser.add_argument("--storage-options", default=None, help="fsspec options for DST as JSON (also passed to pack)")
    args = parser.parse_args(argv)
    index = args.index
    if index is None:
        task = os.environ.get("SLURM_ARRAY_TASK_ID")
        if task is None or not task.strip().isdigit():
            print(f"error: give --index or run inside a SLURM array (SLURM_ARRAY_TASK_ID={task!r})", file=sys.stderr)
            return EXIT_CONFIG
        index = int(task) + args.offset
    storage_options = json.loads(args.storage_options) if args.storage_options else None
    if args.video:
        pack_args = ["--video", args.video, *pack_args]
    if args.workers:
        pack_args = ["--workers", str(args.workers), *pack_args]
    if args.storage_options:
        pack_args = ["--storage-options", args.storage_options, *pack_args]
    return run(args.sources, index, args.dst, pack_args, verify_after=not args.no_verify, storage_options=storage_options)


if __name__ == "__main__":
    raise SystemExit(main())
