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

from lerobot_shards import MixtureDataset, PackedDataset
from lerobot_shards.core.errors import FormatError
from lerobot_shards.core.format import VIDEO_CODECS, EpisodeTable, hex_digests, video_column
from lerobot_shards.core.pack import CatalogPack, EpisodeCatalog, PackedIndex
from lerobot_shards.core.storage import Storage
from lerobot_shards.testing import write_tabular_pack
from tests.packed_fixtures import *
from tests.work_counter import lines_executed

FEW, MANY = 100, 10_000
# Python lines allowed per extra episode (the per-episode code this replaced ran ~60). The
# parquet page walker is left out of the count: it runs per page of the index files (20,000
# rows a page), a cost of their bytes that tests/core/test_parquet_bounds.py covers.
PER_EPISODE = 0.05
PAGE_WALKER = ("lerobot_shards/core/format/parquet/",)


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
        info = CatalogPack.opened(root.name, str(root), index)
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
            row["episode_index"],
            row["shard"],
            row["length"],
            row["row_start"],
        )
        assert (entry.row_group.index, entry.row_group.offset, entry.row_group.sha256) == (
            row["row_group"],
            row["row_group_offset"],
            row["row_group_sha256"],
        )
        assert entry.tasks == tuple(row["tasks"])
        for key, member in entry.cameras.items():
            assert (member.offset, member.size, member.frames, member.codec, member.sha256) == tuple(
                row[video_column(key, name)] for name in ("offset", "size", "frames", "codec", "sha256")
            ), (position, key)
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
    from lerobot_shards import create_mixture

    root = tmp_path / "mix"
    names = {f"ds-{n}": str(path) for n, path in sorted(sized_packs.items())}
    create_mixture(str(root), names=names, workers=2)
    compiled = MixtureDataset(str(root / "mixture.json"), allow_remote_paths=True).catalog
    direct = []
    for name, path in names.items():
        index = PackedIndex(Storage(path))
        direct.append(
            (
                CatalogPack(
                    name=name,
                    root=path,
                    manifest_sha256=index.manifest_sha256,
                    fps=index.manifest.fps,
                    features=index.manifest.features,
                    video_keys=(),
                    tolerance_s=index.manifest.tolerance_s,
                ),
                index,
                {0: "synthetic"},
            )
        )
    built = EpisodeCatalog.from_packs(direct)
    for name in (
        "episode_index",
        "length",
        "from_index",
        "row_start",
        "row_group",
        "row_group_offset",
        "row_group_sha256",
        "row_group_episodes",
        "row_group_rows",
        "anchor_counts",
        "member_start",
        "shard_tar_sha256",
        "shard_footer_sha256",
    ):
        assert np.array_equal(getattr(compiled, name), getattr(built, name)), name
    assert len(VIDEO_CODECS) < 128  # member codecs are int8 indices


def _walked_bytes(table: pa.Table, values_per_row: dict[str, int]) -> int:
    """What the bounded reader's page walker counts for the values of ``table`` (written
    without dictionaries: a dictionary page is counted on top of the values it encodes, which
    the budgets' expansion term covers, and would hide the per-row figure)."""
    import io

    from lerobot_shards.core.format.parquet import Budget, file_cost

    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd", use_dictionary=False)
    data = buffer.getvalue()
    metadata = pq.ParquetFile(pa.BufferReader(data)).metadata
    return file_cost(metadata, memoryview(data), budget=Budget(max_bytes=1 << 62, values_per_row=values_per_row), where="t")[0]


def _honest_compiled_episodes(rows: int, cameras: int) -> pa.Table:
    """A compiled episodes table as ``mixture create`` writes it, with nothing to compress:
    every value distinct, random digests, the longest codec name the format has."""
    from lerobot_shards.core.format import EPISODES_SCHEMA

    rng = np.random.default_rng(rows + cameras)
    ints = lambda: pa.array(rng.integers(0, 1 << 62, rows))  # noqa: E731

    def members(values: pa.Array) -> pa.Array:
        return pa.ListArray.from_arrays(pa.array(np.arange(rows + 1, dtype=np.int32) * cameras), values)

    codec = max(VIDEO_CODECS, key=len)
    columns = {field.name: ints() for field in EPISODES_SCHEMA if pa.types.is_int64(field.type)}
    columns.update(
        {name: pa.array(rng.integers(0, 1 << 30, rows), pa.int32()) for name in ("dataset", "row_group", "row_group_episodes")}
    )
    columns["row_group_sha256"] = pa.array([rng.bytes(32) for _ in range(rows)], pa.binary(32))
    for name in ("member_offset", "member_size", "member_frames"):
        columns[name] = members(pa.array(rng.integers(0, 1 << 62, rows * cameras)))
    columns["member_codec"] = members(pa.array([codec] * (rows * cameras), pa.string()))
    columns["member_sha256"] = members(pa.array([rng.bytes(32) for _ in range(rows * cameras)], pa.binary(32)))
    return pa.table(columns, schema=EPISODES_SCHEMA)


