"""Processes that read packs exit cleanly (issue 11, finding 18; issue 13's decode stage).

pyarrow readers over memory Python owns made interpreter shutdown abort with "terminate
called without an active exception": the job had succeeded and its exit status said it
crashed (a SLURM array task counted as failed, a trainer's wrapper restarted). Every parquet
read from bytes now goes through ``lerobot_shards.core.format.parquet.arrow_io``. These tests run the reading paths
in real subprocesses and require every one to exit 0, and keep new code from reading parquet
out of Python memory again.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lerobot_shards import pack_dataset
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "scripts"
# The old pattern aborted in 11 of 60 runs of the child: 60 runs miss a regression with
# probability below 1e-5.
RUNS = 60


def _run_children(argv: list[str], runs: int) -> list[tuple[int, str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def one(_: int) -> tuple[int, str]:
        child = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, env=env)
        return child.returncode, child.stderr[-300:]

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(runs)))


def test_parquet_read_from_bytes_in_threads_never_aborts_at_exit(tmp_path):
    rng = np.random.default_rng(0)
    n = 20_000
    table = pa.table(
        {
            "x": rng.random(n),
            "i": rng.integers(0, 1000, n),
            "task": pa.array([f"task {k % 7}" for k in range(n)]),
            "state": pa.array(list(rng.random((n, 14)).astype("float32")), pa.list_(pa.float32())),
        }
    )
    path = tmp_path / "table.parquet"
    pq.write_table(table, path, row_group_size=4000)
    results = _run_children([str(SCRIPTS / "parquet_bytes_exit.py"), str(path)], RUNS)
    failed = [(rc, err) for rc, err in results if rc != 0]
    assert not failed, f"{len(failed)} of {RUNS} runs exited non-zero; first: {failed[0]}"


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("exit")
    spec = SampleSpec(episodes=4, lengths=(5, 7, 3, 6), cameras=(CameraSpec("observation.images.top", 32, 48),), seed=5)
    write_sample_dataset(root / "src", spec)
    pack_dataset(str(root / "src"), str(root / "pack"), shard_size_mb=0.004, windows={"chunk": {"action": [0.0, 1 / 30]}})
    return root / "pack"


def test_reader_and_verify_in_threads_exit_zero(small_pack):
    results = _run_children([str(SCRIPTS / "read_and_exit.py"), str(small_pack)], 6)
    failed = [(rc, err) for rc, err in results if rc != 0]
    assert not failed, f"{len(failed)} of 6 runs exited non-zero; first: {failed[0]}"


def test_leaving_a_decode_stage_loop_early_never_aborts_at_exit(tmp_path):
    """``DecodeStage.wrap`` decodes ahead in a thread; a script that stops after two batches
    and exits aborted in 8 of 12 runs (480x640 frames keep the thread inside the decoder)
    before the thread was stopped and joined on the way out."""
    spec = SampleSpec(episodes=3, lengths=(40, 40, 40), cameras=(CameraSpec("observation.images.top", 480, 640),), seed=5)
    write_sample_dataset(tmp_path / "src", spec)
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "pack"))
    results = _run_children([str(SCRIPTS / "decode_stage_exit.py"), str(tmp_path / "pack")], 10)
    failed = [(rc, err) for rc, err in results if rc != 0]
    assert not failed, f"{len(failed)} of 10 runs exited non-zero; first: {failed[0]}"


# Functions of pyarrow that read a parquet file from whatever they are given.
_PARQUET_READS = {
    ("pq", "read_table"),
    ("pq", "ParquetFile"),
    ("pq", "read_metadata"),
    ("pq", "read_schema"),
    ("pa", "BufferReader"),
}


def test_parquet_is_read_from_paths_or_arrow_owned_memory_only():
    """Outside ``arrow_io`` (and the row-group decoder built on it), pyarrow reads parquet
    only from filesystem paths, which Arrow opens natively."""
    offenders = []
    for file in sorted((ROOT / "lerobot_shards").rglob("*.py")):
        rel = file.relative_to(ROOT).as_posix()
        if rel in (
            "lerobot_shards/core/format/parquet/arrow_io.py",
            "lerobot_shards/core/format/parquet/row_groups.py",
            "lerobot_shards/core/format/parquet/bounded.py",
        ):
            continue
        for node in ast.walk(ast.parse(file.read_text(), filename=rel)):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            ):
                continue
            if (node.func.value.id, node.func.attr) not in _PARQUET_READS:
                continue
            first = node.args[0] if node.args else None
            if not (isinstance(first, ast.Name) and first.id == "path"):
                offenders.append(f"{rel}:{node.lineno} {ast.unparse(node)[:80]}")
    assert not offenders, "read parquet bytes through lerobot_shards.core.format.parquet.arrow_io instead:\n" + "\n".join(
        offenders
    )
