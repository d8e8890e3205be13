"""Child process of tests/contracts/test_fuzz_integrity.py: flip one byte at a time and read the pack.

    python tests/scripts/flip_bytes.py PACK FLIPS.json RESULTS.jsonl

For each flip ``{"file", "offset", "xor"}`` (file relative to PACK): flip the byte, read every
sample with ``PackedDataset`` (a ``where=`` that selects all anchors, so the sample index is
read too), run ``verify``, restore the byte, and append one JSON line: whether the samples
equal the clean ones, the error (type, message) if one was raised, and verify's verdict.
Runs in its own process so that a crash, a hang (faulthandler exits after a time limit) or
runaway memory is seen by the parent instead of taking the test runner down; the last line
reports the peak RSS.
"""

from __future__ import annotations

import faulthandler
import json
import sys
from pathlib import Path

import torch

from lerobot_shards import PackedDataset, verify
from lerobot_shards.core.errors import LeRobotShardsError

WHERE = "chunk_action_pad_before >= 0"  # every anchor: makes the reader read the sample index


def read_all(root: Path) -> list[dict]:
    dataset = PackedDataset(str(root), where=WHERE, shuffle=False, return_uint8=True, prefetch_episodes=0)
    return list(dataset)


def same(a: list[dict], b: list[dict]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.keys() != y.keys():
            return False
        for key in x:
            u, v = x[key], y[key]
            if isinstance(u, torch.Tensor):
                if not (isinstance(v, torch.Tensor) and u.dtype == v.dtype and u.shape == v.shape and torch.equal(u, v)):
                    return False
            elif u != v:
                return False
    return True


def peak_rss_kb() -> int:
    """This process's high-water mark. Not ``ru_maxrss``: a child of a large test process
    starts with the parent's count (fork copies it, exec keeps it); ``VmHWM`` starts fresh."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def main() -> None:
    root, flips_path, out_path = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    flips = json.loads(flips_path.read_text())
    clean = read_all(root)
    with open(out_path, "w") as out:
        for flip in flips:
            path = root / flip["file"]
            original = path.read_bytes()
            damaged = bytearray(original)
            damaged[flip["offset"]] ^= flip["xor"]
            path.write_bytes(bytes(damaged))
            faulthandler.dump_traceback_later(120, exit=True)  # a hang fails the test, it does not stall it
            record = dict(flip)
            try:
                samples = read_all(root)
                record.update(outcome="identical" if same(samples, clean) else "different")
            except LeRobotShardsError as err:
                record.update(outcome="error", error_type=type(err).__name__, message=str(err)[:2000])
            except Exception as err:  # not one of ours: the test reports it
                record.update(outcome="foreign-error", error_type=type(err).__name__, message=str(err)[:2000])
            try:
                record["verify_ok"] = verify(str(root)).ok
            except Exception as err:  # verify must never crash either
                record["verify_ok"] = None
                record["verify_crash"] = f"{type(err).__name__}: {err}"[:2000]
            faulthandler.cancel_dump_traceback_later()
            path.write_bytes(original)
            record["peak_rss_kb"] = peak_rss_kb()  # a jump names the flip
            out.write(json.dumps(record) + "\n")
            out.flush()
        out.write(json.dumps({"peak_rss_kb": peak_rss_kb(), "clean_samples": len(clean)}) + "\n")


if __name__ == "__main__":
    main()
