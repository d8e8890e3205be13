"""A real chain of killed and resumed torchrun jobs (issue 12): an epoch started on 3 ranks x
2 workers, killed (each rank dies right after a checkpoint and one more batch), resumed on 2
ranks x 3 workers, killed, resumed on 4 ranks x 1 worker.
What all processes trained on is the anchor set exactly once (up to the drops that keep
per-rank counts equal: fewer than the world size per plan or re-split)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.loopback import free_port
from tests.packed_fixtures import *

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "torchrun_resume.py"
TOTAL = 141


def _torchrun(packed, out: Path, ranks: int, workers: int, batch: int, stop_after: int | None):
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={ranks}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        str(packed),
        str(out),
        "--workers",
        str(workers),
        "--batch",
        str(batch),
    ]
    if stop_after is not None:
        command += ["--stop-after", str(stop_after)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if stop_after is None:
        # A failing rank's own traceback comes before the launcher's summary: show both.
        first_error = result.stderr.find("Traceback")
        assert result.returncode == 0, (
            result.stderr[first_error : first_error + 4000] if first_error >= 0 else ""
        ) + result.stderr[-2000:]
        return
    assert result.returncode != 0, "the ranks should have died after their checkpoint"
    states = [json.loads((out / f"state-rank{r}.json").read_text()) for r in range(ranks)]
    assert all(s == states[0] for s in states), "every rank must save the same state"
    (out / "state.json").write_text(json.dumps(states[0]))
    for r in range(ranks):
        (out / f"state-rank{r}.json").unlink()


def test_killed_and_resumed_on_other_shapes_trains_on_every_anchor_once(packed_copy, tmp_path):
    _torchrun(packed_copy, tmp_path, ranks=3, workers=2, batch=4, stop_after=3)
    _torchrun(packed_copy, tmp_path, ranks=2, workers=3, batch=3, stop_after=4)
    _torchrun(packed_copy, tmp_path, ranks=4, workers=1, batch=5, stop_after=None)
    trained, per_phase = [], {}
    for shape in ("3x2", "2x3", "4x1"):
        ranks = int(shape[0])
        for r in range(ranks):
            data = json.loads((tmp_path / f"trained-{shape}-rank{r}.json").read_text())
            mine = data["trained"] if isinstance(data, dict) else data
            if isinstance(data, dict):
                assert len(mine) == data["len"], f"{shape} rank {r}: len(ds) must count what it yields"
            per_phase.setdefault(shape, []).append(len(mine))
            trained += mine
    assert all(len(set(counts)) == 1 for counts in per_phase.values()), per_phase
    assert len(trained) == len(set(trained)), f"{len(trained) - len(set(trained))} anchors trained on twice"
    assert TOTAL - (2 + 1 + 3) <= len(trained) <= TOTAL
    phases = json.loads((tmp_path / "state.json").read_text())["phases"]
    assert [(p["world_size"], p["num_workers"]) for p in phases] == [(3, 2), (2, 3)]
