"""GPU decode (NVDEC) against the CPU path on the same machine: exactness, then speed.

    python benchmarks/bench_gpu_decode.py --pack PACK_HEVC [--pack PACK_H264 ...] --out results.json

Each ``--pack`` is a pack made with ``--video hevc`` or ``--video h264``. Parts (``--parts``):

- ``env``: GPU, driver, torch/CUDA, PyNvVideoCodec and PyAV versions, libnvcuvid, NVDEC engines.
- ``exact``: every sample of every pack, single frames and 2-frame windows, decoded by
  ``PackedDataset(decode_device="cuda")`` + ``DecodeStage("cuda")`` and by the CPU path
  (``decoder="pyav"``, bit-identical to torchcodec), matched by sample index: non-video
  values equal; each GPU frame's PSNR against the CPU frame, and against the member's other
  frames within +-5 (every frame must be >= 40 dB and closer to its own frame than to any
  frame that differs from it).
- ``stage``: the stage alone on members held in memory (no loader): random frames (batches of
  64 samples x cameras; ``single`` one frame, ``chunk`` two consecutive frames per camera)
  at 1..16 threads: frames/s, frames fed to NVDEC (GOP lead-ins), NVDEC utilization
  (nvidia-smi, sampled), CPU cores.
- ``loader``: samples/s end to end for ``single`` and ``chunk`` (50 actions + 2 frames per
  camera): GPU path (``BatchLoader`` with ``--gpu-workers`` workers shipping compressed
  members + the stage) vs CPU path (``BatchLoader`` with ``--cpu-workers`` workers decoding
  with PyAV), batch 64, CPU cores of the whole process tree.

Runs where there is no GPU with ``--device cpu`` (the stage's CPU twin) so the script itself
is exercised in CI-like conditions; numbers from such a run say nothing about NVDEC.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.loader_measure import delta_for, measure_loader, tree_cpu_seconds  # noqa: E402
from reader import BatchLoader, PackedDataset  # noqa: E402
from reader.decode.stage import ENCODED_KEY, DecodeStage, collate  # noqa: E402

NEIGHBOURS = 5


def _log(*args) -> None:
    print(*args, flush=True)


# -- env ---------------------------------------------------------------------------------------

def env(device: str) -> dict:
    info: dict = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "cpus": os.cpu_count(), "machine": platform.machine()}
    try:
        import av

        info["pyav"] = av.__version__
    except ImportError:
        info["pyav"] = None
    if device.startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name(0)
        try:
            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError) as err:
            info["driver"] = f"unknown ({err})"
        try:
            ctypes.CDLL("libnvcuvid.so.1")
            info["libnvcuvid"] = "loads"
        except OSError as err:
            info["libnvcuvid"] = f"missing: {err}"
        from reader.decode.nvdec import nvdec_unavailable

        info["nvdec_unavailable"] = nvdec_unavailable()
        try:
            import PyNvVideoCodec as nvc

            info["pynvvideocodec"] = nvc.__version__
            try:
                caps = nvc.GetDecoderCaps(gpuid=0, codec=nvc.cudaVideoCodec.HEVC, chromaformat=nvc.cudaVideoChromaFormat._420, bitdepth=8)
                info["nvdec_engines"] = caps.get("num_decoder_engines")
            except Exception as err:  # noqa: BLE001 - a probe: report, do not stop
                info["nvdec_engines"] = f"unknown ({type(err).__name__}: {err})"
        except Exception as err:  # noqa: BLE001
            info["pynvvideocodec"] = f"import failed: {err}"
    return info


# -- exact -------------------------------------------------------------------------------------

def _samples(dataset, loader_workers: int, stage: DecodeStage | None, cameras: list[str]) -> dict[int, dict]:
    """Every sample of ``dataset`` by index: frames (uint8, on the stage's device or CPU) and values."""
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, num_workers=loader_workers, timeout=600,
                                         collate_fn=collate if stage is not None else None)
    out: dict[int, dict] = {}
    for batch in loader:
        if stage is not None:
            batch = stage(batch)
        for row, index in enumerate(batch["index"].tolist()):
            out[index] = {key: (value[row] if isinstance(value, torch.Tensor) else value[row]) for key, value in batch.items()}
    return out


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = (a.to(torch.float32) - b.to(torch.float32)).pow(2).mean().item()
    return float("inf") if mse == 0 else 10 * torch.log10(torch.tensor(255.0**2 / mse)).item()


