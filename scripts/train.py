"""A small, resumable, multi-node training loop over a packed dataset (or a mixture).

Runs under ``torchrun`` (or ``accelerate launch``, which sets the same environment), on CPU
(gloo) or GPU (nccl). The policy is deliberately tiny (an MLP on the state and a pooled image
feature, predicting an action chunk): the point is the data path, the recommended one:
``BatchLoader`` builds whole uint8 batches in the workers and ``to_device`` turns frames into
float32 on the training device. Checkpoints hold the model, the optimizer and
``loader.state_dict()``: resuming on the same shape continues the
exact sample sequence of the uninterrupted run, and on any other number of ranks or workers
serves the rest of the epoch exactly once (lerobot_shards.reader.plan.resume_state).

    torchrun --nproc_per_node=2 scripts/train.py --data /path/packed --steps 200 --ckpt run/ckpt.pt
    torchrun --nproc_per_node=8 scripts/train.py --data s3://bucket/mix/mixture.json --ckpt run/ckpt.pt
    torchrun --nproc_per_node=8 scripts/train.py --data PACK_HEVC --decode-device cuda --policy act --ckpt run/ckpt.pt

``--data`` is a pack's root, a ``mixture.json`` (``lerobot-shards mixture create``) or several
packs (a mixture of them); a mixture's datasets must share one fps (the action window is
``--horizon`` frames at it). ``--decode-device cuda`` decodes on the GPU (NVDEC, packs made
with ``--video hevc``/``h264``): workers ship compressed members, a ``DecodeStage`` decodes.
``--policy act`` trains a policy of ACT's size (``scripts/act_sized.py``) instead of the tiny one.

Every rank reports the share of its step time spent waiting for data (the time inside the
loader's ``next``, over the wall time of the steps after the first ``--log-every``):
``[train] rank R data wait P% ...``; near zero means the loader keeps up with the policy.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from lerobot_shards import BatchLoader, DecodeStage, LeRobotShardsError, MixtureDataset, PackedDataset, to_device

ACTION_KEY = "action"
STATE_KEY = "observation.state"


class TinyPolicy(nn.Module):
    """State + mean-pooled camera pixels -> an action chunk of ``horizon`` steps."""

    def __init__(self, state_dim: int, num_cameras: int, action_dim: int, horizon: int):
        super().__init__()
        self.horizon, self.action_dim = horizon, action_dim
        self.net = nn.Sequential(nn.Linear(state_dim + 3 * num_cameras, 128), nn.ReLU(), nn.Linear(128, horizon * action_dim))

    def forward(self, state: torch.Tensor, cameras: list[torch.Tensor]) -> torch.Tensor:
        pooled = [c.float().mean(dim=(-1, -2)) for c in cameras]  # (B, 3) per camera
        features = torch.cat([state, *pooled], dim=-1)
        return self.net(features).view(-1, self.horizon, self.action_dim)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, nargs="+", help="packed dataset path or URL, a mixture.json, or several packs")
    parser.add_argument(
        "--storage-options",
        type=json.loads,
        default=None,
        help='fsspec options for a bucket as JSON, e.g. \'{"endpoint_url": "http://127.0.0.1:9000"}\' '
        "(MinIO, R2, a local S3); AWS_ENDPOINT_URL works too",
    )
    parser.add_argument("--allow-duplicates", action="store_true", help="several --data packs may be the same pack (copies)")
    parser.add_argument(
        "--decode-device", default=None, help="decode video on this device (cuda: NVDEC) instead of in the workers"
    )
    parser.add_argument("--policy", choices=("tiny", "act"), default="tiny", help="tiny MLP, or a policy of ACT's size")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps to run in total")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--horizon", type=int, default=4, help="action chunk length (frames)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ckpt", type=Path, required=True, help="checkpoint file (written and resumed)")
    parser.add_argument("--ckpt-every", type=int, default=10)
    parser.add_argument("--stop-after", type=int, default=None, help="exit after this many steps (simulates a kill)")
    parser.add_argument("--log-batches", type=Path, default=None, help="append each batch's sample indices (JSONL)")
    parser.add_argument("--log-every", type=int, default=10)
    return parser.parse_args(argv)


def normalizer(stats: dict, key: str, width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, std)`` of ``key`` from the dataset's stats (LeRobot's MEAN_STD normalization):
    unnormalized actions of a synthetic dataset reach 5,000, and a loss in those units climbs to
    millions. A key without stats of its width is left as it is (mean 0, std 1)."""
    found = stats.get(key) or {}
    mean = np.asarray(found.get("mean", []), dtype=np.float32).reshape(-1)
    std = np.asarray(found.get("std", []), dtype=np.float32).reshape(-1)
    if mean.shape != (width,) or std.shape != (width,):
        mean, std = np.zeros(width, np.float32), np.ones(width, np.float32)
    return torch.from_numpy(mean).to(device), torch.from_numpy(np.maximum(std, 1e-8)).to(device)


