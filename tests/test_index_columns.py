"""The episodes index as columns (issue 31): opening a pack, selecting episodes and anchors,
and building a catalog cost no Python step per episode.

Counted, never timed: the Python lines a call executes (``tests.work_counter``) for a pack of
few episodes and one of a hundred times more must be (almost) the same; what differs is numpy's
work. And the columns must say exactly what the old per-episode entries said: checked against
the index file's own rows on a real packed dataset with cameras and several shards.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from packer import write_tabular_pack
from reader import MixtureDataset, PackedDataset
from reader.errors import FormatError
from reader.fetch.catalog import CatalogDataset, EpisodeCatalog
from reader.fetch.packed_index import PackedIndex
from reader.format import VIDEO_CODECS, EpisodeTable, video_column
from reader.format.indexes import hex_digests
from reader.storage import Storage
from tests.packed_fixtures import *  # noqa: F401,F403
from tests.work_counter import lines_executed

FEW, MANY = 100, 10_000
# Python lines allowed per extra episode (the per-episode code this replaced ran ~60). The
# parquet page walker is left out of the count: it runs per page of the index files (20,000
# rows a page), a cost of their bytes that tests/test_parquet_bounds.py covers.
PER_EPISODE = 0.05
PAGE_WALKER = ("reader/format/parquet/",)


@pytest.fixture(scope="module")
def sized_packs(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("sized")
    for n in (FEW, MANY):
        write_tabular_pack(root / f"pack-{n}", episodes=n, length=3, seed=n)
    return {n: root / f"pack-{n}" for n in (FEW, MANY)}


def _lines(function, *args, **kwargs) -> int:
    function(*args, **kwargs)  # first call: imports and caches are not what is counted
    return lines_executed(function, *args, skip=PAGE_WALKER, **kwargs)[1]


def test_opening_a_pack_costs_no_python_per_episode(sized_packs):
    few = _lines(PackedDataset, str(sized_packs[FEW]))
    many = _lines(PackedDataset, str(sized_packs[MANY]))
    assert many - few < PER_EPISODE * (MANY - FEW), (few, many)


def test_selecting_episodes_and_anchors_costs_no_python_per_episode(sized_packs):
    def open_selected(root: Path, n: int) -> PackedDataset:
        return PackedDataset(str(root), episodes=list(range(0, n, 2)), where="frame_index <> 1")

    few = _lines(open_selected, sized_packs[FEW], FEW)
    many = _lines(open_selected, sized_packs[MANY], MANY)
    assert many - few < PER_EPISODE * (MANY - FEW), (few, many)
    dataset = open_selected(sized_packs[MANY], MANY)
    assert dataset.index.episodes.episode_index.tolist() == list(range(0, MANY, 2))
    assert dataset.num_anchors == MANY // 2 * 2
    # Anchors map to frames 0 and 2 of each selected episode, through the catalog's runs too.
    index = dataset.index
    assert index.anchor_frame(7, np.array([0, 1])).tolist() == [0, 2]
    assert dataset.catalog.anchor_frames(7, np.array([0, 1])).tolist() == [0, 2]
    assert dataset.catalog.run_start[-1] == 2 * (MANY // 2)  # two runs ([0, 1) and [2, 3)) per episode


def test_a_catalog_of_packs_costs_python_per_pack_not_per_episode(sized_packs):
    def catalog_of(root: Path) -> EpisodeCatalog:
        storage = Storage(str(root))
        index = PackedIndex(storage)
        info = CatalogDataset(name=root.name, root=str(root), manifest_sha256=index.manifest_sha256, fps=index.manifest.fps,
                              features=index.manifest.features, video_keys=tuple(index.manifest.video_keys),
                              tolerance_s=index.manifest.tolerance_s)
        return EpisodeCatalog.from_packs([(info, index, {0: "synthetic"})] * 3)

    few = _lines(catalog_of, sized_packs[FEW])
    many = _lines(catalog_of, sized_packs[MANY])
    assert many - few < PER_EPISODE * (MANY - FEW), (few, many)
    catalog = catalog_of(sized_packs[MANY])
    assert catalog.num_episodes == 3 * MANY
    assert catalog.row_group_rows.min() >= 3 and (catalog.row_group_episodes * 3 == catalog.row_group_rows).all()


def test_columns_say_what_the_index_file_says(packed_copy):
    """Every column against the file's own rows, on a real pack (cameras, several shards)."""
    storage = Storage(str(packed_copy))
    table = PackedIndex(storage, with_tasks=True).all_episodes
    rows = pq.read_table(packed_copy / "index" / "episodes.parquet").to_pylist()
    assert isinstance(table, EpisodeTable) and len(table) == len(rows) > 1
    assert len(set(table.shard.tolist())) > 1, "the fixture should span shards"
    for position, row in enumerate(rows):
        entry = table[position]
        assert (entry.episode_index, entry.shard, entry.length, entry.row_start) == (
            row["episode_index"], row["shard"], row["length"], row["row_start"])
        assert (entry.row_group.index, entry.row_group.offset, entry.row_group.sha256) == (
            row["row_group"], row["row_group_offset"], row["row_group_sha256"])
        assert entry.tasks == tuple(row["tasks"])
        for key, member in entry.cameras.items():
            assert (member.offset, member.size, member.frames, member.codec, member.sha256) == tuple(
                row[video_column(key, name)] for name in ("offset", "size", "frames", "codec", "sha256")), (position, key)
    # Sequence behaviour: negative positions, slices, iteration, positions of episode indices.
    assert table[-1].episode_index == rows[-1]["episode_index"]
    assert [e.episode_index for e in table[1:3]] == [r["episode_index"] for r in rows[1:3]]
    assert [e.episode_index for e in table] == [r["episode_index"] for r in rows]
    with pytest.raises(IndexError):
        table[len(rows)]
    assert table.positions(np.array([rows[2]["episode_index"], 10**9])).tolist() == [2, -1]
    for shard in set(table.shard.tolist()):
        first, stop = table.shard_range(shard)
        assert [r["shard"] for r in rows[first:stop]] == [shard] * (stop - first)
        assert all(r["shard"] != shard for r in rows[:first] + rows[stop:])
    # Row-group totals equal a plain count over the rows.
    episodes, lines = table.row_group_totals()
    for position, row in enumerate(rows):
        mates = [r for r in rows if (r["shard"], r["row_group"]) == (row["shard"], row["row_group"])]
        assert (episodes[position], lines[position]) == (len(mates), sum(r["length"] for r in mates))
    with pytest.raises(ValueError):
        table.length[0] = 5  # read-only columns