def exact(pack: str, device: str, workers: int) -> dict:
    """GPU samples against CPU samples (module docstring)."""
    probe = PackedDataset(pack, shuffle=False, return_uint8=True)
    cameras, fps = list(probe.video_keys), probe.fps
    # Every frame of every member, decoded on the CPU: the single-frame samples in order.
    cpu_single = _samples(PackedDataset(pack, shuffle=False, return_uint8=True, decoder="pyav"), workers, None, cameras)
    members: dict[tuple[int, str], dict[int, torch.Tensor]] = {}
    for sample in cpu_single.values():
        for key in cameras:
            members.setdefault((int(sample["episode_index"]), key), {})[int(sample["frame_index"])] = sample[key].to(device)
    report: dict = {"pack": pack, "cameras": cameras, "modes": {}}
    for mode in ("single", "chunk"):
        delta = delta_for(mode, cameras, fps)
        stage = DecodeStage(device)
        gpu = _samples(PackedDataset(pack, shuffle=False, return_uint8=True, delta_timestamps=delta, decode_device=device),
                       2, stage, cameras)
        cpu = cpu_single if mode == "single" else _samples(
            PackedDataset(pack, shuffle=False, return_uint8=True, delta_timestamps=delta, decoder="pyav"), workers, None, cameras)
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
                want = expected[key].to(device)
                have = got[key]
                if tuple(have.shape) != tuple(want.shape) or have.dtype != want.dtype:
                    raise AssertionError(f"sample {index} {key}: GPU {tuple(have.shape)} {have.dtype}, CPU {tuple(want.shape)} {want.dtype}")
                pairs = [(want, have)] if want.dim() == 3 else list(zip(want, have))
                centre = int(expected["frame_index"])
                for cpu_frame, gpu_frame in pairs:
                    frames += 1
                    own = _psnr(gpu_frame, cpu_frame)
                    bitexact += own == float("inf")
                    nearby = [member[j] for j in range(centre - NEIGHBOURS - 1, centre + NEIGHBOURS + 2) if j in member]
                    others = [_psnr(gpu_frame, f) for f in nearby if not torch.equal(f, cpu_frame)]
                    closest = max(others, default=0.0)
                    worst_own, best_other = min(worst_own, own), max(best_other, closest)
                    if own < 40 or own <= closest:
                        bad += 1
        report["modes"][mode] = {
            "samples": len(cpu), "frames": frames, "bit_exact_frames": bitexact, "min_psnr_own_db": worst_own,
            "max_psnr_other_frame_db": best_other, "frames_failing": bad, "values_differing": len(mismatched_values),
            "stage": stage.stats(),
        }
        _log(f"[exact] {pack} {mode}: {report['modes'][mode]}")
        stage.close()
    return report


# -- stage alone -------------------------------------------------------------------------------

class _DecoderUtilization:
    """nvidia-smi's decoder utilization, sampled every 0.5 s while running."""

    def __init__(self):
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                text = subprocess.run(["nvidia-smi", "--query-gpu=utilization.decoder", "--format=csv,noheader,nounits"],
                                      capture_output=True, text=True, timeout=10).stdout.strip()
                self.samples.append(int(text.splitlines()[0]))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=15)


def _members(pack: str) -> dict[str, list]:
    """Every member of the pack as the workers ship it, per camera."""
    dataset = PackedDataset(pack, shuffle=False, return_uint8=True, decode_device="cpu")
    per_key: dict[str, dict] = {}
    for sample in dataset:
        for key, frames in sample[ENCODED_KEY].items():
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


