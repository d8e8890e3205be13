"""Compiled mixtures (issue 20): the options of PackedDataset on a mixture, duplicates refused,
the recorded ``where`` applied, one digest pinning everything, damage and re-packs caught,
process limits named instead of retried."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from lerobot_shards import MixtureDataset, create_mixture
from lerobot_shards.core.errors import EpisodeDataError, FormatError, IntegrityError, MixtureSpecError, PinMismatchError
from lerobot_shards.core.format import sha256_hex
from lerobot_shards.reader.decode import DecodeStage, collate
from lerobot_shards.testing import tiny_member, write_tabular_pack

CAMERA = "observation.images.top"
LENGTHS = {"a": 4, "b": 5, "c": 3}


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("compiled")
    for seed, (name, length) in enumerate(LENGTHS.items(), start=1):
        write_tabular_pack(root / name, episodes=3, length=length, seed=seed, camera=(CAMERA, tiny_member(length), 16, 16))
    return root


@pytest.fixture
def mixture(packs, tmp_path) -> Path:
    """A private copy of the packs with their compiled mixture."""
    root = tmp_path / "mix"
    shutil.copytree(packs, root)
    create_mixture(str(root))
    return root


def _pairs(dataset) -> list[tuple[int, int]]:
    return [(int(s["dataset_index"]), int(s["index"])) for s in dataset]


def test_the_compiled_mixture_equals_opening_every_pack(mixture):
    compiled = MixtureDataset(str(mixture / "mixture.json"), return_uint8=True, seed=3)
    opened = MixtureDataset([str(mixture / n) for n in LENGTHS], return_uint8=True, seed=3)
    assert len(compiled) == len(opened) == 3 * sum(LENGTHS.values())
    assert _pairs(compiled) == _pairs(opened)
    a, b = compiled.meta, opened.meta
    assert a.total_frames == b.total_frames and a.features == b.features
    for key in a.stats:
        for stat in a.stats[key]:
            assert np.array_equal(a.stats[key][stat], b.stats[key][stat])
    assert compiled.normalization_stats == opened.normalization_stats


def test_reading_options_work_on_a_mixture(mixture, tmp_path):
    path = str(mixture / "mixture.json")
    plain = MixtureDataset(path, seed=1)
    frames = {(int(s["dataset_index"]), int(s["index"])): s[CAMERA] for s in plain}
    # Decode outside the workers (decode_device): compressed members travel, DecodeStage decodes.
    shipped = MixtureDataset(path, seed=1, decode_device="cpu")
    stage = DecodeStage("cpu")
    for batch in torch.utils.data.DataLoader(shipped, batch_size=4, collate_fn=collate):
        batch = stage(batch)
        for d, i, frame in zip(batch["dataset_index"].tolist(), batch["index"].tolist(), batch[CAMERA]):
            assert torch.equal(frame, frames[(d, i)])
    # A disk cache serves the second epoch's video.
    cached = MixtureDataset(path, seed=1, cache_dir=str(tmp_path / "cache"), return_uint8=True)
    list(cached)
    cached.set_epoch(1)
    list(cached)
    assert cached.stats()["disk_cache_hits"] > 0
    # image_transforms, decoder and tolerance_s reach every dataset.
    flipped = MixtureDataset(path, seed=1, image_transforms=lambda x: x.flip(-1), decoder="pyav", tolerance_s=1e-3)
    sample = next(iter(flipped))
    assert flipped.decoder_backend == "pyav"
    assert torch.equal(sample[CAMERA], frames[(int(sample["dataset_index"]), int(sample["index"]))].flip(-1))


def test_the_same_pack_twice_is_refused_naming_both(mixture):
    shutil.copytree(mixture / "a", mixture / "a-again")
    with pytest.raises(MixtureSpecError, match=r"datasets 'a' and 'a-again' are the same pack \(manifest sha256:"):
        MixtureDataset([str(mixture / "a"), str(mixture / "a-again")])
    with pytest.raises(MixtureSpecError, match=r"datasets 'a' and 'again' are the same pack \(manifest sha256:"):
        MixtureDataset([str(mixture / "a"), str(mixture / "a")], names=["a", "again"])
    twice = MixtureDataset([str(mixture / "a"), str(mixture / "a-again")], allow_duplicates=True)
    assert len(twice) == 2 * 3 * LENGTHS["a"]
    report = create_mixture(str(mixture), allow_partial=True)
    row = next(r for r in report.rows if r.name == "a-again")
    assert row.status == "duplicate" and "the same pack as 'a'" in row.error
    assert [d["name"] for d in report.datasets] == ["a", "b", "c"]


def test_the_recorded_where_is_applied_and_counted(packs, tmp_path):
    root = tmp_path / "mix"
    shutil.copytree(packs, root)
    report = create_mixture(str(root), where="frame_index >= 1 AND frame_index < 3")
    spec = json.loads((root / "mixture.json").read_text())
    assert [d["anchors"] for d in spec["datasets"]] == [3 * 2, 3 * 2, 3 * 2] and report.spec.total_anchors == 18
    for dataset in (MixtureDataset(str(root / "mixture.json")),):
        samples = list(dataset)
        assert len(samples) == len(dataset) == 18
        assert sorted({int(s["frame_index"]) for s in samples}) == [1, 2]
    # Without the compiled index the reader opens every pack and applies the same where.
    del spec["index"]
    (root / "mixture.json").write_text(json.dumps(spec))
    opened = MixtureDataset(str(root / "mixture.json"))
    assert len(opened) == 18 and sorted({int(s["frame_index"]) for s in opened}) == [1, 2]


def _reseal(root: Path, name: str, edit) -> None:
    """Change a compiled table and record its new digest in mixture.json (a writer of the
    bucket can do that; only the pin, or the checks of the values, can stop it)."""
    spec = json.loads((root / "mixture.json").read_text())
    entry = spec["index"][name]
    table = edit(pq.read_table(root / entry["path"]))
    pq.write_table(table, root / entry["path"])
    data = (root / entry["path"]).read_bytes()
    entry.update(bytes=len(data), sha256=sha256_hex(data), rows=table.num_rows)
    (root / "mixture.json").write_text(json.dumps(spec))


def test_one_digest_pins_the_mixture_and_damage_is_caught(mixture):
    path = mixture / "mixture.json"
    pin = "sha256:" + sha256_hex(path.read_bytes())
    assert len(MixtureDataset(str(path), manifest_sha256=pin)) == 36
    with pytest.raises(PinMismatchError, match="not the pinned sha256:0000"):
        MixtureDataset(str(path), manifest_sha256="sha256:" + "0" * 64)
    # A flipped byte in a compiled table: the digest mixture.json records catches it.
    table = next((mixture / "_mixture").glob("episodes-*.parquet"))  # named by its digest
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0xFF
    table.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"_mixture/episodes-[0-9a-f]{16}.parquet: sha256 .* differs from the recorded"):
        MixtureDataset(str(path))


def test_a_resealed_index_that_lies_is_refused(mixture):
    def more_anchors(table: pa.Table) -> pa.Table:
        anchors = table["anchors"].to_numpy().copy()
        anchors[0] += 1
        return table.set_column(table.schema.get_field_index("anchors"), "anchors", pa.array(anchors))

    _reseal(mixture, "episodes", more_anchors)
    with pytest.raises(FormatError, match=r"anchors must be in \[0, length\]"):
        MixtureDataset(str(mixture / "mixture.json"))


def test_compiled_rows_rewired_to_another_episode_are_refused_against_the_packs_own_index(mixture):
    """Issue 54 row 9: a shared mixture.json whose compiled rows send an untouched, pinned pack's
    episode to another episode's members (every digest intact: the members are genuine) read
    other frames with no error. Each admitted episode's row is now compared with its pack's own
    index, and the error names the episode, the pack, the fields and the fix."""
    members = ("member_offset", "member_size", "member_sha256")

    def rewire(table: pa.Table) -> pa.Table:
        for name in members:
            values = table[name].to_pylist()
            values[0], values[1] = values[1], values[0]  # episodes 0 and 1 of pack a swap members
            table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, table[name].type))
        return table

    _reseal(mixture, "episodes", rewire)
    dataset = MixtureDataset(str(mixture / "mixture.json"), return_uint8=True, shuffle=False)
    with pytest.raises(EpisodeDataError, match=r"differs from pack 'a'.s own index \(cameras\).*mixture create"):
        list(dataset)


def test_a_pack_replaced_after_mixture_create_is_caught_naming_it(mixture):
    shutil.rmtree(mixture / "b")
    write_tabular_pack(
        mixture / "b", episodes=3, length=LENGTHS["b"], seed=99, camera=(CAMERA, tiny_member(LENGTHS["b"]), 16, 16)
    )
    dataset = MixtureDataset(str(mixture / "mixture.json"), return_uint8=True)
    # The compiled row is compared with pack b's own index, opened at its pin: the new pack is not it.
    with pytest.raises(IntegrityError, match=r"/b/(manifest.json|shards/shard-000000.parquet)"):
        list(dataset)


def test_a_process_limit_is_named_and_never_retried(mixture, tmp_path):
    """No descriptor left: the reader says which limit, with its value, instead of retrying."""
    script = tmp_path / "limit.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, resource, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from lerobot_shards import MixtureDataset, ResourceLimitError
        dataset = MixtureDataset({str(mixture / "mixture.json")!r}, return_uint8=True, prefetch_episodes=0)
        samples = iter(dataset)
        next(samples)
        lowest = os.open("/dev/null", os.O_RDONLY)
        os.close(lowest)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lowest, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        try:
            for _ in samples:
                pass
        except ResourceLimitError as err:
            print("LIMIT", err)
        print("RETRIES", dataset.stats()["storage_retries"])
    """)
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert "LIMIT" in result.stdout, result.stdout + result.stderr
    assert "too many open files (EMFILE): this process may open" in result.stdout and "ulimit -n" in result.stdout
    assert "RETRIES 0\n" in result.stdout


