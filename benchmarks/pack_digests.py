"""Pack bytes before and after a refactor: the SHA-256 of every file of every pack.

    .venv/bin/python benchmarks/pack_digests.py --out bench-out/digests-before.json
    ... change the packer ...
    .venv/bin/python benchmarks/pack_digests.py --out bench-out/digests-after.json --compare bench-out/digests-before.json

Packs the shared ALOHA set (``--source``, 4 cameras at 480x640) in copy, hevc and h264 mode and
the generator's rollover dataset (9 episodes over several data and video files, several shards)
in the same three modes, each into a fresh folder, then hashes every file (the manifest, the
indexes, ``meta/``, every shard's tar, parquet and receipt). ``--compare`` exits 1 naming every
file whose digest differs (or that appears or disappears); a refactor of the packer must leave
all of them equal.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lerobot_shards import pack_dataset
from lerobot_shards.testing import rollover_spec, write_sample_dataset

MODES = ("copy", "hevc", "h264")


def digests(pack: Path) -> dict[str, str]:
    return {
        str(p.relative_to(pack)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(pack.rglob("*"))
        if p.is_file() and ".leases" not in p.parts
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "datasets" / "aloha_cube_4cam")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="an earlier --out: exit 1 unless every digest is equal")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pack-digests-"))
    found: dict[str, dict[str, str]] = {}
    try:
        generated = work / "rollover"
        write_sample_dataset(generated, rollover_spec())
        for name, source, extra in (("aloha", args.source, {}), ("rollover", generated, {"shard_size_mb": 0.03})):
            for mode in MODES:
                dst = work / f"{name}-{mode}"
                pack_dataset(str(source), str(dst), video=mode, workers=max(1, os.cpu_count() or 1), **extra)
                found[f"{name}-{mode}"] = digests(dst)
                print(f"[digests] {name}-{mode}: {len(found[f'{name}-{mode}'])} files", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found, indent=1, sort_keys=True))
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text())
    differ = [
        f"{pack}/{rel}"
        for pack in sorted(set(before) | set(found))
        for rel in sorted(set(before.get(pack, {})) | set(found.get(pack, {})))
        if before.get(pack, {}).get(rel) != found.get(pack, {}).get(rel)
    ]
    files = sum(len(v) for v in found.values())
    print(f"[digests] {files} files in {len(found)} packs; {len(differ)} differ" + (f": {differ[:20]}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
