"""One SLURM array task of ``slurm/pack_mixture.sbatch``: pack line I of a sources file.

    python -m packer.mixture_task --sources sources.txt --index $SLURM_ARRAY_TASK_ID DST [pack options]

A line is ``ORG/NAME[@REVISION]`` (Hub) or a path/URL; blank lines and ``#`` comments are
skipped. The dataset goes to ``DST/<name>/``; a dataset already packed and verified is
skipped; a failure is recorded in ``DST/_failures/<name>.json`` and the task still exits 0,
so one bad dataset never stops the array (the final ``mixture create`` lists failures).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import traceback

from packer.destination import Destination
from packer.mixture import FAILURES_DIR
from packer.pack import pack_dataset
from packer.verify import verify


def read_sources(path: str) -> list[str]:
    with open(path) as handle:
        return [line.split("#", 1)[0].strip() for line in handle if line.split("#", 1)[0].strip()]


def dataset_name(source: str) -> str:
    """A directory name for a source: ``org/name@rev`` -> ``org--name``, a URL/path -> its last part."""
    base = source.split("@", 1)[0] if "://" not in source else source
    if "://" not in base and not base.startswith(("/", ".")) and base.count("/") == 1:
        name = base.replace("/", "--")
    else:
        name = base.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def run(sources_file: str, index: int, dst: str, **pack_options) -> int:
    sources = read_sources(sources_file)
    if not 0 <= index < len(sources):
        print(f"index {index} outside the {len(sources)} sources in {sources_file}", file=sys.stderr)
        return 2
    source = sources[index]
    name = dataset_name(source)
    target = f"{dst.rstrip('/')}/{name}"
    destination = Destination(dst)
    failure = f"{FAILURES_DIR}/{name}.json"
    if Destination(target).exists("manifest.json") and verify(target).ok:
        print(f"[{name}] already packed and verified: skipped")
        destination.remove(failure)
        return 0
    try:
        if "://" in source or source.startswith(("/", ".")):
            report = pack_dataset(source, target, **pack_options)
        else:
            repo_id, _, revision = source.partition("@")
            report = pack_dataset(None, target, repo_id=repo_id, revision=revision or None, **pack_options)
        destination.remove(failure)
        print(f"[{name}] packed {report.episodes} episodes into {report.shards} shards")
    except Exception as err:  # recorded, not raised: the other datasets of the array go on
        destination.write_bytes(failure, json.dumps({"source": source, "error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()}).encode())
        print(f"[{name}] FAILED: {err}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dst")
    parser.add_argument("--sources", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--video", default="copy", choices=["copy", "hevc", "h264"])
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    return run(args.sources, args.index, args.dst, video=args.video, workers=args.workers)


if __name__ == "__main__":
    raise SystemExit(main())
