"""Child process of tests/contracts/test_clean_exit.py: read a pack through every parquet path, then exit normally.

    python tests/scripts/read_and_exit.py PACK

Three threads each open ``PackedDataset`` with a ``where=`` filter (the manifest, the episodes
and samples indexes, ``meta/tasks.parquet``) and read every sample (shard parquet row groups,
video members); then ``verify`` runs and ``main`` returns without any cleanup of its own: the
interpreter's normal shutdown is what is under test. pyarrow readers over Python-owned memory
once made shutdown abort ("terminate called without an active exception") in a few percent of
runs of this script.
"""

from __future__ import annotations

import sys
import threading

from lerobot_shards import PackedDataset, verify


def main(root: str) -> None:
    counts, errors = [], []

    def read(seed: int) -> None:
        try:
            dataset = PackedDataset(root, where="chunk_action_pad_before >= 0", shuffle=True, seed=seed, return_uint8=True)
            counts.append(sum(1 for _ in dataset))
        except BaseException as err:  # reported by the main thread
            errors.append(err)

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    report = verify(root)
    print(f"read {counts} samples; verify ok={report.ok}")
    if not report.ok:
        sys.exit(3)


if __name__ == "__main__":
    main(sys.argv[1])
