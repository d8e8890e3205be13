"""Opt-in (``make parity``): LeRobot's own trainer, ``lerobot-train`` (LeRobot 0.6.1), through
``lerobot-shards train`` (``lerobot_shards/train/lerobot_train.py``), on the CPU, small policies
(no downloaded weights). Runs in ``.venv-parity``. Each check is a real ``lerobot-train`` process.

In LeRobot's own order (``--shards.order=sampler``, the default: one replaced name), on a dataset
written by LeRobot's writer (6 episodes, 160 frames, 2 cameras) and its copy-mode pack, plain
``lerobot-train`` on the source and ``lerobot-shards train`` on the pack, same flags:

S1. ACT, 24 steps of batch 8 (past the epoch end at step 20): every logged loss equal, and the
    final ``model.safetensors`` byte for byte (same samples, same order: LeRobot's
    ``EpisodeAwareSampler``, its DataLoader, accelerate);
S2. diffusion (``drop_n_last_frames`` = 7 in LeRobot's sampler), 24 steps: the same;
S3. ``--resume=true`` of each S2 run from its step-12 checkpoint: the same again (resume is
    LeRobot's own, on both sides);
S4. ``accelerate launch --num_processes 2`` (gloo, CPU), ACT, one epoch (10 steps): every
    position built once over both ranks (``--shards.log_samples``), and the final weights equal
    plain ``lerobot-train``'s under the same launch;
S5. a 2-pack mixture of the shared ALOHA set, ACT: the loss falls, and what each step received is
    ``EpisodeAwareSampler`` over ``PackedLeRobotDataset(mixture)`` (LeRobot's own sampler, built here).

In our episode-pool order (``--shards.order=pool``), on the shared ALOHA set packed h264 at 96x128:

1. pack, episodes 0-3 (1,000 samples an epoch), 200 steps of batch 8 (past an epoch end at
   step 125), 1 worker: the loss falls (mean of the last 3 logged < mean of the first 3), and
   the samples each step received (``--shards.log_samples``) are exactly the reader's plan
   (a ``BatchLoader`` over the same ``PackedDataset``, epoch 0 then epoch 1);
2. ``--resume=true`` from run 1's step-100 checkpoint: steps 101-200 receive exactly run 1's
   steps 101-200 (across the epoch end);
3. a weighted-free 2-pack mixture (episodes 0-3 and 4-7 packed apart, ``mixture create``),
   200 steps: the loss falls; samples equal the reader's plan of the ``MixtureDataset``;
4. ``accelerate launch --multi_gpu --num_processes 2`` (two CPU processes, gloo) over
   episodes 0-1 (500 samples), steps = one epoch: every sample seen exactly once across ranks;
5. README's "Train with lerobot-train" commands, as written (``/tmp/`` moved under ``--out``),
   after its "Pack, verify, inspect" commands made the sample pack they train on;
6. a mixture of a 30 fps and a 15 fps dataset: without a choice the trainer stops with one line
   naming the rates and the flag; with that flag, as printed, it trains and every step receives
   the reader's plan of the ``MixtureDataset`` with the policy's steps as frames at each rate
   (``--only mixed-rates`` runs this check alone; ``--only sampler`` the S checks).

Exits non-zero naming the first check that fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset, create_mixture, pack_dataset
from lerobot_shards.testing import SampleSpec, write_sample_dataset

BATCH, WORKERS, CHUNK, SEED = 8, 1, 10, 1000  # SEED: lerobot-train's default --seed
POLICY = [
    "--policy.type=act",
    "--policy.device=cpu",
    "--policy.push_to_hub=false",
    "--policy.pretrained_backbone_weights=null",
    "--policy.dim_model=64",
    "--policy.n_heads=2",
    "--policy.dim_feedforward=128",
    "--policy.n_encoder_layers=1",
    "--policy.n_decoder_layers=1",
    f"--policy.chunk_size={CHUNK}",
    f"--policy.n_action_steps={CHUNK}",
    "--policy.use_vae=false",
    "--policy.optimizer_lr=1e-3",
    "--wandb.enable=false",
]


def _readme_block(readme: str, heading: str) -> str:
    """The first ```bash block after ``heading``, its continuation lines joined."""
    section = readme.split(heading, 1)[1]
    return section.split("```bash\n", 1)[1].split("```", 1)[0]


def _run(cmd: list[str], log: Path, cwd: Path | None = None) -> str:
    print("[parity-train] " + " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 2) // 2))}
    with log.open("w") as out:
        code = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd or log.parent).returncode
    text = log.read_text()
    if code != 0:
        print(text[-4000:])
        raise SystemExit(f"[parity-train] FAILED: exit {code} ({log})")
    return text


def _train(args: list[str], log: Path, *, order: str = "pool") -> str:
    return _run(
        [
            sys.executable,
            "-m",
            "lerobot_shards.train",
            *POLICY,
            f"--batch_size={BATCH}",
            f"--num_workers={WORKERS}",
            "--log_freq=10",
            f"--shards.order={order}",
            *args,
        ],
        log,
    )


def _losses(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"step:\S+ .*? loss:([0-9.]+)", text)]


def _check_falls(name: str, text: str) -> str:
    losses = _losses(text)
    if len(losses) < 6 or not all(math.isfinite(x) for x in losses):
        raise SystemExit(f"[parity-train] FAILED {name}: logged losses {losses}")
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    if not last < first:
        raise SystemExit(f"[parity-train] FAILED {name}: the loss did not fall ({losses})")
    return f"loss {first:.3f} -> {last:.3f}"


def _logged(path: Path) -> list[list]:
    """Per step, the (dataset_index, index) pairs (or indices) the trainer received."""
    steps = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        datasets = record.get("dataset_index") or [None] * len(record["index"])
        steps.append([[d, i] if d is not None else i for d, i in zip(datasets, record["index"])])
    return steps


def _plan(dataset, steps: int) -> list[list]:
    """The reader's own batches, epoch after epoch, as the trainer should receive them."""
    loader, out, epoch = BatchLoader(dataset, batch_size=BATCH, num_workers=WORKERS), [], 0
    while len(out) < steps:
        loader.set_epoch(epoch)
        for batch in loader:
            datasets = batch["dataset_index"].tolist() if "dataset_index" in batch else [None] * len(batch["index"])
            out.append([[d, i] if d is not None else i for d, i in zip(datasets, batch["index"].tolist())])
            if len(out) == steps:
                break
        epoch += 1
    return out


def _same(name: str, got: list, want: list) -> str:
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise SystemExit(
            f"[parity-train] FAILED {name}: step {first + 1} received {got[first] if first < len(got) else None}, "
            f"the plan says {want[first] if first < len(want) else None} ({len(got)} vs {len(want)} steps)"
        )
    return f"{len(got)} steps = the reader's plan"


def _mixed_rates(out: Path) -> str:
    """Check 6: a mixture of a 30 and a 15 fps dataset, refused, then trained as advised."""
    shutil.rmtree(out / "rates", ignore_errors=True)
    for stale in out.glob("rates-samples.jsonl*"):
        stale.unlink()
    rates = out / "rates-mixture"
    if not (rates / "mixture.json").exists():
        for name, fps in (("fast", 30), ("slow", 15)):
            write_sample_dataset(out / "rates-src" / name, SampleSpec(episodes=4, lengths=(30, 40, 35, 25), fps=fps))
            pack_dataset(str(out / "rates-src" / name), str(rates / name))
        create_mixture(str(rates), names={"fast": "fast", "slow": "slow"})
    rate_args = [f"--dataset.root={rates / 'mixture.json'}", "--steps=30", "--save_freq=30", "--output_dir=rates"]
    refused = subprocess.run(
        [sys.executable, "-m", "lerobot_shards.train", *POLICY, f"--batch_size={BATCH}", *rate_args],
        capture_output=True,
        text=True,
        cwd=out,
    )
    lines = refused.stderr.strip().splitlines()
    if refused.returncode == 0 or not lines or not lines[-1].startswith("Error: ") or "Traceback" in refused.stderr:
        raise SystemExit(
            f"[parity-train] FAILED mixed rates: not refused in one line ({refused.returncode}): {refused.stderr[-2000:]}"
        )
    advised = re.search(r"Add (--shards\.\S+=\S+) to", lines[-1])
    if "fast 30 fps, slow 15 fps" not in lines[-1] or advised is None:
        raise SystemExit(f"[parity-train] FAILED mixed rates: the refusal names no rates or flag: {lines[-1]}")
    shutil.rmtree(out / "rates", ignore_errors=True)
    text = _train([*rate_args, advised.group(1), "--shards.log_samples=rates-samples.jsonl"], out / "rates.log")
    frames = {"action": list(range(CHUNK))}
    want = _plan(MixtureDataset(str(rates / "mixture.json"), seed=SEED, return_uint8=True, delta_frames=frames), 30)
    losses = _losses(text)
    if len(losses) < 3 or not all(math.isfinite(x) for x in losses):
        raise SystemExit(f"[parity-train] FAILED mixed rates: logged losses {losses}")
    return f"refused naming the rates; with {advised.group(1)}: {_same('mixed rates', _logged(out / 'rates-samples.jsonl.rank0'), want)}"


# -- in LeRobot's own order (--shards.order=sampler) ----------------------------------------------
DIFFUSION = [
    "--policy.type=diffusion",
    "--policy.device=cpu",
    "--policy.push_to_hub=false",
    "--policy.pretrained_backbone_weights=null",
    "--policy.down_dims=[32,64]",
    "--policy.diffusion_step_embed_dim=32",
    "--policy.crop_shape=[80,112]",
    "--policy.num_train_timesteps=20",
    "--wandb.enable=false",
]


def write_train_source(root: Path) -> None:
    """A dataset written by LeRobot's writer: 6 episodes (160 frames: 10 steps of 2 x 8 per
    epoch), two 96x128 cameras, a state that drifts and an action that follows it."""
    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    from lerobot_shards.testing import identity_frame

    camera = {"dtype": "video", "shape": (96, 128, 3), "names": ["height", "width", "channels"]}
    features = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": None},
        "action": {"dtype": "float32", "shape": (6,), "names": None},
        "observation.images.top": camera,
        "observation.images.wrist": camera,
    }
    ds = LeRobotDataset.create("local/train-src", fps=30, features=features, root=root, use_videos=True)
    rng = np.random.default_rng(0)
    for episode, length in enumerate((30, 25, 40, 20, 35, 10)):
        state = rng.normal(size=6).astype(np.float32)
        for j in range(length):
            state = (state + 0.05 * rng.normal(size=6)).astype(np.float32)
            ds.add_frame(
                {
                    "observation.state": state,
                    "action": (state * 0.9).astype(np.float32),
                    "observation.images.top": identity_frame(episode, j, 96, 128),
                    "observation.images.wrist": identity_frame(episode + 7, j, 96, 128),
                    "task": "move",
                }
            )
        ds.save_episode()
    ds.finalize()


def _program(side: str, launch: list[str] | None = None) -> list[str]:
    """Plain ``lerobot-train`` (``plain``) or ``lerobot-shards train`` (``ours``), under
    ``accelerate launch`` when ``launch`` is given (both as ``-m`` modules then)."""
    module = "lerobot.scripts.lerobot_train" if side == "plain" else "lerobot_shards.train"
    if launch:
        return [*launch, "-m", module]
    return [str(Path(sys.executable).with_name("lerobot-train"))] if side == "plain" else [sys.executable, "-m", module]


def _pair(name: str, out: Path, argv_of, run_of) -> str:
    """Run ``argv_of(side)`` for plain lerobot-train and ours; every logged loss and the final
    weights of ``run_of(side)`` (an output folder) must be equal."""
    losses, weights = {}, {}
    for side in ("plain", "ours"):
        losses[side] = _losses(_run(argv_of(side), out / f"{name}-{side}.log"))
        weights[side] = (out / run_of(side) / "checkpoints" / "last" / "pretrained_model" / "model.safetensors").read_bytes()
    if not losses["ours"] or losses["ours"] != losses["plain"]:
        raise SystemExit(f"[parity-train] FAILED {name}: losses {losses['ours']} vs plain lerobot-train's {losses['plain']}")
    if weights["ours"] != weights["plain"]:
        raise SystemExit(f"[parity-train] FAILED {name}: the final weights differ from plain lerobot-train's")
    return f"{len(losses['ours'])} losses and the final weights equal plain lerobot-train's on the source"


def _sampler_checks(out: Path, aloha: Path) -> dict[str, str]:
    """S1-S4 (the module docstring)."""
    out.mkdir(parents=True, exist_ok=True)
    source, pack = out / "source", out / "pack"
    if not (source / "meta" / "info.json").exists():
        shutil.rmtree(source, ignore_errors=True)
        write_train_source(source)
    if not (pack / "manifest.json").exists():
        pack_dataset(str(source), str(pack))
    for stale in [*out.glob("*-plain"), *out.glob("*-ours"), *out.glob("*.jsonl*")]:
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    root = {"plain": [f"--dataset.repo_id=local/{source.name}", f"--dataset.root={source}"], "ours": [f"--dataset.root={pack}"]}
    common = [f"--batch_size={BATCH}", "--num_workers=1", "--log_freq=1"]
    results = {}

    def run(name: str, policy: list[str], steps: int, save: int, launch: list[str] | None = None):
        def argv(side: str) -> list[str]:
            log = [f"--shards.log_samples={name}-samples.jsonl"] if side == "ours" else []
            return [
                *_program(side, launch),
                *policy,
                *common,
                *root[side],
                f"--steps={steps}",
                f"--save_freq={save}",
                f"--output_dir={name}-{side}",
                *log,
            ]

        return _pair(name, out, argv, lambda side: f"{name}-{side}")

    results["sampler ACT"] = run("act", POLICY, 24, 24)
    results["sampler diffusion"] = run("diffusion", DIFFUSION, 24, 12)

    def resume(side: str) -> list[str]:
        config = out / f"diffusion-{side}" / "checkpoints" / "000012" / "pretrained_model" / "train_config.json"
        return [*_program(side), "--resume=true", f"--config_path={config}", f"--output_dir=diffusion-{side}"]

    results["sampler resume"] = _pair("resume", out, resume, lambda side: f"diffusion-{side}")
    accelerate = [
        str(Path(sys.executable).with_name("accelerate")),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
    ]
    results["sampler accelerate, 2 processes"] = run("ddp", POLICY, 10, 10, accelerate) + "; " + _once_per_epoch(out, 160, 10)
    return results


def _once_per_epoch(out: Path, frames: int, steps: int) -> str:
    """Each rank's first ``steps`` built batches (its epoch: a worker may build the next one's
    ahead) cover every position once."""
    seen = []
    for rank in (0, 1):
        lines = (out / f"ddp-samples.jsonl.rank{rank}.worker0").read_text().splitlines()[:steps]
        seen += [p for line in lines for p in json.loads(line)["positions"]]
    if sorted(seen) != list(range(frames)):
        raise SystemExit(f"[parity-train] FAILED accelerate: {len(seen)} positions built, {len(set(seen))} distinct of {frames}")
    return f"each of the {frames} positions built once over both ranks"


def _sampler_mixture(out: Path, mixture: Path) -> str:
    """S5: in LeRobot's order over a mixture, each step receives what LeRobot's own
    EpisodeAwareSampler gives over PackedLeRobotDataset(mixture)."""
    from lerobot.datasets.sampler import EpisodeAwareSampler

    from lerobot_shards import PackedLeRobotDataset

    shutil.rmtree(out / "mix-s", ignore_errors=True)
    for stale in out.glob("mix-s-samples.jsonl*"):
        stale.unlink()
    steps = 100
    text = _train(
        [
            f"--dataset.root={mixture / 'mixture.json'}",
            f"--steps={steps}",
            f"--save_freq={steps}",
            "--output_dir=mix-s",
            "--shards.log_samples=mix-s-samples.jsonl",
        ],
        out / "mix-s.log",
        order="sampler",
    )
    ds = PackedLeRobotDataset(str(mixture / "mixture.json"))
    order = list(
        EpisodeAwareSampler(ds.meta.episodes["dataset_from_index"], ds.meta.episodes["dataset_to_index"], shuffle=True, seed=SEED)
    )
    want = [order[k : k + BATCH] for k in range(0, steps * BATCH, BATCH)]
    lines = (out / "mix-s-samples.jsonl.rank0.worker0").read_text().splitlines()[:steps]
    got = [json.loads(line)["positions"] for line in lines]
    return f"{_check_falls('sampler mixture', text)}; {_same('sampler mixture', got, want)} (LeRobot's sampler)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=ROOT.parent / "shared" / "datasets" / "aloha_cube_4cam")
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out" / "parity-train")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--only", choices=("mixed-rates", "sampler"), help="run only these checks")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.only == "mixed-rates":
        print(f"[parity-train] ok mixed rates: {_mixed_rates(out)}")
        return 0
    results = _sampler_checks(out / "sampler", args.source)
    if args.only == "sampler":
        for name, line in results.items():
            print(f"[parity-train] ok {name}: {line}")
        return 0
    small = dict(video="h264", resize=(96, 128), workers=max(1, os.cpu_count() or 1))
    pack, mixture = out / "pack", out / "mixture"
    if not (pack / "manifest.json").exists():
        pack_dataset(str(args.source), str(pack), **small)
    if not (mixture / "mixture.json").exists():
        for name, episodes in (("first", [0, 1, 2, 3]), ("second", [4, 5, 6, 7])):
            pack_dataset(str(args.source), str(mixture / name), episodes=episodes, **small)
        create_mixture(str(mixture))
    delta = {"action": [i / 50 for i in range(CHUNK)]}  # ACT's action chunk at the set's 50 fps
    for run in ("run1", "run2", "mix", "ddp"):
        shutil.rmtree(out / run, ignore_errors=True)
        for stale in out.glob(f"{run}-samples.jsonl*"):
            stale.unlink()

    results["sampler mixture"] = _sampler_mixture(out, mixture)
    # 1. a pack, past an epoch end
    steps, half = args.steps, args.steps // 2
    episodes = "--dataset.episodes=[0,1,2,3]"
    text = _train(
        [
            f"--dataset.root={pack}",
            episodes,
            f"--steps={steps}",
            f"--save_freq={half}",
            "--output_dir=run1",
            "--shards.log_samples=run1-samples.jsonl",
        ],
        out / "run1.log",
    )
    got = _logged(out / "run1-samples.jsonl.rank0")
    want = _plan(PackedDataset(str(pack), episodes=[0, 1, 2, 3], seed=SEED, return_uint8=True, delta_timestamps=delta), steps)
    results["pack"] = f"{_check_falls('pack', text)}; {_same('pack', got, want)}"

    # 2. resume from LeRobot's checkpoint at step `half`
    config = out / "run1" / "checkpoints" / f"{half:06d}" / "pretrained_model" / "train_config.json"
    _train(["--resume=true", f"--config_path={config}", "--shards.log_samples=run2-samples.jsonl"], out / "run2.log")
    results["resume"] = _same("resume", _logged(out / "run2-samples.jsonl.rank0"), got[half:])

    # 3. a 2-pack mixture
    text = _train(
        [
            f"--dataset.root={mixture / 'mixture.json'}",
            f"--steps={steps}",
            f"--save_freq={steps}",
            "--output_dir=mix",
            "--shards.log_samples=mix-samples.jsonl",
        ],
        out / "mix.log",
    )
    want = _plan(MixtureDataset(str(mixture / "mixture.json"), seed=SEED, return_uint8=True, delta_timestamps=delta), steps)
    results["mixture"] = f"{_check_falls('mixture', text)}; {_same('mixture', _logged(out / 'mix-samples.jsonl.rank0'), want)}"

    # 4. two processes through accelerate: one epoch, every sample once
    samples = len(PackedDataset(str(pack), episodes=[0, 1]))
    epoch_steps = math.ceil(samples / 2 / BATCH)
    accelerate = Path(sys.executable).with_name("accelerate")
    _run(
        [
            str(accelerate),
            "launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "-m",
            "lerobot_shards.train",
            *POLICY,
            f"--batch_size={BATCH}",
            f"--num_workers={WORKERS}",
            "--shards.order=pool",
            f"--dataset.root={pack}",
            "--dataset.episodes=[0,1]",
            f"--steps={epoch_steps}",
            f"--save_freq={epoch_steps}",
            "--output_dir=ddp",
            "--shards.log_samples=ddp-samples.jsonl",
        ],
        out / "ddp.log",
    )
    seen = [i for rank in (0, 1) for step in _logged(out / f"ddp-samples.jsonl.rank{rank}") for i in step]
    expected = list(range(samples))  # episodes 0 and 1 are the pack's first 500 indices
    if sorted(seen) != expected:
        raise SystemExit(
            f"[parity-train] FAILED accelerate: {len(seen)} samples seen, {len(set(seen))} distinct, {samples} in the epoch"
        )
    results["accelerate, 2 processes"] = f"{samples} samples of the epoch each seen once over {epoch_steps} steps"
    # 6. a mixture of two rates: refused naming them, then trained as the refusal advises
    results["mixed rates"] = _mixed_rates(out)

    # 5. the README's commands as written
    readme = (ROOT / "README.md").read_text()
    train = _readme_block(readme, "### Train with lerobot-train")
    # The environment lines (a Python 3.12 venv, LeRobot, then this project with its extras) are
    # what scripts/parity_setup.sh ran to make this venv, word for word; the rest runs in it.
    setup = (ROOT / "scripts" / "parity_setup.sh").read_text()
    env_lines = [line for line in train.splitlines() if line.startswith(("python3.12 -m venv", "lerobot-env/bin/pip install"))]
    for line in env_lines:
        wanted = line.split("install", 1)[-1].split("#")[0].strip().replace("/path/to/lerobot-shards", ".")
        if line.startswith("lerobot-env/bin/pip") and wanted not in setup:
            raise SystemExit(f"[parity-train] FAILED README: {line!r} is not what parity_setup.sh installs ({wanted!r})")
    train = "\n".join(line for line in train.splitlines() if line not in env_lines)
    commands = [_readme_block(readme, "### Pack, verify, inspect"), train.replace("lerobot-env/bin/", "")]
    script = "set -euo pipefail\nexport PATH=" + str(Path(sys.executable).parent) + ":$PATH\n" + "\n".join(commands)
    shutil.rmtree(out / "readme", ignore_errors=True)
    (out / "readme").mkdir()
    started = time.perf_counter()
    text = _run(["bash", "-c", script.replace("/tmp/", f"{out}/readme/")], out / "readme.log", cwd=ROOT)
    took = time.perf_counter() - started  # the README states the ACT journey's time: this is the measure
    if not _losses(text):  # LeRobot logs every --log_freq steps (200 by default): the README's run must show one
        raise SystemExit("[parity-train] FAILED README: its train command logged no loss")
    results["README"] = (
        f"its commands ran as written ({len(_losses(text))} losses logged, last {_losses(text)[-1:]}; "
        f"{took / 60:.1f} minutes on {os.cpu_count()} cores, pack to last step)"
    )
    for name, line in results.items():
        print(f"[parity-train] ok {name}: {line}")
    (out / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