def open_dataset(
    data: list[str],
    *,
    horizon: int,
    seed: int,
    decode_device: str | None = None,
    allow_duplicates: bool = False,
    storage_options: dict | None = None,
) -> PackedDataset | MixtureDataset:
    """The training stream: a pack, or a mixture (a ``mixture.json``, or several packs) whose
    datasets share one fps; the action window is ``horizon`` frames at that fps."""
    is_mixture = len(data) > 1 or data[0].rstrip("/").endswith(".json")
    source = data if len(data) > 1 else data[0]
    mixture = dict(allow_duplicates=allow_duplicates) if is_mixture else {}
    options = dict(storage_options=storage_options)
    probe = (
        MixtureDataset(source, shuffle=False, **mixture, **options)
        if is_mixture
        else PackedDataset(source, shuffle=False, **options)
    )
    fps = probe.meta.fps
    if fps is None:
        raise SystemExit(f"{data}: the mixture's datasets have different fps ({probe.fps}); train on one fps per run")
    delta = {ACTION_KEY: [i / fps for i in range(horizon)]}
    kind = MixtureDataset if is_mixture else PackedDataset
    return kind(source, delta_timestamps=delta, seed=seed, return_uint8=True, decode_device=decode_device, **mixture, **options)


def setup_distributed() -> tuple[int, int]:
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    rank, world_size = setup_distributed()
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        # As lerobot-train sets them: TF32 matmuls, cuDNN picks its convolution algorithms.
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        device = torch.device("cpu")
        # This process's ops share the cores with the loader's workers: more intra-op threads
        # than free cores makes OpenMP spin (10-40x slower ops).
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) - args.num_workers))
    torch.manual_seed(args.seed)
    decode_device = None
    if args.decode_device is not None:
        decode_device = str(device) if args.decode_device == "cuda" and device.type == "cuda" else args.decode_device
    try:
        dataset = open_dataset(
            args.data,
            horizon=args.horizon,
            seed=args.seed,
            decode_device=decode_device,
            allow_duplicates=args.allow_duplicates,
            storage_options=args.storage_options,
        )
    except LeRobotShardsError as err:  # a data or storage error says what and how to fix: no traceback
        raise SystemExit(f"[train] rank {rank}: {err}") from None
    features = dataset.meta.features  # a mixture's: harmonized (padded widths, every camera)
    cameras = [key for key, feature in features.items() if feature["dtype"] == "video"]
    sample_state = features[STATE_KEY]["shape"][0]
    action_dim = features[ACTION_KEY]["shape"][0]
    state_mean, state_std = normalizer(dataset.meta.stats, STATE_KEY, sample_state, device)
    action_mean, action_std = normalizer(dataset.meta.stats, ACTION_KEY, action_dim, device)

    if args.policy == "act":
        from act_sized import ActSizedPolicy

        camera = features[cameras[0]]  # LeRobot's video shape: (height, width, channels) by its names
        names, shape = list(camera.get("names") or ["height"]), camera["shape"]
        height, width = shape[:2] if names[0] == "height" else shape[1:3]
        policy = ActSizedPolicy(sample_state, len(cameras), action_dim, args.horizon, height, width).to(device)
    else:
        policy = TinyPolicy(sample_state, len(cameras), action_dim, args.horizon).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    state = None
    if args.ckpt.exists():
        # weights_only: a checkpoint is data; unpickling arbitrary objects would run code from it.
        state = torch.load(args.ckpt, weights_only=True, map_location="cpu")
        # The unwrapped policy's weights: the same checkpoint loads on any number of ranks
        # (DDP's own state_dict prefixes every key with "module.").
        policy.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    model = policy
    if world_size > 1:
        model = nn.parallel.DistributedDataParallel(policy, device_ids=[device.index] if device.type == "cuda" else None)

    # Whole uint8 batches built in the workers into reused shared memory; the loader counts
    # the samples this rank received this epoch (across resumes) for its state_dict.
    # With --decode-device, the workers ship compressed members and a DecodeStage decodes
    # ahead in a thread; the loader counts only the batches it has yielded, so its state is the
    # training loop's.
    stage = DecodeStage(decode_device) if decode_device is not None else None
    loader = BatchLoader(dataset, batch_size=args.batch_size, num_workers=args.num_workers, decode_stage=stage)
    step, epoch = 0, 0
    if state is not None:
        step = state["step"]
        loader.load_state_dict(state["data"])  # refuses a state of another dataset or configuration
        epoch = dataset.epoch
        if rank == 0:
            print(f"[train] resumed at step {step}, epoch {epoch}, samples_consumed {loader.samples_consumed}", flush=True)

    log = None
    if args.log_batches is not None:
        args.log_batches.parent.mkdir(parents=True, exist_ok=True)  # run/ may not exist before the first checkpoint
        log = args.log_batches.open("a")
    started, seen = time.perf_counter(), 0
    wait = WaitClock(device, skip=args.log_every)
    while step < args.steps:
        loader.set_epoch(epoch)  # a loaded state applies to its own epoch only
        for batch in wait.batches(loader):
            batch = to_device(batch, device)  # frames travel as uint8, become float32 in [0, 1] here
            state_in = (batch[STATE_KEY] - state_mean) / state_std  # normalized, as LeRobot's policies train
            target = (batch[ACTION_KEY] - action_mean) / action_std
            prediction = model(state_in, [batch[k] for k in cameras])
            weights = (~batch[f"{ACTION_KEY}_is_pad"]).unsqueeze(-1).float().expand_as(target)
            if f"{ACTION_KEY}_mask" in batch:  # a mixture's padded action dimensions do not count
                weights = weights * batch[f"{ACTION_KEY}_mask"].unsqueeze(1).float()
            loss = (((prediction - target) ** 2) * weights).sum() / weights.sum().clamp(min=1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            seen += len(state_in)
            if log is not None:
                log.write(
                    json.dumps(
                        {"rank": rank, "step": step, "epoch": epoch, "index": batch["index"].tolist(), "loss": loss.item()}
                    )
                    + "\n"
                )
                log.flush()
            wait.step_done()
            if rank == 0 and step % args.log_every == 0:
                rate = seen * world_size / (time.perf_counter() - started)
                print(f"[train] step {step} epoch {epoch} loss {loss.item():.4f} samples/s {rate:.1f}", flush=True)
            if step % args.ckpt_every == 0 or step == args.steps:
                save_checkpoint(args.ckpt, rank, policy, optimizer, step, loader.state_dict())
            if step >= args.steps or (args.stop_after is not None and step >= args.stop_after):
                break
        else:
            epoch += 1
            continue
        break
    if log is not None:
        log.close()
    print(f"[train] rank {rank} {wait.report()}", flush=True)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


class WaitClock:
    """How long a rank waits for data: the time inside the loader's ``next`` against the wall
    time of whole steps (the GPU synchronized at each step's end, so a step's time is its
    compute, not the time to queue it), after the first ``skip`` steps (start-up)."""

    def __init__(self, device: torch.device, *, skip: int):
        self.device, self.skip = device, skip
        self.steps, self.waited, self.total = 0, 0.0, 0.0
        self._step_start: float | None = None
        self._waited_now = 0.0

    def batches(self, loader):
        iterator = iter(loader)
        while True:
            before = time.perf_counter()
            if self._step_start is None:
                self._step_start = before
            try:
                batch = next(iterator)
            except StopIteration:
                return
            self._waited_now += time.perf_counter() - before
            yield batch

    def step_done(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        now = time.perf_counter()
        self.steps += 1
        if self.steps > self.skip and self._step_start is not None:
            self.waited += self._waited_now
            self.total += now - self._step_start
        self._step_start, self._waited_now = now, 0.0

    def report(self) -> str:
        measured = max(self.steps - self.skip, 0)
        if measured == 0 or self.total <= 0:
            return f"data wait: no steps measured (ran {self.steps}, skipping the first {self.skip})"
        share = 100 * self.waited / self.total
        return (
            f"data wait {share:.1f}% of step time over {measured} steps (this run's first {self.skip} skipped): "
            f"{self.waited / measured * 1000:.1f} ms of {self.total / measured * 1000:.1f} ms a step"
        )


def save_checkpoint(path: Path, rank: int, model, optimizer, step: int, data_state: dict) -> None:
    """Rank 0 writes atomically; the data state is identical on every rank by design. ``model``
    is the unwrapped policy, so the checkpoint resumes on any number of ranks."""
    if rank != 0:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step, "data": data_state}, tmp)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
