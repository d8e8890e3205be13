"""Seeded byte-flip fuzzing of every file kind of a packed dataset (issue 11).

The contract: after any single-byte flip, the reader yields samples identical to the clean
pack or raises one of our errors naming the damaged file: never wrong values without an
error, never a hang, never a crashed process, with memory bounded; and ``verify`` fails on
every flip that changes what the reader yields. The flips run in one child process
(tests/scripts/flip_bytes.py) so a crash or hang is observed, not suffered.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lerobot_shards import pack_dataset
from lerobot_shards.core.format import EPISODES_INDEX_PATH, video_column
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.memory_probe import HOSTILE_PEAK_BYTES, limit_address_space

ROOT = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("LEROBOT_SHARDS_FUZZ_SEED", "20261123"))
FLIPS_PER_KIND = int(os.environ.get("LEROBOT_SHARDS_FUZZ_FLIPS", "25"))
TOP = "observation.images.top"
PEAK_RSS_LIMIT_KB = HOSTILE_PEAK_BYTES // 1024  # the one budget (tests/memory_probe.py, docs/SECURITY.md)


def _regions(root: Path) -> dict[str, tuple[str, list[tuple[int, int]]]]:
    """Per file kind: (file, byte ranges [start, stop) to flip inside)."""
    rows = pq.read_table(root / EPISODES_INDEX_PATH).to_pylist()
    tar = "shards/shard-000000.tar"
    size = (root / tar).stat().st_size
    members = [
        (r[video_column(TOP, "offset")], r[video_column(TOP, "offset")] + r[video_column(TOP, "size")])
        for r in rows
        if r["shard"] == 0
    ]
    headers = [(start - 512, start) for start, _ in members] + [(size - 1024, size)]
    whole = lambda rel: [(0, (root / rel).stat().st_size)]  # noqa: E731
    return {
        "manifest": ("manifest.json", whole("manifest.json")),
        "episodes index": (EPISODES_INDEX_PATH, whole(EPISODES_INDEX_PATH)),
        "samples index": ("index/samples.parquet", whole("index/samples.parquet")),
        "shard parquet": ("shards/shard-000001.parquet", whole("shards/shard-000001.parquet")),
        "tar headers": (tar, headers),
        "tar members": (tar, members),
        "tasks": ("meta/tasks.parquet", whole("meta/tasks.parquet")),
        "info": ("meta/info.json", whole("meta/info.json")),
    }


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    spec = SampleSpec(episodes=4, lengths=(5, 7, 3, 6), cameras=(CameraSpec(TOP, 32, 48),), tasks=("pick", "place"), seed=5)
    write_sample_dataset(root / "src", spec)
    pack_dataset(str(root / "src"), str(root / "pack"), shard_size_mb=0.004, windows={"chunk": {"action": [0.0, 1 / 30, 2 / 30]}})
    assert len(list((root / "pack" / "shards").glob("*.tar"))) >= 2
    return root / "pack"


def test_single_byte_flips_give_the_clean_samples_or_an_error_naming_the_file(small_pack, tmp_path):
    rng = random.Random(SEED)
    flips, kinds = [], {}
    for kind, (rel, ranges) in _regions(small_pack).items():
        for _ in range(FLIPS_PER_KIND):
            start, stop = rng.choice(ranges)
            flips.append({"kind": kind, "file": rel, "offset": rng.randrange(start, stop), "xor": rng.randrange(1, 256)})
        kinds[kind] = rel
    (tmp_path / "flips.json").write_text(json.dumps(flips))
    results_path = tmp_path / "results.jsonl"
    child = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "scripts" / "flip_bytes.py"),
            str(small_pack),
            str(tmp_path / "flips.json"),
            str(results_path),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=1800,
        preexec_fn=limit_address_space,
    )
    lines = [json.loads(line) for line in results_path.read_text().splitlines()] if results_path.exists() else []
    assert child.returncode == 0, (
        f"the reader process died (rc {child.returncode}) after {len(lines)} flips:\n{child.stderr[-3000:]}"
    )
    *records, summary = lines
    assert len(records) == len(flips)
    print(
        f"seed {SEED}: {len(records)} flips, peak RSS {summary['peak_rss_kb'] // 1024} MB, "
        f"{sum(r['outcome'] == 'identical' for r in records)} identical, {sum(r['outcome'] == 'error' for r in records)} errors"
    )
    failures = []
    for r in records:
        where = f"{r['kind']} {r['file']}@{r['offset']}^{r['xor']:#04x}"
        if r["outcome"] == "different":
            failures.append(f"{where}: WRONG SAMPLES WITHOUT AN ERROR")
        elif r["outcome"] == "foreign-error":
            failures.append(f"{where}: not our error: {r['error_type']}: {r['message'][:300]}")
        elif r["outcome"] == "error" and r["file"] not in r["message"]:
            failures.append(f"{where}: the error does not name {r['file']}: {r['error_type']}: {r['message'][:300]}")
        if r.get("verify_crash"):
            failures.append(f"{where}: verify crashed: {r['verify_crash'][:300]}")
        elif r["outcome"] != "identical" and r["verify_ok"]:
            failures.append(f"{where}: the reader saw damage ({r['outcome']}) but verify passed")
    assert not failures, "\n".join(failures)
    first_over = next((r for r in records if r["peak_rss_kb"] >= PEAK_RSS_LIMIT_KB), None)
    assert summary["peak_rss_kb"] < PEAK_RSS_LIMIT_KB, (
        f"peak RSS {summary['peak_rss_kb']} KB, first past the limit at {first_over}"
    )
    # Every kind was exercised and damage was seen in each kind the reader reads.
    errors_by_kind = {k: sum(r["outcome"] == "error" for r in records if r["kind"] == k) for k in kinds}
    for kind in ("manifest", "episodes index", "samples index", "shard parquet", "tar members", "tasks", "info"):
        assert errors_by_kind[kind] > 0, f"no flip in {kind} was detected: {errors_by_kind}"


# -- expansion mutations (issue 21): small files that claim or decode to much more -------------
EXPANSION_CHILD = """
import json, sys
from lerobot_shards import verify
from lerobot_shards import PackedDataset
for root in sys.argv[1:]:
    record = {"root": root}
    try:
        list(PackedDataset(root, where="chunk_action_pad_before >= 0", shuffle=False, return_uint8=True, prefetch_episodes=0))
        record["reader"] = "ok"
    except Exception as err:
        record["reader"] = type(err).__module__ + "." + type(err).__name__ + ": " + str(err)[:500]
    try:
        record["verify_ok"] = verify(root).ok
    except Exception as err:
        record["verify_ok"] = "crash: " + type(err).__name__ + ": " + str(err)[:300]
    with open("/proc/self/status") as status:
        record["peak_kb"] = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print("RECORD", json.dumps(record), flush=True)
