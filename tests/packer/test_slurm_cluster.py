"""The project's SLURM scripts, unchanged, on a real single-node SLURM cluster (issue 22).

A throwaway cluster (tests/slurm_cluster.py: Debian's slurm-wlm and munge, as root) runs
``slurm/submit_mixture.sh`` over 21 sources (one broken) and ``slurm/submit_pack.sh`` over one
dataset in parts, then the failure paths a cluster user meets: a task cancelled mid-shard
with ``scancel``, another killed with SIGKILL of its process group (a node-style crash), the
finalize job left waiting on a dependency that can no longer be satisfied, re-submission
(resumes from receipts; byte-identical to an uninterrupted pack), and re-submitting a
finished array (does nothing and says so). Skipped, with the reason, where a cluster cannot
run (not root, packages missing); CI is root and ``make test``'s set-up installs them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from lerobot_shards import pack_dataset, verify
from lerobot_shards.core.storage import Storage
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.fault_proxy import faulty_s3  # noqa: F401 (fixture)
from tests.packed_fixtures import assert_same_tree
from tests.s3_server import DUMMY_ENV, s3_bucket, s3_server  # noqa: F401 (fixtures)
from tests.shared_data import shared_dataset
from tests.slurm_cluster import SlurmCluster, skip_reason

ROOT = Path(__file__).resolve().parents[2]
REASON = skip_reason()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]
# One CPU and a little memory per task, so the 2-CPU test node runs two tasks at once.
SBATCH_ARGS = "--cpus-per-task=1 --mem=1500M"
PACK_ARGS = ["--video", "h264", "--shard-size-mb", "0.05"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()


def _submit(cluster: SlurmCluster, script: str, args: list[str], cwd: Path, env: dict | None = None) -> tuple[list[str], str]:
    """Run a submit script; returns (array job ids, final job id) from what it prints."""
    result = cluster.run(
        ["bash", str(ROOT / "slurm" / script), *args],
        cwd=cwd,
        env={"SBATCH_ARGS": SBATCH_ARGS, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    arrays = re.findall(r"(?:array \S+: job|pack array: job) (\d+)", result.stdout)
    final = re.search(r"(?:mixture create|finalize): job (\d+)", result.stdout)
    assert arrays and final, result.stdout + result.stderr
    return arrays, final.group(1)


def _log(cwd: Path, pattern: str) -> str:
    return "\n".join(p.read_text() for p in sorted((cwd / "logs").glob(pattern)))


def test_a_mixture_of_21_sources_with_one_broken_then_resubmitted(cluster, tmp_path):
    lines = []
    for i in range(20):
        source = tmp_path / "src" / f"ds{i:02d}"
        write_sample_dataset(
            source, SampleSpec(episodes=2, lengths=(4, 5), cameras=(CameraSpec("observation.images.top", 24, 32),), seed=i)
        )
        lines.append(str(source))
    (tmp_path / "src" / "broken").mkdir()
    lines.insert(7, f"{tmp_path / 'src' / 'broken'}   # no meta/info.json")
    (tmp_path / "sources.txt").write_text("\n".join(lines) + "\n")
    dst = tmp_path / "mix"
    arrays, final = _submit(cluster, "submit_mixture.sh", [str(tmp_path / "sources.txt"), str(dst)], tmp_path)
    states = cluster.wait(arrays + [final])
    assert len(states) == 22
    # A broken dataset never fails its task; the final job fails, writing nothing, because the
    # mixture would leave it out (issue 42), and its log says which and why.
    assert {state for job, state in states.items() if job != final} == {"COMPLETED"} and states[final] == "FAILED", states
    assert not (dst / "mixture.json").exists()
    report = _log(tmp_path, f"lerobot-shards-mixture-create-{final}.out")
    assert "FAILED broken" in report and "meta/info.json: missing" in report, report
    assert "1 dataset would be left out of the mixture: broken (failed)" in report, report

    # Re-submitting does no packing again and says so; --allow-partial writes the mixture without it.
    arrays, final = _submit(
        cluster,
        "submit_mixture.sh",
        [str(tmp_path / "sources.txt"), str(dst)],
        tmp_path,
        env={"MIXTURE_CREATE_ARGS": "--allow-partial"},
    )
    assert set(cluster.wait(arrays + [final]).values()) == {"COMPLETED"}
    task_logs = _log(tmp_path, f"lerobot-shards-mixture-{arrays[0]}_*.out")
    assert task_logs.count("already packed and verified") == 20, task_logs[-2000:]
    spec = json.loads((dst / "mixture.json").read_text())
    assert [d["name"] for d in spec["datasets"]] == [f"ds{i:02d}" for i in range(20)]
    assert "1 dataset(s) left out (--allow-partial)" in _log(tmp_path, f"lerobot-shards-mixture-create-{final}.out")


@pytest.fixture(scope="module")
def big_source(tmp_path_factory) -> tuple[Path, Path]:
    """The shared ALOHA set, whose h264 shards (one episode each) take a few seconds, and its
    pack in one local run. (A synthetic 240x320 AV1 source was tried: libsvtav1 deadlocked
    once while writing it, CPU idle, so the generator stays at the small sizes it has always used.)"""
    aloha = shared_dataset("aloha_cube_4cam")  # real 480x640 AV1, 8 episodes x 4 cameras
    root = tmp_path_factory.mktemp("big")
    pack_dataset(str(aloha), str(root / "reference"), video="h264", shard_size_mb=0.05)
    assert len(list((root / "reference" / "shards").glob("*.tar"))) == 8
    return aloha, root / "reference"


def test_parts_and_finalize_equal_one_run(cluster, big_source, tmp_path):
    source, reference = big_source
    dst = tmp_path / "packed"
    arrays, final = _submit(cluster, "submit_pack.sh", [str(source), str(dst), "3", *PACK_ARGS], tmp_path)
    states = cluster.wait(arrays + [final])
    assert set(states.values()) == {"COMPLETED"}, states
    assert "ok: " in _log(tmp_path, f"lerobot-shards-finalize-{final}.out")  # finalize then verify
    assert_same_tree(reference, dst)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def test_scancel_and_a_killed_process_group_resume_to_the_same_bytes(cluster, big_source, tmp_path):
    source, reference = big_source
    dst = tmp_path / "packed"
    arrays, final = _submit(cluster, "submit_pack.sh", [str(source), str(dst), "2", *PACK_ARGS], tmp_path)
    job = arrays[0]
    # Both tasks run (two CPUs); stop them once the first shard is committed, mid-pack.
    _wait_for(
        lambda: list((dst / "shards").glob("*.json")) if (dst / "shards").exists() else False,
        600,
        f"no shard committed: {cluster.run(['squeue'], check=False).stdout}",
    )
    # Task 0: cancelled the way a user does. Task 1: its whole process group SIGKILLed, as
    # when a node dies under it (SLURM sees the batch script die).
    pids = [
        int(p) for p in re.findall(r"^\s*(\d+)\s", cluster.run(["scontrol", "listpids", f"{job}_1"], check=False).stdout, re.M)
    ]
    cluster.run(["scancel", f"{job}_0"])
    for pid in pids:
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    states = cluster.wait([job], timeout=300)
    assert states[f"{job}_0"] == "CANCELLED" or "CANCELLED" in states[f"{job}_0"], states
    assert states[f"{job}_1"] in {"FAILED", "CANCELLED", "COMPLETED"}, states
    assert not (dst / "manifest.json").exists()
    # finalize (afterok) can never start now: SLURM leaves it pending; cancel it (slurm/README.md).
    reason = cluster.run(["squeue", "-h", "-j", final, "-o", "%r"], check=False).stdout.strip()
    assert reason in {"DependencyNeverSatisfied", "Dependency"}, reason
    cluster.run(["scancel", final])
    committed = len(list((dst / "shards").glob("*.json")))

    arrays, final = _submit(cluster, "submit_pack.sh", [str(source), str(dst), "2", *PACK_ARGS], tmp_path)
    assert set(cluster.wait(arrays + [final]).values()) == {"COMPLETED"}
    resumed = _log(tmp_path, f"lerobot-shards-pack-{arrays[0]}_*.out")
    kept = sum(int(n) for n in re.findall(r"(\d+) already done", resumed))
    assert kept == committed, resumed[-2000:]
    assert_same_tree(reference, dst)

    # Re-submitting the finished pack changes nothing and says so.
    arrays, final = _submit(cluster, "submit_pack.sh", [str(source), str(dst), "2", *PACK_ARGS], tmp_path)
    assert set(cluster.wait(arrays + [final]).values()) == {"COMPLETED"}
    again = _log(tmp_path, f"lerobot-shards-pack-{arrays[0]}_*.out")
    assert re.findall(r"\((\d+) written", again) == ["0", "0"], again[-2000:]
    assert_same_tree(reference, dst)


def test_a_mixture_to_a_flaky_bucket_completes_or_reports_and_resubmitting_finishes(cluster, s3_bucket, faulty_s3, tmp_path):
    """The array writes to S3 through the fault proxy (resets, stalls, 503 SlowDown): each
    dataset completes with retries or is reported failed; none looks finished when it is not;
    re-submitting once the bucket heals completes the rest."""
    url, options = s3_bucket
    faulty = faulty_s3(reset_probability=0.08, stall_probability=0.01, throttle_probability=0.08, seed=11, stall_s=3.0)
    names = [f"ds{i}" for i in range(6)]
    for i, name in enumerate(names):
        write_sample_dataset(
            tmp_path / "src" / name,
            SampleSpec(episodes=2, lengths=(4, 5), seed=i, cameras=(CameraSpec("observation.images.top", 24, 32),)),
        )
    (tmp_path / "sources.txt").write_text("\n".join(str(tmp_path / "src" / n) for n in names) + "\n")
    dst = f"{url}/mix"
    # The endpoint reaches every task (and the final job) through the environment, as on a
    # cluster; short timeouts make stalls cheap.
    env = {**DUMMY_ENV, "AWS_ENDPOINT_URL": faulty.proxy.url}
    timeouts = ["--storage-options", '{"config_kwargs": {"connect_timeout": 2, "read_timeout": 2}}']
    arrays, final = _submit(cluster, "submit_mixture.sh", [str(tmp_path / "sources.txt"), dst, *timeouts], tmp_path, env)
    states = cluster.wait(arrays + [final])
    assert all(state == "COMPLETED" for key, state in states.items() if key != final), states
    assert faulty.counters.faults > 0, faulty.counters
    print(f"faults under the array: {faulty.counters}")
    # Whatever has a manifest verifies (read without faults); the rest has a failure record
    # or is reported incomplete by the final job.
    root = Storage(dst, options)
    report = _log(tmp_path, f"lerobot-shards-mixture-create-{final}.out")
    for name in names:
        if root.exists(f"{name}/manifest.json"):
            assert verify(f"{dst}/{name}", storage_options=options).ok, name
        else:
            assert name in report and ("FAILED" in report or "incomplete" in report), report
    # The bucket heals: re-submitting completes every dataset.
    faulty.proxy.set_fault_probabilities()
    arrays, final = _submit(cluster, "submit_mixture.sh", [str(tmp_path / "sources.txt"), dst, *timeouts], tmp_path, env)
    assert set(cluster.wait(arrays + [final]).values()) == {"COMPLETED"}
    spec = json.loads(root.read_bytes("mixture.json"))
    assert [d["name"] for d in spec["datasets"]] == names
    assert all(verify(f"{dst}/{name}", storage_options=options).ok for name in names)
