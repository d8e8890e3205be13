"""Real torchrun processes (gloo, CPU): ranks see disjoint anchors covering the set, equal counts."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.loopback import free_port
from tests.packed_fixtures import *

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "torchrun_ranks.py"


def test_torchrun_two_ranks_split_exactly(packed_copy, tmp_path):
    # Loopback only: the rendezvous and gloo never leave 127.0.0.1.
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
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(SCRIPT),
        str(packed_copy),
        str(tmp_path),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    first, second = ranks[0]["seen"], ranks[1]["seen"]
    assert len(first) == len(second) == ranks[0]["len"] == 141 // 2
    assert not set(first) & set(second)
    assert len(set(range(141)) - set(first) - set(second)) == 1
