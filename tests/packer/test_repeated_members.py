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

import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lerobot_shards import PackedDataset, PackedLeRobotDataset
from lerobot_shards.core.errors import FormatError
from lerobot_shards.testing import SampleSpec, write_sample_dataset
from tests.cli.commands import run_cli
from tests.pack_tamper import edit_episodes_index

ROOT = Path(__file__).resolve().parents[2]


def _compression(pack: Path) -> dict[str, str]:
    metadata = pq.ParquetFile(pack / "index" / "episodes.parquet").metadata
    group = metadata.row_group(0)
    return {group.column(j).path_in_schema: group.column(j).compression for j in range(group.num_columns)}


def _replicated(tmp_path: Path) -> tuple[Path, Path]:
    """(a 3-episode source, its 20-fold copy: 60 episodes, 3 distinct members per camera)."""
    source = tmp_path / "src"
    write_sample_dataset(source, SampleSpec(episodes=3, seed=5))
    replicated = tmp_path / "x20"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "replicate_dataset.py"), str(source), str(replicated), "--times", "20"],
        check=True,
        capture_output=True,
    )
    return source, replicated


def test_a_pack_of_repeated_members_verifies_and_reads(tmp_path):
    source, replicated = _replicated(tmp_path)
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


def test_a_pack_written_before_is_refused_with_the_repair_that_reads_it(tmp_path):
    """A pack of repeated members written before the writer stored them plainly (its index
    rewritten with pyarrow's dictionary, as the old writer did, and re-sealed): the reader says
    what fixes it, verify prints the command, and that command, run, makes it read."""
    _, replicated = _replicated(tmp_path)
    pack = tmp_path / "old"
    run_cli("pack", str(replicated), str(pack))
    edit_episodes_index(pack, lambda rows: None)
    with pytest.raises(FormatError, match=r"written before 2026-12-07 .* `lerobot-shards pack SRC DST --repair`"):
        PackedDataset(str(pack))
    failed = run_cli("verify", str(pack), ok=False)
    assert failed.exit_code == 1 and "/sha256 holds 60 values" in failed.output, failed.output
    advice = failed.output.strip().splitlines()[-1]
    assert f"to repair it: lerobot-shards pack SRC {pack} --repair" in advice, advice
    command = shlex.split(advice.split("to repair it: lerobot-shards ", 1)[1].split(" (SRC:", 1)[0])
    run_cli(*[str(replicated) if word == "SRC" else word for word in command])  # as printed, the source for SRC
    run_cli("verify", str(pack))
    assert sum(1 for _ in PackedDataset(str(pack))) == 60 * 26