def test_hex_digests_refuse_what_is_not_a_lowercase_digest():
    good = "0123456789abcdef" * 4
    digests = hex_digests(pa.array([good, "f" * 64]), where="t")
    assert digests.shape == (2, 32) and bytes(digests[0]) == bytes.fromhex(good) and bytes(digests[1]) == b"\xff" * 32
    sliced = pa.array(["x" * 64, good])[1:]  # an Arrow slice: offsets do not start at 0
    assert bytes(hex_digests(sliced, where="t")[0]).hex() == good
    for bad in ("A" * 64, "0" * 63, "g" * 64, "0" * 65, " " + "0" * 63):
        with pytest.raises(FormatError, match="t row 1: not a sha256 hex digest"):
            hex_digests(pa.array([good, bad]), where="t")


def test_a_compiled_mixture_opens_columnar(sized_packs, tmp_path):
    """The same packs through ``mixture create``: the catalog read from the compiled tables
    equals the one built from the opened packs."""
    from packer import create_mixture

    root = tmp_path / "mix"
    names = {f"ds-{n}": str(path) for n, path in sorted(sized_packs.items())}
    create_mixture(str(root), names=names, workers=2)
    compiled = MixtureDataset(str(root / "mixture.json"), allow_remote_paths=True).catalog
    direct = []
    for name, path in names.items():
        index = PackedIndex(Storage(path))
        direct.append((CatalogDataset(name=name, root=path, manifest_sha256=index.manifest_sha256, fps=index.manifest.fps,
                                      features=index.manifest.features, video_keys=(), tolerance_s=index.manifest.tolerance_s),
                       index, {0: "synthetic"}))
    built = EpisodeCatalog.from_packs(direct)
    for name in ("episode_index", "length", "from_index", "row_start", "row_group", "row_group_offset", "row_group_sha256",
                 "row_group_episodes", "row_group_rows", "anchor_counts", "member_start", "shard_tar_sha256", "shard_footer_sha256"):
        assert np.array_equal(getattr(compiled, name), getattr(built, name)), name
    assert len(VIDEO_CODECS) < 128  # member codecs are int8 indices
