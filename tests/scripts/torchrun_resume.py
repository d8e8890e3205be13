"""Run by tests/reader/test_torchrun_resume.py under torchrun (gloo, CPU): one phase of an epoch.

    torchrun --nproc_per_node=W torchrun_resume.py PACKED OUT --workers K --batch B [--stop-after N]

Each rank resumes from OUT/state.json when it exists (one file for every rank), trains on
batches (records their indices) and, with --stop-after, saves its state after N batches,
writes what it trained on, loads one more batch (trained on, then lost) and dies at once
with ``os._exit``: no cleanup, no ``destroy_process_group``, its DataLoader workers orphaned,
as a killed job. (Not a real SIGKILL of the process tree: some sandbox kernels boost killed
tasks to real-time priority and can livelock reaping them.) Without --stop-after it runs
to the epoch's end.
"""

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from lerobot_shards import PackedDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("packed")
    parser.add_argument("out", type=Path)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--stop-after", type=int, default=None)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = PackedDataset(args.packed, seed=3, episode_pool_size=3, return_uint8=True)
    consumed = 0
    state_path = args.out / "state.json"
    if state_path.exists():
        state = json.loads(state_path.read_text())
        dataset.load_state_dict(state)
        consumed = state["samples_consumed"]
    expected = len(dataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, num_workers=args.workers)
    trained = []
    for step, batch in enumerate(loader):
        if args.stop_after is not None and step == args.stop_after:
            consumed += len(trained)
            state = dataset.state_dict(samples_consumed=consumed, batch_size=args.batch, num_workers=args.workers)
            (args.out / f"state-rank{rank}.json").write_text(json.dumps(state))
            (args.out / f"trained-{world}x{args.workers}-rank{rank}.json").write_text(json.dumps(trained))
            dist.barrier()  # the checkpoint is complete on every rank before any rank dies
            continue  # the next batch is loaded and trained on, but after the checkpoint
        if args.stop_after is not None and step == args.stop_after + 1:
            os._exit(137)  # killed: nothing is flushed or closed
        trained += batch["index"].tolist()
    (args.out / f"trained-{world}x{args.workers}-rank{rank}.json").write_text(json.dumps({"trained": trained, "len": expected}))
    # Every rank ends together before gloo tears its connections down (as scripts/train.py
    # does): a rank still finishing when the others had torn down failed with "Connection
    # closed by peer" in a loaded CI run.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