"""


def _inflate_list(table: pa.Table, column: str, row: int, factor: int) -> pa.Table:
    """Row ``row``'s list in ``column`` repeated ``factor`` times (the column becomes a list)."""
    lists = table[column].to_pylist()
    lists[row] = lists[row] * factor
    value_type = pa.string() if column == "tasks" else table[column].type.value_type
    return table.set_column(table.schema.get_field_index(column), column, pa.array(lists, pa.list_(value_type)))


def _mutations(pack: Path, out: Path, rng: random.Random) -> list[tuple[str, Path]]:
    """Seeded expansion mutations, each on its own re-sealed copy of ``pack``."""
    from tests.pack_tamper import edit_episodes_index, reseal

    made = []

    def copy(name: str) -> Path:
        root = out / name
        shutil.copytree(pack, root)
        made.append((name, root))
        return root

    factor = rng.choice([1_000, 100_000, 3_000_000])
    # inflate a list: one episode's task list in the episodes index
    root = copy(f"inflate-tasks-x{factor}")
    table = pq.read_table(root / EPISODES_INDEX_PATH)
    pq.write_table(
        _inflate_list(table, "tasks", rng.randrange(table.num_rows), factor), root / EPISODES_INDEX_PATH, use_dictionary=True
    )
    reseal(root)
    # inflate a list: one row's action in a shard parquet (as a variable-length list)
    root = copy(f"inflate-action-x{min(factor, 1_000_000)}")
    path = root / "shards" / "shard-000001.parquet"
    table = pq.read_table(path)
    table = table.set_column(table.schema.get_field_index("action"), "action", table["action"].cast(pa.list_(pa.float32())))
    pq.write_table(
        _inflate_list(table, "action", rng.randrange(table.num_rows), min(factor, 1_000_000)), path, row_group_size=1 << 30
    )
    reseal(root)
    # repeat a value: every row of the samples index repeated
    root = copy(f"repeat-samples-x{min(factor, 100_000)}")
    samples = pq.read_table(root / "index" / "samples.parquet")
    pq.write_table(
        samples.take(pa.array(np.zeros(samples.num_rows * min(factor, 100_000), np.int64))), root / "index" / "samples.parquet"
    )
    reseal(root)
    # claim a length: an episode's length, and a member's frame count
    claimed = rng.choice([10**6 + 1, 10**8, 10**12])
    root = copy(f"claim-length-{claimed}")
    edit_episodes_index(root, lambda rows: rows[rng.randrange(len(rows))].update(length=claimed))
    root = copy(f"claim-frames-{claimed}")
    edit_episodes_index(root, lambda rows: rows[0].update({video_column(TOP, "frames"): claimed}))
    return made


def test_expansion_mutations_give_a_named_error_within_the_memory_bound(small_pack, tmp_path):
    rng = random.Random(SEED)
    mutations = _mutations(small_pack, tmp_path, rng)
    child = subprocess.run(
        [sys.executable, "-c", EXPANSION_CHILD, *[str(root) for _, root in mutations]],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=1800,
        preexec_fn=limit_address_space,
    )
    records = [json.loads(line[7:]) for line in child.stdout.splitlines() if line.startswith("RECORD ")]
    assert child.returncode == 0 and len(records) == len(mutations), child.stderr[-3000:]

    for (name, _), record in zip(mutations, records):
        print(f"{name}: {record['reader'][:160]} (verify ok: {record['verify_ok']}, peak {record['peak_kb'] // 1024} MiB)")
        assert record["reader"].startswith("lerobot_shards."), f"{name}: {record['reader']}"
        assert record["verify_ok"] is False, f"{name}: verify said {record['verify_ok']}"
        assert record["peak_kb"] * 1024 < HOSTILE_PEAK_BYTES, f"{name}: peak {record['peak_kb']} KB"
