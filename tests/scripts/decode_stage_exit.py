"""Child process of tests/contracts/test_clean_exit.py: leave a ``DecodeStage.wrap`` iterator mid-epoch and exit.

    python tests/scripts/decode_stage_exit.py PACK

Workers ship compressed members, ``DecodeStage("cpu").wrap`` decodes ahead in a thread; the
script takes two batches and returns while the decode thread is busy and the iterator is still
referenced from a global, as a training script that stops early does. The decode thread must
not be inside the decoder when the interpreter finalizes ("terminate called without an active
exception" otherwise).
"""

from __future__ import annotations

import sys

import torch

from lerobot_shards import PackedDataset
from lerobot_shards.reader.decode import DecodeStage, collate

KEPT = []


def dataset_fps(root: str) -> int:
    return PackedDataset(root, shuffle=False).fps


def main(root: str) -> None:
    dataset = PackedDataset(
        root, decode_device="cpu", seed=0, delta_timestamps={"observation.images.top": [-1 / dataset_fps(root), 0.0]}
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1, collate_fn=collate)
    batches = DecodeStage("cpu").wrap(loader, ahead=2)
    KEPT.append(batches)
    for step, batch in enumerate(batches):
        assert batch["observation.images.top"].dtype == torch.float32
        if step == 1:
            break
    print("took 2 batches")


if __name__ == "__main__":
    main(sys.argv[1])
