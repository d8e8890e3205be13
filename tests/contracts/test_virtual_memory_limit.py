"""Bounded in every environment (issue 55): an honest dataset checks, packs (copy and a
re-encode with workers), verifies with decoding, reads (a DataLoader with workers; samples
built side by side on threads) and mixes
under a virtual-memory limit (``ulimit -v``, SLURM's ``VSizeFactor``, nodes with overcommit off).

Every bounded metadata read once asked the allocator for its whole bound up front
(``read(bound + 1)``: 4 GiB for a parquet file, 256 MiB for a manifest): under such a limit an
honest 6-episode dataset failed with a bare ``MemoryError`` traceback. The limit is set on
each command's own process (``RLIMIT_AS`` at ``HONEST_ADDRESS_SPACE_BYTES``, the budget
docs/SECURITY.md states), so the verdict is the kernel's, not a measurement; as a user's
environment has it (no ``MALLOC_ARENA_MAX``).
"""

from __future__ import annotations

import subprocess
import sys

from lerobot_shards.testing import SampleSpec, write_sample_dataset
from tests.memory_probe import HONEST_ADDRESS_SPACE_BYTES, limit_address_space

READ = """
import sys, warnings
from torch.utils.data import DataLoader
from lerobot_shards import DecoderFallbackWarning, MixtureDataset, PackedDataset
warnings.simplefilter("error", DecoderFallbackWarning)  # torchcodec (LeRobot's decoder) loads under the limit too
pack, mixture = sys.argv[1:3]
alone = sum(1 for _ in PackedDataset(pack))
loaded = sum(len(batch["index"]) for batch in DataLoader(PackedDataset(pack), batch_size=8, num_workers=2))
side_by_side = sum(1 for _ in PackedDataset(pack, decode_threads=4))  # two samples at once, each's cameras at once
mixed = sum(1 for _ in MixtureDataset(mixture))
print(alone, loaded, side_by_side, mixed)
"""


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        preexec_fn=lambda: limit_address_space(HONEST_ADDRESS_SPACE_BYTES),
        timeout=600,
    )


def test_an_honest_dataset_checks_packs_verifies_reads_and_mixes_under_an_address_space_limit(tmp_path):
    src = tmp_path / "src"
    report = write_sample_dataset(src, SampleSpec(episodes=6, seed=55))
    mix = tmp_path / "mix"
    commands = [
        ["check", str(src)],
        ["pack", str(src), str(mix / "copy")],
        ["pack", str(src), str(mix / "hevc"), "--video", "hevc", "--workers", "2"],
        ["verify", str(mix / "copy"), "--decode"],
        ["verify", str(mix / "hevc"), "--decode"],
        ["mixture", "create", str(mix)],
    ]
    for command in commands:
        done = _run(["-m", "lerobot_shards.cli", *command])
        said = f"{' '.join(command[:2])} under RLIMIT_AS={HONEST_ADDRESS_SPACE_BYTES}: {done.stderr[-2000:]}"
        assert done.returncode == 0, said
        assert "MemoryError" not in done.stderr and "Traceback" not in done.stderr, said
    done = _run(["-c", READ, str(mix / "copy"), str(mix / "mixture.json")])
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(report.frames)] * 3 + [str(2 * report.frames)], done.stdout
