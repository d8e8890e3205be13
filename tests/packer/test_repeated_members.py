"""Episodes whose video bytes are identical (a replicated dataset, a camera that recorded the
same frames) pack into a pack every reader opens (found packing a 16x copy of the ALOHA set for
the benchmarks: the pack was written, then refused by verify and the reader, and the advised
``--repair`` rewrote the same refusal).

Readers require each member digest in the episodes index to be backed by 16 bytes of the file
(so a small index cannot claim many members); repeated digests collapsed into one dictionary
entry took a few bytes for 60 members. The writer now stores a digest column in which a digest
repeats as it is, and keeps its compression everywhere else.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq

from lerobot_shards import PackedDataset, PackedLeRobotDataset
from lerobot_shards.testing import SampleSpec, write_sample_dataset
from tests.cli.commands import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _compression(pack: Path) -> dict[str, str]:
    metadata = pq.ParquetFile(pack / "index" / "episodes.parquet").metadata
    group = metadata.row_group(0)
    return {group.column(j).path_in_schema: group.column(j).compression for j in range(group.num_columns)}


def test_a_pack_of_repeated_members_verifies_and_reads(tmp_path):
    source = tmp_path / "src"
    write_sample_dataset(source, SampleSpec(episodes=3, seed=5))
    replicated = tmp_path / "x20"  # 60 episodes, 3 distinct members per camera
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "replicate_dataset.py"), str(source), str(replicated), "--times", "20"],
        check=True,
        capture_output=True,
    )
    for name, src in (("distinct", source), ("repeated", replicated)):
        run_cli("pack", str(src), str(tmp_path / name))
        run_cli("verify", str(tmp_path / name))  # refused the repeated pack before: its digests took 193 bytes
    repeated, distinct = _compression(tmp_path / "repeated"), _compression(tmp_path / "distinct")
    digests = [name for name in repeated if name.endswith("/sha256")]
    assert len(digests) == 2
    assert all(repeated[name] == "UNCOMPRESSED" for name in digests)  # backed by their own bytes
    assert all(distinct[name] == "ZSTD" for name in digests)  # distinct digests keep the pack's compression
    assert {repeated[name] for name in repeated if name not in digests} == {"ZSTD"}
    assert sum(1 for _ in PackedDataset(str(tmp_path / "repeated"))) == 60 * 26
    assert len(PackedLeRobotDataset(str(tmp_path / "repeated"))) == 60 * 26
