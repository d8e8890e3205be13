"""Run by tests/reader/test_torchrun_split.py under `torchrun --nproc_per_node=2` (gloo, CPU).

Each rank streams one epoch through a DataLoader with workers and writes the anchors it saw.
Rank and world size come from torch.distributed, as in training: nothing is passed in.
"""

import json
import sys

import torch
import torch.distributed as dist

from lerobot_shards import PackedDataset


def main() -> None:
    packed, out_dir = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    dataset = PackedDataset(packed, seed=5, return_uint8=True)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)
    seen = [i for batch in loader for i in batch["index"].tolist()]
    with open(f"{out_dir}/rank{dist.get_rank()}.json", "w") as handle:
        json.dump({"rank": dist.get_rank(), "world_size": dist.get_world_size(), "len": len(dataset), "seen": seen}, handle)
    # Every rank ends together before gloo tears its connections down (as scripts/train.py
    # does): a rank still finishing when the others had torn down failed with "Connection
    # closed by peer" in a loaded CI run.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