def test_the_largest_honest_compiled_mixture_the_format_allows_opens():
    """The bound on a compiled episodes table derives from what an honest one is: measured
    here per episode and per member with the reader's own page walker on a table with nothing
    to compress, it is within the budget's per-row figures, and the budget at the format's
    maxima is exactly the honest table there (not clamped by another limit). By linearity the
    largest mixture the format allows opens; a mixture file claiming more is refused by name."""
    from lerobot_shards.core.format import (
        EPISODE_ROW_BYTES,
        MAX_DECODED_BYTES,
        MAX_EPISODES_TABLE_BYTES,
        MAX_MIXTURE_EPISODES,
        MAX_MIXTURE_MEMBERS,
        MEMBER_BYTES,
        table_budget,
    )
    from lerobot_shards.core.format.parquet import read_bounded

    rows = 4_000
    lists = dict.fromkeys(("member_offset", "member_size", "member_frames", "member_codec", "member_sha256"), 4)
    no_members = _walked_bytes(_honest_compiled_episodes(rows, 0), lists)
    four = _walked_bytes(_honest_compiled_episodes(rows, 4), lists)
    assert no_members <= rows * (EPISODE_ROW_BYTES + MEMBER_BYTES)  # an empty list still decodes one entry
    assert four <= rows * EPISODE_ROW_BYTES + 4 * rows * MEMBER_BYTES
    assert four - no_members >= 0.8 * 3 * rows * MEMBER_BYTES, "the per-member figure should be tight, not a guess"
    assert no_members >= 0.8 * rows * EPISODE_ROW_BYTES, "the per-episode figure should be tight"
    # What a reader applies: this table opens within it.
    from lerobot_shards.packer.mixture import table_to_parquet

    data = table_to_parquet(_honest_compiled_episodes(rows, 4))
    budget = table_budget("episodes", rows=rows, members=4 * rows, cameras=4, encoded=len(data))
    assert read_bounded(data, where="t", rows=rows, max_rows=rows, budget=budget).num_rows == rows
    # At the maxima the budget is the honest table there (nothing else clamps it); dictionary
    # pages come on top, one writer-sized page per column chunk, never more than the expansion
    # budget of the bytes read.
    at_max = table_budget("episodes", rows=MAX_MIXTURE_EPISODES, members=MAX_MIXTURE_MEMBERS, cameras=4, encoded=1 << 30)
    honest = MAX_MIXTURE_EPISODES * EPISODE_ROW_BYTES + MAX_MIXTURE_MEMBERS * MEMBER_BYTES
    assert at_max.max_bytes == honest == MAX_EPISODES_TABLE_BYTES and MAX_DECODED_BYTES < honest


def test_the_largest_honest_pack_index_the_format_allows_opens(tmp_path):
    """The same for a pack's episodes index: a real one (one camera, every value its own),
    measured by the page walker without its task lists, is within the per-row figures of
    ``episodes_index_budget``, whose honest part at ``MAX_DATASET_EPISODES`` and
    ``MAX_DATASET_MEMBERS`` is ``MAX_EPISODES_INDEX_BYTES``."""
    from lerobot_shards.core.format import MAX_DATASET_EPISODES, MAX_DATASET_MEMBERS, indexes
    from lerobot_shards.testing import tiny_member

    episodes = 3_000
    write_tabular_pack(tmp_path / "p", episodes=episodes, length=2, seed=3, camera=("cam", tiny_member(2), 16, 16))
    table = pq.read_table(tmp_path / "p" / "index" / "episodes.parquet").drop(["tasks"])
    walked = _walked_bytes(table, {})
    assert walked <= episodes * (indexes._EPISODE_ROW_BYTES + indexes._MEMBER_ROW_BYTES)
    assert walked >= 0.8 * episodes * (indexes._EPISODE_ROW_BYTES + indexes._MEMBER_ROW_BYTES), "figures should be tight"
    assert len(PackedDataset(str(tmp_path / "p")).index.episodes) == episodes
    at_max = indexes.episodes_index_budget(["cam"] * 4, rows=MAX_DATASET_EPISODES, encoded=0).max_bytes
    honest = MAX_DATASET_EPISODES * indexes._EPISODE_ROW_BYTES + MAX_DATASET_MEMBERS * indexes._MEMBER_ROW_BYTES
    tasks = MAX_DATASET_EPISODES * indexes.INDEX_TASKS_PER_EPISODE * indexes.value_bytes(0, 1, strings=True)
    assert honest == indexes.MAX_EPISODES_INDEX_BYTES and at_max == honest + tasks


def test_a_manifest_claiming_more_members_than_a_dataset_may_hold_is_refused_by_name(tmp_path):
    """2,000,000 episodes (the episode bound) x 5 cameras: 10M members, beyond what an episodes
    index may be sized for; refused from the manifest, before any index byte is read."""
    from lerobot_shards.testing import tiny_member
    from tests.pack_tamper import edit_manifest

    root = tmp_path / "p"
    write_tabular_pack(root, episodes=2, length=2, seed=5, camera=("cam", tiny_member(2), 16, 16))

    def claim(manifest: dict) -> None:
        for k in range(2, 6):
            manifest["features"][f"cam{k}"] = manifest["features"]["cam"]
        manifest["video_keys"] = ["cam"] + [f"cam{k}" for k in range(2, 6)]
        manifest["shards"][0]["num_episodes"] = manifest["totals"]["episodes"] = 2_000_000

    edit_manifest(root, claim)
    with pytest.raises(
        FormatError, match="2000000 episodes x 5 cameras = 10000000 members, more than the 8000000 a dataset may hold"
    ):
        PackedDataset(str(root))
