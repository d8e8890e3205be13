"""GPU decode (NVDEC) against the CPU path on the same machine, at the shape pretraining uses.

    python benchmarks/bench_gpu_decode.py --pack PACK_HEVC --cpu-pack PACK_AV1 --out results.json

``--pack``: packs made with ``--video hevc`` or ``h264`` (the first is the one measured for
speed); ``--cpu-pack``: the same source packed with ``--video copy`` (AV1, what users have
without re-encoding). Parts (``--parts``, all by default):

- ``env``: GPU, driver, torch/CUDA, PyNvVideoCodec and PyAV versions, libnvcuvid, NVDEC engines.
- ``exact``: every sample of every ``--pack``, single frames and 2-frame windows, through
  ``BatchLoader(PackedDataset(decode_device="cuda"), decode_stage=DecodeStage("cuda"))``
  against the CPU path (PyAV, bit-identical to torchcodec), matched by sample index:
  non-video values equal; frames bit-identical, or else each GPU frame's PSNR against the
  CPU frame and its neighbours within +-5 (>= 40 dB and closer to its own frame than to any
  other that differs from it).
- ``stage``: the stage alone on members held in memory (no loader): random frames of random
  members (batches of 64 samples x cameras; ``single`` one frame, ``chunk`` two consecutive
  frames per camera), ``--threads`` threads: frames/s, frames fed to NVDEC per frame (GOP
  lead-ins), NVDEC utilization (nvidia-smi, median), CPU cores.
- ``loader``: steady state on a **mixture**: ``--copies`` copies of each pack (each its own
  pack: its own files and member ids), one long epoch (longer than the window), ``--warmup``
  batches first (past every worker's prefetch: workers x 2 + the stage's lookahead), then
  ``--batches`` measured; every system with the same window, in one run. Systems: the GPU
  path (``BatchLoader`` with ``--gpu-workers`` workers shipping compressed members + the
  stage) on one pack (epochs back to back) and on the mixture, and the CPU path
  (``--cpu-workers`` workers decoding with PyAV) on the hevc mixture and the AV1 mixture.
  Per GPU row: distinct members per batch, members opened, cache hits and misses, frames fed,
  NVDEC utilization over the window; per row the CPU cores of the whole process tree.
- ``train``: ``scripts/train.py --policy act --decode-device cuda`` on the mixture (a policy of
  ACT's size): the share of step time the rank waits for data.

Runs where there is no GPU with ``--device cpu`` (the stage's CPU twin), small, to exercise
the script itself; numbers from such a run say nothing about NVDEC.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loader_measure import delta_for, measure_loader, tree_cpu_seconds
from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset
from lerobot_shards.reader.decode import ENCODED_KEY, DecodeStage

NEIGHBOURS = 5
BATCH = 64


def _log(*args) -> None:
    print(*args, flush=True)


# -- env ---------------------------------------------------------------------------------------


def env(device: str) -> dict:
    info: dict = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        import av

        info["pyav"] = av.__version__
    except ImportError:
        info["pyav"] = None
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError) as err:
            info["driver"] = f"unknown ({err})"
        try:
            ctypes.CDLL("libnvcuvid.so.1")
            info["libnvcuvid"] = "loads"
        except OSError as err:
            info["libnvcuvid"] = f"missing: {err}"
        from lerobot_shards.reader.decode.backends import nvdec_unavailable

        info["nvdec_unavailable"] = nvdec_unavailable()
        try:
            import PyNvVideoCodec as nvc

            info["pynvvideocodec"] = nvc.__version__
            try:
                chroma = next(getattr(nvc.cudaVideoChromaFormat, n) for n in dir(nvc.cudaVideoChromaFormat) if "420" in n)
                caps = nvc.GetDecoderCaps(gpuid=0, codec=nvc.cudaVideoCodec.HEVC, chromaformat=chroma, bitdepth=8)
                info["nvdec_engines"] = caps.get("num_decoder_engines")
            except Exception as err:
                info["nvdec_engines"] = f"unknown ({type(err).__name__}: {err})"
        except Exception as err:
            info["pynvvideocodec"] = f"import failed: {err}"
    return info


class DecoderUtilization:
    """nvidia-smi's decoder utilization, sampled every 0.5 s while running (no samples on a
    machine without nvidia-smi)."""

    def __init__(self):
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                text = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.decoder", "--format=csv,noheader,nounits"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                ).stdout.strip()
                self.samples.append(int(text.splitlines()[0]))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass

    def start(self) -> DecoderUtilization:
        self._thread.start()
        return self

    def stop(self) -> int | None:
        """The median sample, or None."""
        self._stop.set()
        self._thread.join(timeout=15)
        return sorted(self.samples)[len(self.samples) // 2] if self.samples else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# -- exact -------------------------------------------------------------------------------------


def _by_index(batches, cameras: list[str]) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for batch in batches:
        for row, index in enumerate(batch["index"].tolist()):
            out[index] = {key: value[row] for key, value in batch.items()}
    return out


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = (a.to(torch.float32) - b.to(torch.float32)).pow(2).mean().item()
    return float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(255.0**2 / mse)).item()


# The CPU rows decode with the fastest CPU decoder this machine has (issue 44): torchcodec where
# it imports (LeRobot's decoder), else PyAV; each row names the one used. They used PyAV always.
CPU_DECODER = "auto"


def _cpu_decoder_used() -> str:
    from lerobot_shards.reader.decode import CpuDecoders

    return CpuDecoders(CPU_DECODER).backend


CPU_DECODER_USED = _cpu_decoder_used()


def exact(pack: str, device: str, workers: int) -> dict:
    """GPU samples against CPU samples (module docstring)."""
    probe = PackedDataset(pack, shuffle=False, return_uint8=True)
    cameras, fps = list(probe.video_keys), probe.fps

    def cpu_samples(delta):
        dataset = PackedDataset(pack, shuffle=False, return_uint8=True, delta_timestamps=delta, decoder="pyav")
        return _by_index(BatchLoader(dataset, batch_size=BATCH, num_workers=workers, timeout=600), cameras)

    cpu_single = cpu_samples(None)
    members: dict[tuple[int, str], dict[int, torch.Tensor]] = {}
    for sample in cpu_single.values():
        for key in cameras:
            members.setdefault((int(sample["episode_index"]), key), {})[int(sample["frame_index"])] = sample[key].to(device)
    report: dict = {"pack": pack, "cameras": cameras, "modes": {}}
    for mode in ("single", "chunk"):
        delta = delta_for(mode, cameras, fps)
        stage = DecodeStage(device)
        dataset = PackedDataset(pack, shuffle=False, return_uint8=True, delta_timestamps=delta, decode_device=device)
        gpu = _by_index(BatchLoader(dataset, batch_size=BATCH, num_workers=2, timeout=600, decode_stage=stage), cameras)
        cpu = cpu_single if mode == "single" else cpu_samples(delta)
        if set(gpu) != set(cpu):
            raise AssertionError(f"{mode}: the GPU path gave {len(gpu)} samples, the CPU path {len(cpu)}")
        frames = bitexact = bad = 0
        worst_own, best_other = float("inf"), 0.0
        mismatched_values = []
        for index, expected in cpu.items():
            got = gpu[index]
            for key, value in expected.items():
                if key in cameras:
                    continue
                other = got[key]
                same = torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other
                if not same:
                    mismatched_values.append((index, key))
            for key in cameras:
                member = members[(int(expected["episode_index"]), key)]
                want, have = expected[key].to(device), got[key]
                if tuple(have.shape) != tuple(want.shape) or have.dtype != want.dtype:
                    raise AssertionError(
                        f"sample {index} {key}: GPU {tuple(have.shape)} {have.dtype}, CPU {tuple(want.shape)} {want.dtype}"
                    )
                pairs = [(want, have)] if want.dim() == 3 else list(zip(want, have))
                centre = int(expected["frame_index"])
                for cpu_frame, gpu_frame in pairs:
                    frames += 1
                    if torch.equal(gpu_frame, cpu_frame):
                        bitexact += 1
                        continue
                    own = _psnr(gpu_frame, cpu_frame)
                    nearby = [member[j] for j in range(centre - NEIGHBOURS - 1, centre + NEIGHBOURS + 2) if j in member]
                    closest = max((_psnr(gpu_frame, f) for f in nearby if not torch.equal(f, cpu_frame)), default=0.0)
                    worst_own, best_other = min(worst_own, own), max(best_other, closest)
                    if own < 40 or own <= closest:
                        bad += 1
        report["modes"][mode] = {
            "samples": len(cpu),
            "frames": frames,
            "bit_exact_frames": bitexact,
            "min_psnr_own_db_of_other_frames": None if worst_own == float("inf") else worst_own,
            "max_psnr_other_frame_db": best_other,
            "frames_failing": bad,
            "values_differing": len(mismatched_values),
            "stage": stage.stats(),
        }
        _log(f"[exact] {pack} {mode}: {report['modes'][mode]}")
        stage.close()
    return report


# -- stage alone -------------------------------------------------------------------------------


def _members(pack: str) -> dict[str, list]:
    """Every member of the pack as the workers ship it (with its bytes), per camera."""
    dataset = PackedDataset(pack, shuffle=False, return_uint8=True, decode_device="cpu")
    per_key: dict[str, dict] = {}
    for sample in dataset:
        for key, frames in sample[ENCODED_KEY].items():
            if frames.data is not None:  # an admission's first draw carries the bytes
                per_key.setdefault(key, {})[frames.member_id] = frames
    return {key: list(found.values()) for key, found in per_key.items()}


def _batch(members: dict[str, list], rng: random.Random, batch: int, window: int) -> dict:
    encoded = {}
    for key, choices in members.items():
        chosen: dict[str, int] = {}
        listed, refs = [], []
        for _ in range(batch):
            member = rng.choice(choices)
            if member.member_id not in chosen:
                chosen[member.member_id] = len(listed)
                listed.append(member)
            first = rng.randrange(0, member.frames - window + 1)
            refs.append((chosen[member.member_id], tuple(range(first, first + window))))
        encoded[key] = {"members": listed, "refs": refs}
    return {"index": torch.arange(batch), ENCODED_KEY: encoded}


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def stage_speed(pack: str, device: str, threads_list: list[int], seconds: float, options: dict) -> list[dict]:
    members = _members(pack)
    members = {key: [replace(m, indices=(0,), squeeze=False, as_float=False) for m in found] for key, found in members.items()}
    rows = []
    for mode, window in (("single", 1), ("chunk", 2)):
        for threads in threads_list:
            stage = DecodeStage(device, threads=threads, cache_size=1024, backend_options=options)
            rng = random.Random(threads)
            for _ in range(3):  # warm up: sessions created, members checked
                stage(_batch(members, rng, BATCH, window))
            _sync(device)
            before, frames, count = stage.stats(), 0, 0
            with DecoderUtilization() as utilization:
                cpu0, started = tree_cpu_seconds(), time.perf_counter()
                while time.perf_counter() - started < seconds:
                    out = stage(_batch(members, rng, BATCH, window))
                    frames += sum(out[key].shape[0] * window for key in members)
                    count += 1
                _sync(device)
                elapsed, cpu = time.perf_counter() - started, tree_cpu_seconds() - cpu0
            after = stage.stats()
            row = {
                "mode": mode,
                "threads": threads,
                "batches": count,
                "frames_per_s": frames / elapsed,
                "fed_per_frame": (after.get("frames_fed", 0) - before.get("frames_fed", 0)) / max(frames, 1),
                "decoder_utilization_pct": utilization.stop(),
                "cpu_cores": cpu / elapsed,
                "inexact_colour_members": after.get("inexact_colour_members"),
            }
            rows.append(row)
            _log(f"[stage] {row}")
            stage.close()
    return rows


def colour_probe(pack: str, device: str) -> dict:
    """One batch through the exact-colour path, against the CPU decoders: whether NVDEC's NV12
    frames arrive as expected here (a DLPack shape the driver copy can take)."""
    members = _members(pack)
    members = {key: [replace(m, indices=(0,), squeeze=False, as_float=False) for m in found] for key, found in members.items()}
    batch = _batch(members, random.Random(0), 16, 1)
    try:
        gpu = DecodeStage(device, backend_options={"colour": "exact"})(dict(batch, **{ENCODED_KEY: dict(batch[ENCODED_KEY])}))
        cpu = DecodeStage("cpu", backend="pyav")(batch)
        same = {key: bool(torch.equal(gpu[key].cpu(), cpu[key])) for key in members}
        report = {"bit_identical": same}
    except Exception as err:
        report = {"error": f"{type(err).__name__}: {err}"}
    _log(f"[probe] {report}")
    return report


# -- end to end --------------------------------------------------------------------------------


def copies(pack: str, count: int, work: Path) -> list[str]:
    """``count`` copies of a pack under ``work`` (each its own files: its own member ids)."""
    made = []
    for k in range(count):
        target = work / f"{Path(pack).name}-{k}"
        if not (target / "manifest.json").exists():
            shutil.copytree(pack, target, dirs_exist_ok=True)
        made.append(str(target))
    return made


class _Window:
    """Wraps a GPU loader's iterator: snapshots the stage's counters and samples NVDEC's
    utilization over the batches after the warm-up, as ``measure_loader`` times them."""

    def __init__(self, make, stage: DecodeStage, warmup: int):
        self.make, self.stage, self.warmup = make, stage, warmup
        self.before = self.after = None
        self.utilization: DecoderUtilization | None = None

    def __call__(self):
        def run():
            for count, batch in enumerate(self.make(), start=1):
                yield batch
                if count == self.warmup:
                    self.before, self.utilization = self.stage.stats(), DecoderUtilization().start()
            self.finish()

        return run()

    def finish(self) -> None:
        if self.utilization is not None and self.after is None:
            self.after = self.stage.stats()
            self.median = self.utilization.stop()

    def report(self) -> dict:
        self.finish()
        if self.before is None or self.after is None:
            return {}
        delta = {k: self.after[k] - self.before.get(k, 0) for k in self.after if isinstance(self.after[k], (int, float))}
        batches = max(delta.get("batches", 0), 1)
        return {
            "distinct_members_per_batch": delta.get("members_in_batches", 0) / batches,
            "members_opened": delta.get("members_opened"),
            "cache_hits": delta.get("decoder_hits"),
            "cache_misses": delta.get("decoder_misses"),
            "max_members_held": self.after.get("max_members_held"),
            "fed_per_frame": delta.get("frames_fed", 0) / max(delta.get("frames_decoded", 0), 1),
            "stage_seconds_per_batch": delta.get("decode_seconds", 0.0) / batches,
            "decoder_utilization_pct": self.median,
            "inexact_colour_members": self.after.get("inexact_colour_members"),
        }


def loader_speed(args, device: str, rows: list | None = None, save=lambda: None) -> list[dict]:
    """Every loader system's steady state (module docstring); each row is appended to ``rows``
    and ``save`` called as it is measured, so a run cut short keeps what it measured."""
    hevc = args.pack[0]
    probe = PackedDataset(hevc, shuffle=False, return_uint8=True)
    cameras, fps = list(probe.video_keys), probe.fps
    work = args.work
    hevc_mix = copies(hevc, args.copies, work)
    av1_mix = copies(args.cpu_pack, args.copies, work) if args.cpu_pack else None
    total = args.warmup + args.batches
    if len(probe) * args.copies < total * BATCH * 1.1:
        _log(
            f"[loader] warning: the mixture's epoch ({len(probe) * args.copies} samples) is not longer than the window "
            f"({total * BATCH}); use more --copies"
        )
    rows = [] if rows is None else rows

    def gpu(mode: str, roots: list[str] | str, workers: int, epochs: int):
        delta = delta_for(mode, cameras, fps)
        stage = DecodeStage(device, backend_options=args.options)

        def make():
            dataset = (
                PackedDataset(roots, seed=0, return_uint8=True, delta_timestamps=delta, decode_device=device)
                if isinstance(roots, str)
                else MixtureDataset(
                    roots, seed=0, return_uint8=True, delta_timestamps=delta, decode_device=device, allow_duplicates=True
                )
            )
            for epoch in range(epochs):  # one pack: epochs back to back (one is shorter than the window)
                dataset.set_epoch(epoch)
                yield from BatchLoader(dataset, batch_size=BATCH, num_workers=workers, timeout=600, decode_stage=stage)

        return make, stage

    def cpu(mode: str, roots: list[str], workers: int):
        delta = delta_for(mode, cameras, fps)

        def make():
            dataset = MixtureDataset(
                roots, seed=0, return_uint8=True, delta_timestamps=delta, decoder=CPU_DECODER, allow_duplicates=True
            )
            return BatchLoader(dataset, batch_size=BATCH, num_workers=workers, timeout=600)

        return make

    one_pack_epochs = -(-total * BATCH // len(probe)) + 1
    systems = []
    for mode in args.modes:
        systems.append((mode, "gpu-one-pack", args.gpu_workers, lambda m=mode: gpu(m, hevc, args.gpu_workers, one_pack_epochs)))
        for workers in args.gpu_workers_mixture if mode == "single" else args.gpu_workers_mixture[:1]:
            systems.append((mode, "gpu-mixture", workers, lambda m=mode, w=workers: gpu(m, hevc_mix, w, 1)))
        systems.append((mode, "cpu-hevc-mixture", args.cpu_workers, lambda m=mode: (cpu(m, hevc_mix, args.cpu_workers), None)))
        if av1_mix is not None:
            systems.append((mode, "cpu-av1-mixture", args.cpu_workers, lambda m=mode: (cpu(m, av1_mix, args.cpu_workers), None)))
    for mode, system, workers, build in systems:
        if (args.systems and system not in args.systems) or (mode != "single" and system not in args.chunk_systems):
            continue
        make, stage = build()
        window = _Window(make, stage, args.warmup) if stage is not None else None
        try:
            row = {
                "mode": mode,
                "system": system,
                "workers": workers,
                # Every row names what decoded its frames (issue 44): the best CPU decoder here, or the GPU's.
                "decoder": CPU_DECODER_USED if system.startswith("cpu") else "nvdec",
                **measure_loader(window or make, warmup=args.warmup, max_batches=total),
            }
        except Exception as err:
            row = {"mode": mode, "system": system, "workers": workers, "error": f"{type(err).__name__}: {err}"}
        if window is not None:
            row.update(window.report())
            stage.close()
        rows.append(row)
        save()
        _log(f"[loader] {row}")
    for mode in args.modes:
        by = {
            r["system"] + (f"-{r['workers']}" if r["system"] == "gpu-mixture" else ""): r.get("samples_per_s")
            for r in rows
            if r["mode"] == mode
        }
        _log(f"[loader] {mode}: {by}")
    return rows


# -- training ----------------------------------------------------------------------------------


def train_wait(args, device: str) -> dict:
    """``scripts/train.py --policy act --decode-device`` on the hevc mixture: its data-wait line."""
    roots = copies(args.pack[0], args.copies, args.work)
    ckpt = args.work / "train-ckpt.pt"
    ckpt.unlink(missing_ok=True)
    command = [
        sys.executable,
        str(ROOT / "scripts" / "train.py"),
        "--data",
        *roots,
        "--allow-duplicates",
        "--decode-device",
        device,
        "--policy",
        "act",
        "--batch-size",
        str(args.train_batch),
        "--num-workers",
        str(args.gpu_workers),
        "--steps",
        str(args.train_steps),
        "--log-every",
        "10",
        "--ckpt",
        str(ckpt),
        "--ckpt-every",
        str(10**9),
        "--horizon",
        "100",
    ]
    started = time.perf_counter()
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=args.train_timeout,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])},
    )
    out = result.stdout + result.stderr
    found = re.search(r"rank 0 data wait ([\d.]+)% of step time over (\d+) steps .*?: ([\d.]+) ms of ([\d.]+) ms a step", out)
    rates = re.findall(r"samples/s ([\d.]+)", out)
    report = {
        "command": " ".join(command[1:]),
        "returncode": result.returncode,
        "seconds": time.perf_counter() - started,
        "batch_size": args.train_batch,
        "samples_per_s_last": float(rates[-1]) if rates else None,
    }
    if found:
        report.update(
            data_wait_pct=float(found[1]), steps_measured=int(found[2]), wait_ms=float(found[3]), step_ms=float(found[4])
        )
    else:
        report["tail"] = out[-3000:]
    _log(f"[train] {report}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", action="append", required=True, help="a pack made with --video hevc or h264 (repeatable)")
    parser.add_argument("--cpu-pack", default=None, help="the same source packed with --video copy (AV1)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parts", default="env,exact,stage,loader,train")
    parser.add_argument("--threads", default="4,8,16")
    parser.add_argument("--stage-seconds", type=float, default=4.0)
    parser.add_argument("--colour", default="exact", choices=("exact", "nvdec"), help="the nvdec backend's colour option")
    parser.add_argument("--gpu-workers", type=int, default=2)
    parser.add_argument("--gpu-workers-mixture", default="2,4", help="worker counts of the GPU path on the mixture")
    parser.add_argument("--cpu-workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--exact-workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--copies", type=int, default=8, help="copies of each pack in the mixture")
    parser.add_argument("--warmup", type=int, default=35, help="batches before the window (past workers x prefetch)")
    parser.add_argument("--batches", type=int, default=70, help="batches measured")
    parser.add_argument("--modes", default="single,chunk")
    parser.add_argument("--systems", default="", help="only these loader systems (comma-separated)")
    parser.add_argument(
        "--chunk-systems",
        default="gpu-mixture,cpu-hevc-mixture,cpu-av1-mixture",
        help="the loader systems also measured with windows (chunk mode)",
    )
    parser.add_argument("--train-steps", type=int, default=60)
    parser.add_argument("--train-batch", type=int, default=32)
    parser.add_argument("--train-timeout", type=float, default=240)
    parser.add_argument("--work", type=Path, default=Path("/tmp/lerobot-shards-gpu-bench"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.modes = args.modes.split(",")
    args.systems = [s for s in args.systems.split(",") if s]
    args.chunk_systems = [s for s in args.chunk_systems.split(",") if s]
    args.gpu_workers_mixture = [int(w) for w in args.gpu_workers_mixture.split(",") if w]
    args.options = {"colour": args.colour} if args.device.startswith("cuda") else None
    args.work.mkdir(parents=True, exist_ok=True)
    parts = set(args.parts.split(","))
    results: dict = {"command": " ".join(sys.argv), "device": args.device, "started": time.strftime("%Y-%m-%d %H:%M:%S")}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, default=str))

    if "env" in parts:
        results["env"] = env(args.device)
        _log(f"[env] {results['env']}")
    if args.device.startswith("cuda") and args.colour == "exact":
        results["colour_probe"] = colour_probe(args.pack[0], args.device)
        if results["colour_probe"].get("error"):
            args.options = {"colour": "nvdec"}  # measure the rest with NVDEC's RGB rather than nothing
            _log(f"[probe] exact colour failed, measuring with colour='nvdec': {results['colour_probe']}")
    for part, run in (
        ("exact", lambda: [exact(pack, args.device, args.exact_workers) for pack in args.pack]),
        (
            "stage",
            lambda: stage_speed(
                args.pack[0], args.device, [int(t) for t in args.threads.split(",")], args.stage_seconds, args.options
            ),
        ),
        ("loader", lambda: loader_speed(args, args.device, results.setdefault("loader", []), save)),
        ("train", lambda: train_wait(args, args.device)),
    ):
        if part in parts:
            started = time.perf_counter()
            try:
                results[part] = run()
            except Exception as err:
                results[part] = {"error": f"{type(err).__name__}: {err}"}
                _log(f"[{part}] failed: {results[part]['error']}")
            results[f"{part}_seconds"] = time.perf_counter() - started
            save()
    save()
    failing = [
        m
        for r in results.get("exact", [])
        if isinstance(r, dict)
        for m in r.get("modes", {}).values()
        if m["frames_failing"] or m["values_differing"]
    ]
    return 1 if failing or any(isinstance(results.get(p), dict) and "error" in results[p] for p in parts) else 0


if __name__ == "__main__":
    sys.exit(main())