def _private_kb() -> int:
    with open("/proc/self/smaps_rollup") as rollup:
        return sum(int(line.split()[1]) for line in rollup if line.startswith(("Private_Clean:", "Private_Dirty:")))


class _CollectOnce:
    """An image transform that, in the worker, measures the private memory a full garbage
    collection costs (once) and writes it to ``path``."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self, frames):
        if not self.path.exists():
            import gc

            before = _private_kb()
            gc.collect()
            self.path.write_text(str(_private_kb() - before))
        return frames


def test_a_worker_does_not_copy_the_training_process_heap(mixture, tmp_path):
    """Forked workers inherit the training process's objects; a full collection in a worker
    would copy every page of them (copy-on-write). The reader freezes them in its workers."""
    heap = [[i, str(i)] for i in range(400_000)]  # ~60 MB of small objects in this process
    grown = tmp_path / "grown_kb"
    dataset = MixtureDataset(str(mixture / "mixture.json"), return_uint8=True, image_transforms=_CollectOnce(grown))
    next(iter(torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=1)))
    assert len(heap) == 400_000
    assert int(grown.read_text()) < 10_000, f"a collection in the worker copied {int(grown.read_text())} KB"


def test_an_honest_compiled_index_of_300k_episodes_opens(tmp_path):
    """Issue 31: the compiled episodes table of ~213k honest episodes or more was refused
    (the worst case estimated at ~314 bytes per episode, over max(64 MB, 64 x the file)),
    because such a table compresses far better than 64x. The budget now derives from the
    rows: what an honest table of that many rows can be; the writer checks the same."""
    import pyarrow as pa

    from lerobot_shards.core.format import EPISODES_SCHEMA, table_budget
    from lerobot_shards.core.format.parquet import Budget, read_bounded
    from lerobot_shards.packer.mixture import table_to_parquet

    rows = 300_000
    per_group = 100  # episodes of one row group share its digest
    index = np.arange(rows, dtype=np.int64)
    rng = np.random.default_rng(0)
    groups = [rng.bytes(32) for _ in range(rows // per_group + 1)]
    columns = {
        "dataset": pa.array(index // 106, pa.int32()),
        "episode_index": pa.array(index % 106),
        "length": pa.array(np.full(rows, 50)),
        "dataset_from_index": pa.array((index % 106) * 50),
        "shard_row": pa.array(index // 106),
        "row_start": pa.array((index % 100) * 50),
        "row_group": pa.array(np.zeros(rows), pa.int32()),
        "row_group_offset": pa.array(np.full(rows, 4)),
        "row_group_bytes": pa.array(np.full(rows, 90_000)),
        "row_group_sha256": pa.array([groups[i // per_group] for i in range(rows)], pa.binary(32)),
        "row_group_episodes": pa.array(np.full(rows, per_group), pa.int32()),
        "row_group_rows": pa.array(np.full(rows, 5_000)),
        "anchors": pa.array(np.full(rows, 50)),
    }
    empty = pa.array([[]] * rows, pa.list_(pa.int64()))
    for name in ("member_offset", "member_size", "member_frames"):
        columns[name] = empty
    columns["member_codec"] = pa.array([[]] * rows, pa.list_(pa.string()))
    columns["member_sha256"] = pa.array([[]] * rows, pa.list_(pa.binary(32)))
    data = table_to_parquet(pa.table(columns, schema=EPISODES_SCHEMA))
    budget = table_budget("episodes", rows=rows, members=0, cameras=0, encoded=len(data))
    table = read_bounded(data, where="episodes.parquet", rows=rows, max_rows=rows, budget=budget)
    assert table.num_rows == rows
    # The expansion budget alone refused it.
    with pytest.raises(FormatError, match="decodes to up to .* bytes from .*; at most .* are allowed"):
        read_bounded(
            data, where="episodes.parquet", rows=rows, max_rows=rows, budget=Budget(values_per_row=budget.values_per_row)
        )