def stage_speed(pack: str, device: str, threads_list: list[int], seconds: float) -> list[dict]:
    members = _members(pack)
    from dataclasses import replace

    members = {key: [replace(m, indices=(0,), squeeze=False, as_float=False) for m in found] for key, found in members.items()}
    rows = []
    for mode, window in (("single", 1), ("chunk", 2)):
        for threads in threads_list:
            stage = DecodeStage(device, threads=threads)
            rng = random.Random(threads)
            for _ in range(3):  # warm up: sessions created, members checked
                stage(_batch(members, rng, 64, window))
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            before, frames, count = stage.stats(), 0, 0
            with _DecoderUtilization() as utilization:
                cpu0, started = tree_cpu_seconds(), time.perf_counter()
                while time.perf_counter() - started < seconds:
                    out = stage(_batch(members, rng, 64, window))
                    frames += sum(out[key].shape[0] * window for key in members)
                    count += 1
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                elapsed, cpu = time.perf_counter() - started, tree_cpu_seconds() - cpu0
            after = stage.stats()
            row = {"mode": mode, "threads": threads, "batches": count, "frames_per_s": frames / elapsed,
                   "fed_per_frame": (after["frames_fed"] - before["frames_fed"]) / max(frames, 1),
                   "decoder_utilization_pct": sorted(utilization.samples)[len(utilization.samples) // 2] if utilization.samples else None,
                   "cpu_cores": cpu / elapsed}
            rows.append(row)
            _log(f"[stage] {row}")
            stage.close()
    return rows


# -- end to end --------------------------------------------------------------------------------

def loader_speed(pack: str, device: str, gpu_workers: int, cpu_workers: int, warmup: int, batches: int) -> list[dict]:
    probe = PackedDataset(pack, shuffle=False, return_uint8=True)
    epochs_count = -(-(warmup + batches) * 64 // len(probe)) + 1
    cameras, fps = list(probe.video_keys), probe.fps
    rows = []
    for mode in ("single", "chunk"):
        delta = delta_for(mode, cameras, fps)

        def epochs(make_one):
            # Several epochs back to back: one epoch of a small pack is too short to measure.
            for epoch in range(epochs_count):
                yield from make_one(epoch)

        def gpu_loader():
            dataset = PackedDataset(pack, seed=0, return_uint8=True, delta_timestamps=delta, decode_device=device)

            def one(epoch):
                dataset.set_epoch(epoch)
                return BatchLoader(dataset, batch_size=64, num_workers=gpu_workers, timeout=600)
            return DecodeStage(device).wrap(epochs(one), ahead=2)

        def cpu_loader():
            dataset = PackedDataset(pack, seed=0, return_uint8=True, delta_timestamps=delta, decoder="pyav")

            def one(epoch):
                dataset.set_epoch(epoch)
                return BatchLoader(dataset, batch_size=64, num_workers=cpu_workers, timeout=600)
            return epochs(one)

        for system, make, workers in (("gpu-stage", gpu_loader, gpu_workers), ("cpu-workers", cpu_loader, cpu_workers)):
            row = {"mode": mode, "system": system, "workers": workers,
                   **measure_loader(make, warmup=warmup, max_batches=warmup + batches)}
            rows.append(row)
            _log(f"[loader] {row}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pack", action="append", required=True, help="a pack made with --video hevc or h264 (repeatable)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--parts", default="env,exact,stage,loader")
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--stage-seconds", type=float, default=6.0)
    parser.add_argument("--gpu-workers", type=int, default=2)
    parser.add_argument("--cpu-workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--exact-workers", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    results: dict = {"command": " ".join(sys.argv), "device": args.device}
    if "env" in parts:
        results["env"] = env(args.device)
        _log(f"[env] {results['env']}")
    if "exact" in parts:
        results["exact"] = [exact(pack, args.device, args.exact_workers) for pack in args.pack]
    if "stage" in parts:
        results["stage"] = stage_speed(args.pack[0], args.device, [int(t) for t in args.threads.split(",")], args.stage_seconds)
    if "loader" in parts:
        results["loader"] = loader_speed(args.pack[0], args.device, args.gpu_workers, args.cpu_workers, args.warmup, args.batches)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str))
    failing = [m for r in results.get("exact", []) for m in r["modes"].values() if m["frames_failing"] or m["values_differing"]]
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
