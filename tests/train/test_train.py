"""The training example: a 2-process torchrun (gloo, CPU) run killed after N steps and resumed
sees exactly the batches the uninterrupted run saw, and its loss goes down."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.loopback import free_port
from tests.packed_fixtures import *

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train.py"


def _torchrun(packed: Path, ckpt: Path, log: Path, *extra: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1]), "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        "--data",
        str(packed),
        "--ckpt",
        str(ckpt),
        "--log-batches",
        str(log),
        "--batch-size",
        "8",
        "--num-workers",
        "1",
        "--steps",
        "24",
        "--ckpt-every",
        "5",
        "--lr",
        "0.05",
        *extra,
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def _batches(log: Path) -> dict[tuple[int, int], list[int]]:
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return {(r["rank"], r["step"]): r["index"] for r in rows}, rows


def test_killed_run_resumes_with_the_same_batches_and_learns(packed_copy, tmp_path):
    # Uninterrupted: 24 steps x 8 samples per rank cross several epochs of 70 samples per rank.
    _torchrun(packed_copy, tmp_path / "a.pt", tmp_path / "a.jsonl")
    # Interrupted after step 13 (last checkpoint at step 10), then resumed to the end.
    _torchrun(packed_copy, tmp_path / "b.pt", tmp_path / "b.jsonl", "--stop-after", "13")
    _torchrun(packed_copy, tmp_path / "b.pt", tmp_path / "b-resumed.jsonl")
    full, rows = _batches(tmp_path / "a.jsonl")
    resumed, _ = _batches(tmp_path / "b-resumed.jsonl")
    assert sorted(step for _, step in resumed) == sorted(list(range(11, 25)) * 2), "resume must restart after step 10"
    for key, indices in resumed.items():
        assert indices == full[key], f"rank {key[0]} step {key[1]} differs after resume"
    # Ranks never share a sample within an epoch.
    for step in range(1, 25):
        assert not set(full[(0, step)]) & set(full[(1, step)])
    losses = [r["loss"] for r in rows if r["rank"] == 0]
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4, f"loss did not go down: {losses}"


def test_the_example_trains_on_a_compiled_mixture_and_resumes(tmp_path):
    """Two datasets of different state and action widths: the harmonized meta sizes the
    policy, padded action dimensions do not count in the loss, and a resume continues."""
    from lerobot_shards import create_mixture, pack_dataset
    from lerobot_shards.testing import SampleSpec, write_sample_dataset

    for name, spec in {
        "arm": SampleSpec(episodes=3, lengths=(9, 7, 8)),
        "wide": SampleSpec(episodes=2, lengths=(6, 10), state_dim=8, action_dim=8, seed=4),
    }.items():
        write_sample_dataset(tmp_path / "src" / name, spec)
        pack_dataset(str(tmp_path / "src" / name), str(tmp_path / "mix" / name))
    create_mixture(str(tmp_path / "mix"))
    mixture = tmp_path / "mix" / "mixture.json"
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1]), "OMP_NUM_THREADS": "1"}

    def train(*extra: str) -> list[str]:
        command = [
            sys.executable,
            str(SCRIPT),
            "--data",
            str(mixture),
            "--ckpt",
            str(tmp_path / "m.pt"),
            "--batch-size",
            "4",
            "--num-workers",
            "1",
            "--steps",
            "8",
            "--ckpt-every",
            "2",
            "--log-every",
            "1",
            *extra,
        ]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout.splitlines()

    train("--stop-after", "3")
    resumed = train()
    steps = [line for line in resumed if line.startswith("[train] step ")]
    assert resumed[0].startswith("[train] resumed at step 2") and steps[-1].startswith("[train] step 8 ")
    # Every rank reports how much of its step time went to waiting for data.
    assert re.fullmatch(
        r"\[train\] rank 0 data wait \d+\.\d% of step time over 5 steps \(this run's first 1 skipped\): "
        r"\d+\.\d ms of \d+\.\d ms a step",
        resumed[-1],
    ), resumed[-1]


def test_one_checkpoint_resumes_on_1_then_2_then_1_ranks(packed_copy, tmp_path):
    """Issue 24 row 2: `--nproc_per_node=1 ... --stop-after`, then 2 ranks on the same --ckpt,
    then 1 again. Each resume loads the weights and continues the epoch exactly once."""

    def run(ranks: int, *extra: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1]), "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={ranks}",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            str(SCRIPT),
            "--data",
            str(packed_copy),
            "--ckpt",
            str(tmp_path / "c.pt"),
            "--log-batches",
            str(tmp_path / f"log-{ranks}-{len(extra)}.jsonl"),
            "--batch-size",
            "8",
            "--num-workers",
            "1",
            "--ckpt-every",
            "2",
            *extra,
        ]
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        return result

    run(1, "--steps", "12", "--stop-after", "4")
    second = run(2, "--steps", "12", "--stop-after", "8")
    assert "[train] resumed at step 4" in second.stdout, second.stdout
    third = run(1, "--steps", "12")
    assert "[train] resumed at step 8" in third.stdout, third.stdout
    rows = [json.loads(line) for p in sorted(tmp_path.glob("log-*.jsonl")) for line in p.read_text().splitlines()]
    assert max(r["step"] for r in rows) == 12
    # 12 steps of 8 (1 rank), 16 (2 ranks), 8 samples stay inside epoch 0 (141 samples): every
    # sample served at most once across the three shapes.
    served = [i for r in rows if r["epoch"] == 0 for i in r["index"]]
    assert len(served) == 4 * 8 + 4 * 16 + 4 * 8 and len(set(served)) == len(served)
