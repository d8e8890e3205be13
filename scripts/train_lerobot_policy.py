"""Train a LeRobot policy (ACT by default) on a packed dataset: LeRobot's own policy, processors
and loss; our reader, metadata and loader.

Runs where lerobot is installed (``make parity`` creates ``.venv-parity`` with lerobot 0.6.1):

    .venv-parity/bin/python scripts/train_lerobot_policy.py --data PACKED --steps 200 [--policy act|diffusion]

- ``make_policy(cfg, ds_meta=ds.meta)``: ``PackedDataset.meta`` has what
  ``LeRobotDatasetMetadata`` gives a policy (features as packed, stats, fps), for a local or a
  bucket pack, so no LeRobot metadata object (and no local copy) is needed.
- ``delta_timestamps`` come from the policy's own ``*_delta_indices``, as LeRobot's
  ``resolve_delta_timestamps`` builds them.
- Frames travel as uint8 (``return_uint8=True``, ``BatchLoader``); ``to_device`` turns them into
  float32 in [0, 1] on the training device, bit-identical to LeRobot's own samples; LeRobot's
  pre-processor then normalizes them with the dataset's stats exactly as it would its own.
- Offline: ``pretrained_backbone_weights=None`` (no download of ImageNet weights).

Prints one JSON line per logged step (``{"step", "loss"}``) and a final summary with the mean
loss of the first and last tenth of the steps; exits 1 if a loss is not finite (and 2 with
``--require-fall`` if the loss did not fall). ``make parity`` runs it for a few steps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lerobot_shards import BatchLoader, PackedDataset, to_device


def policy_config(name: str, device: str):
    if name == "act":
        from lerobot.policies.act.configuration_act import ACTConfig

        # A short chunk keeps CPU steps cheap; the data path is the same at 100.
        return ACTConfig(device=device, pretrained_backbone_weights=None, chunk_size=20, n_action_steps=20, optimizer_lr=1e-4)
    if name == "diffusion":
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

        return DiffusionConfig(device=device, pretrained_backbone_weights=None)
    raise ValueError(f"unknown policy {name!r}: act or diffusion")


def delta_timestamps(cfg, meta) -> dict[str, list[float]]:
    """LeRobot's resolve_delta_timestamps: the policy's delta indices over fps, per feature."""
    delta = {}
    for key in meta.features:
        if key == "action" and cfg.action_delta_indices is not None:
            delta[key] = [i / meta.fps for i in cfg.action_delta_indices]
        elif key.startswith("observation.") and cfg.observation_delta_indices is not None:
            delta[key] = [i / meta.fps for i in cfg.observation_delta_indices]
    return delta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="packed dataset: a directory or a bucket URL")
    parser.add_argument("--storage-options", default=None, help="fsspec options for a bucket, as JSON")
    parser.add_argument("--policy", default="act", choices=["act", "diffusion"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--require-fall", action="store_true", help="exit 2 unless the last tenth's mean loss is below the first tenth's"
    )
    args = parser.parse_args(argv)

    try:
        from lerobot.policies.factory import make_policy, make_pre_post_processors
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] != "lerobot":
            raise
        print(
            "error: this script needs lerobot (0.6.1), which is not installed in this Python. "
            "`make parity` creates .venv-parity with it; run: .venv-parity/bin/python scripts/train_lerobot_policy.py ...",
            file=sys.stderr,
        )
        return 2

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) - args.num_workers))
    torch.manual_seed(args.seed)
    options = json.loads(args.storage_options) if args.storage_options else None
    probe = PackedDataset(args.data, storage_options=options, shuffle=False)
    cfg = policy_config(args.policy, device)
    policy = make_policy(cfg, ds_meta=probe.meta)
    preprocessor, _ = make_pre_post_processors(cfg, dataset_stats=probe.meta.stats)
    dataset = PackedDataset(
        args.data, storage_options=options, delta_timestamps=delta_timestamps(cfg, probe.meta), seed=args.seed, return_uint8=True
    )
    loader = BatchLoader(dataset, batch_size=args.batch_size, num_workers=args.num_workers, drop_last=True)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=cfg.optimizer_lr, weight_decay=cfg.optimizer_weight_decay)
    policy.train()
    losses, step, epoch, started = [], 0, 0, time.perf_counter()
    while step < args.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            batch = preprocessor(to_device(batch, device))  # uint8 -> float32 [0, 1] -> normalized
            loss, _ = policy.forward(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            losses.append(loss.item())
            if not math.isfinite(losses[-1]):
                print(json.dumps({"step": step, "loss": losses[-1], "error": "loss is not finite"}), flush=True)
                return 1
            if step % args.log_every == 0 or step == 1:
                print(json.dumps({"step": step, "epoch": epoch, "loss": round(losses[-1], 5)}), flush=True)
            if step >= args.steps:
                break
        epoch += 1
    tenth = max(1, len(losses) // 10)
    first, last = sum(losses[:tenth]) / tenth, sum(losses[-tenth:]) / tenth
    print(
        json.dumps(
            {
                "policy": args.policy,
                "steps": step,
                "first_tenth_loss": round(first, 5),
                "last_tenth_loss": round(last, 5),
                "falls": last < first,
                "seconds": round(time.perf_counter() - started, 1),
            }
        ),
        flush=True,
    )
    return 2 if args.require_fall and not last < first else 0


if __name__ == "__main__":
    raise SystemExit(main())
