"""Issue 21's findings, one test each: small hostile files that used to cost gigabytes.

Each test builds its hostile file the way the review did (re-sealed packs: every digest
recomputed, no pin; or a hostile source), runs the entry points in a child process and
asserts the named error (or the right result) and the child's peak memory under
``HOSTILE_PEAK_BYTES`` (docs/SECURITY.md, "Bounds"). Findings 1 (planted shards) and 8-9
(mp4 members) have their own files: tests/packer/test_pack_journal.py, tests/core/test_mp4_bounds.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards import SourceError, pack_dataset
from lerobot_shards.cli import main as cli, printable
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    MAX_EPISODE_FRAMES,
    MAX_FEATURE_ELEMENTS,
    MAX_TASKS,
    SAMPLES_INDEX_PATH,
    shard_parquet_path,
)
from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured
from tests.pack_tamper import edit_episodes_index, reseal, seal_files
from tests.packed_fixtures import *
from tests.packed_fixtures import PACK_WINDOWS, SHARD_SIZE_MB, copy_source, edit_episodes_metadata

# Every entry point on one pack, each caught on its own; the child prints what each said.
ENTRY_POINTS = """
import json, sys
from click.testing import CliRunner
from lerobot_shards.cli import main
root, output = sys.argv[1], sys.argv[2]
said = {}
try:
    from lerobot_shards import PackedDataset
    next(iter(PackedDataset(root, shuffle=False, return_uint8=True, prefetch_episodes=0)))
    said["reader"] = "ok"
except Exception as err:
    said["reader"] = type(err).__name__ + ": " + str(err)
for name, args in [("info", ["info", root]), ("verify", ["verify", root]), ("sql", ["sql", root, "SELECT count(*) FROM episodes"]),
                   ("preview", ["preview", root, "-o", output])]:
    result = CliRunner().invoke(main, args)
    traceback = result.exception is not None and not isinstance(result.exception, SystemExit)
    said[name] = {"exit": result.exit_code, "output": result.output[-1500:], "traceback": traceback}
print("SAID", json.dumps(said))
"""


def _run_entry_points(root: Path, tmp_path: Path) -> dict:
    measured = run_measured(ENTRY_POINTS, str(root), str(tmp_path / "preview.html"))
    said = next((json.loads(line[5:]) for line in measured.stdout.splitlines() if line.startswith("SAID ")), None)
    assert said is not None, f"the child did not finish: {measured.outcome}\n{measured.stderr[-3000:]}"
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, f"peak {measured.peak_bytes / 2**20:.0f} MiB: {said}"
    print(f"peak {measured.peak_bytes / 2**20:.0f} MiB; reader: {said['reader'][:300]}")
    for name in ("info", "verify", "sql", "preview"):
        assert not said[name]["traceback"], f"{name} crashed: {said[name]}"
    return said


def _refused_everywhere(said: dict, file: str, *, reader: str = "FormatError", also_ok: tuple[str, ...] = ()) -> None:
    """The reader raised a named error about ``file``; every command failed naming it (or
    is in ``also_ok``: a command that never reads ``file``)."""
    assert said["reader"].startswith(f"{reader}: ") or said["reader"].split(":")[0].endswith("Error"), said["reader"]
    assert file in said["reader"], said["reader"]
    for name in ("verify", "sql", "preview", "info"):
        if name in also_ok and said[name]["exit"] == 0:
            continue
        assert said[name]["exit"] != 0 and file in said[name]["output"], (name, said[name])


def _copy(packed_copy: Path, tmp_path: Path) -> Path:
    root = tmp_path / "pack"
    shutil.copytree(packed_copy, root)
    return root


def _repeated_strings(rows: int, per_row: int, text: str) -> pa.Array:
    """``rows`` lists of ``per_row`` copies of ``text``: dictionary-encoded, so a few KB on disk
    and about ``rows x per_row x 4`` bytes here."""
    indices = pa.array(np.zeros(rows * per_row, np.int32))
    values = pa.DictionaryArray.from_arrays(indices, pa.array([text]))
    offsets = pa.array(np.arange(rows + 1, dtype=np.int32) * per_row)
    return pa.ListArray.from_arrays(offsets, values)


# -- finding 2: a tasks list of 3M copies per episode in index/episodes.parquet ------------------
def test_2_an_episodes_index_task_bomb_is_refused_before_decoding(packed_copy, tmp_path):
    root = _copy(packed_copy, tmp_path)
    table = pq.read_table(root / EPISODES_INDEX_PATH)
    bomb = _repeated_strings(table.num_rows, 3_000_000, "pick up the cube")
    table = table.set_column(table.schema.get_field_index("tasks"), "tasks", bomb)
    pq.write_table(table, root / EPISODES_INDEX_PATH, use_dictionary=True)
    assert (root / EPISODES_INDEX_PATH).stat().st_size < 200_000
    seal_files(root)
    said = _run_entry_points(root, tmp_path)
    _refused_everywhere(said, EPISODES_INDEX_PATH, also_ok=("info", "sql"))


# -- finding 3: meta/tasks.parquet whose rows expand to gigabytes --------------------------------
@pytest.mark.parametrize(("rows", "text_bytes"), [(MAX_TASKS + 1, 8), (1_000_000, 60_000)])
def test_3_a_tasks_parquet_bomb_is_refused_by_rows_or_decoded_bytes(packed_copy, tmp_path, rows, text_bytes):
    root = _copy(packed_copy, tmp_path)
    tasks = pa.table(
        {
            "task": pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array(["x" * text_bytes])),
            "task_index": pa.array(np.zeros(rows, np.int64)),
        }
    )
    # Without the Arrow schema the strings read back as plain strings: what the bound must catch.
    pq.write_table(tasks, root / "meta" / "tasks.parquet", use_dictionary=True, store_schema=False)
    seal_files(root)
    said = _run_entry_points(root, tmp_path)
    _refused_everywhere(said, "meta/tasks.parquet", also_ok=("info", "sql", "preview"))  # those never read tasks


# -- finding 4: a shard parquet list column repeating one value 1M times per row -----------------
def test_4_a_list_column_repeating_one_value_is_refused_by_the_feature_shape(packed_copy, tmp_path):
    root = _copy(packed_copy, tmp_path)
    path = root / shard_parquet_path(0)
    original = pq.ParquetFile(path)
    per_row = 1_000_000
    with pq.ParquetWriter(
        path.with_suffix(".tmp"),
        original.schema_arrow.set(original.schema_arrow.get_field_index("action"), pa.field("action", pa.list_(pa.float32()))),
        compression="zstd",
        write_page_index=True,
    ) as writer:
        for group in range(original.metadata.num_row_groups):
            rows = original.read_row_group(group)
            values = pa.array(np.full(rows.num_rows * per_row, 666.0, np.float32))
            action = pa.ListArray.from_arrays(pa.array(np.arange(rows.num_rows + 1, dtype=np.int32) * per_row), values)
            writer.write_table(rows.set_column(rows.schema.get_field_index("action"), "action", action))
    path.with_suffix(".tmp").replace(path)
    assert path.stat().st_size < 2_000_000
    reseal(root)
    said = _run_entry_points(root, tmp_path)
    assert said["reader"].startswith("FormatError: ") and "shard-000000.parquet" in said["reader"], said["reader"]
    assert "action" in said["reader"]
    assert said["verify"]["exit"] != 0 and "shard-000000.parquet" in said["verify"]["output"], said["verify"]


# -- finding 5: index/samples.parquet of millions of rows for a 141-frame pack ------------------
def test_5_a_samples_index_of_millions_of_rows_is_refused_by_its_row_count(packed_copy, tmp_path):
    root = _copy(packed_copy, tmp_path)
    samples = pq.read_table(root / SAMPLES_INDEX_PATH)
    frames = samples.num_rows
    bomb = samples.take(pa.array(np.zeros(3_000_000, np.int64)))
    pq.write_table(bomb, root / SAMPLES_INDEX_PATH, compression="zstd")
    seal_files(root)
    said = _run_entry_points(root, tmp_path)
    assert f"3000000 rows, the manifest says {frames} frames" in said["verify"]["output"], said["verify"]
    assert said["preview"]["exit"] != 0 and SAMPLES_INDEX_PATH in said["preview"]["output"]
    # A reader with where= and `mixture create --where` read the samples index: refused by count.
    measured = run_measured(
        "import sys\nfrom lerobot_shards import PackedDataset\nPackedDataset(sys.argv[1], where='frame_index >= 0')", str(root)
    )
    assert SAMPLES_INDEX_PATH in measured.outcome and "3000000 rows" in measured.outcome, measured
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES
    mixture = tmp_path / "mix"
    mixture.mkdir()
    shutil.move(str(root), mixture / "hostile")
    shutil.copytree(packed_copy, mixture / "honest")
    result = CliRunner().invoke(cli, ["mixture", "create", str(mixture), "--where", "frame_index >= 0", "--allow-partial"])
    assert result.exit_code == 0, result.output
    spec = json.loads((mixture / "mixture.json").read_text())
    assert [d["name"] for d in spec["datasets"]] == ["honest"]
    assert "hostile" in result.output and "3000000 rows" in result.output


# -- finding 6: a source declaring a tabular feature of 200M values ------------------------------
def test_6_a_source_feature_shape_beyond_the_bound_or_unlike_the_data_is_refused(sample_source, tmp_path):
    source = copy_source(sample_source, tmp_path)
    info_path = source / "meta" / "info.json"
    honest = json.loads(info_path.read_text())
    for shape, message in [
        ([200_000_000], rf"shape must be a list of 1 to 8 integers in \[0, {MAX_FEATURE_ELEMENTS}\], found \[200000000\]"),
        ([7], r"column action holds \[6\] values per frame; meta/info.json declares shape \[7\]"),
    ]:
        info = json.loads(json.dumps(honest))
        info["features"]["action"]["shape"] = shape
        info_path.write_text(json.dumps(info))
        with pytest.raises(SourceError, match=message):
            pack_dataset(str(source), str(tmp_path / f"dst{shape[0]}"), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)
        assert not list((tmp_path / f"dst{shape[0]}").glob("shards/*.json"))


# -- finding 7: an episode claiming 1e8 (or 1e12) frames ---------------------------------------
@pytest.mark.parametrize("length", [100_000_000, 10**12])
def test_7_an_episode_length_beyond_the_bound_is_refused_before_planning(packed_copy, tmp_path, length):
    root = _copy(packed_copy, tmp_path)
    edit_episodes_index(root, lambda rows: rows[0].update(length=length))
    said = _run_entry_points(root, tmp_path)
    assert said["reader"].startswith("FormatError: ") and EPISODES_INDEX_PATH in said["reader"], said["reader"]
    assert f"at most {MAX_EPISODE_FRAMES}" in said["reader"] or "manifest" in said["reader"], said["reader"]
    assert said["verify"]["exit"] != 0


# -- finding 10: a source whose episodes metadata expands to gigabytes --------------------------
def test_10_a_source_episodes_metadata_bomb_is_refused_and_nothing_is_written(sample_source, tmp_path):
    source = copy_source(sample_source, tmp_path)
    for path in sorted((source / "meta" / "episodes").glob("*/*.parquet")):
        table = pq.read_table(path)
        table = table.set_column(
            table.schema.get_field_index("tasks"), "tasks", _repeated_strings(table.num_rows, 3_000_000, "x" * 40)
        )
        pq.write_table(table, path, use_dictionary=True)
    measured = run_measured(
        "import sys\nfrom lerobot_shards import pack_dataset\npack_dataset(sys.argv[1], sys.argv[2])",
        str(source),
        str(tmp_path / "dst"),
    )
    assert measured.outcome.startswith("SourceError: ") and "cannot read episodes metadata: column tasks" in measured.outcome, (
        measured
    )
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, measured
    assert not (tmp_path / "dst").exists() or not list((tmp_path / "dst").rglob("shard-*"))


# -- finding 11: a bare NaN in manifest.json --------------------------------------------------------
def test_11_nan_in_the_manifest_is_a_one_line_error_everywhere(packed_copy, tmp_path):
    root = _copy(packed_copy, tmp_path)
    manifest = (root / "manifest.json").read_text()
    (root / "manifest.json").write_text(manifest.replace('"tolerance_s": 0.0001', '"tolerance_s": NaN', 1))
    assert "NaN" in (root / "manifest.json").read_text()
    for args in (
        ["info", str(root)],
        ["verify", str(root)],
        ["sql", str(root), "SELECT 1"],
        ["preview", str(root), "-o", str(tmp_path / "p.html")],
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code != 0 and "manifest.json" in result.output and "NaN" in result.output, (args, result.output)
        assert isinstance(result.exception, SystemExit), (args, result.exception)


# -- finding 12: mixture create on a hostile failure record and a badly named pack ---------------
def test_12_mixture_create_reports_bad_records_and_names_instead_of_crashing(packed_copy, tmp_path):
    root = tmp_path / "mix"
    root.mkdir()
    shutil.copytree(packed_copy, root / "good")
    shutil.copytree(packed_copy, root / "bad name")
    (root / "_failures").mkdir()
    (root / "_failures" / "x.json").write_text("[1, 2, 3]")
    for command in (["mixture", "create", str(root), "--allow-partial"], ["mixture", "report", str(root)]):
        result = CliRunner().invoke(cli, command)
        assert not (result.exception and not isinstance(result.exception, SystemExit)), result.exception
        assert "unreadable failure record" in result.output, result.output
    spec = json.loads((root / "mixture.json").read_text())
    assert [d["name"] for d in spec["datasets"]] == ["good"]
    result = CliRunner().invoke(cli, ["mixture", "create", str(root)])
    assert "'bad name'" in result.output or "bad name" in result.output


# -- finding 13: inconsistent sources fail the pack with a named error -------------------------
def _edit_source_episodes(source: Path, edit) -> None:
    edit_episodes_metadata(source, edit)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda row: row.update({k: float("inf") for k in row if k.endswith("/from_timestamp")}),
            r"from_timestamp and to_timestamp must be finite seconds",
        ),
        (
            lambda row: row.update(
                dataset_from_index=row["dataset_from_index"] + 1, dataset_to_index=row["dataset_to_index"] + 1
            ),
            r"rows have index \d+\.\.\d+; the episodes metadata says dataset_from_index",
        ),
    ],
)
def test_13_inconsistent_episodes_metadata_fails_the_pack_naming_it(sample_source, tmp_path, edit, message):
    source = copy_source(sample_source, tmp_path)
    _edit_source_episodes(source, edit)
    with pytest.raises(SourceError, match=message):
        pack_dataset(str(source), str(tmp_path / "dst"), windows=PACK_WINDOWS, shard_size_mb=SHARD_SIZE_MB)


def test_13_a_video_shape_no_reader_accepts_fails_the_pack(sample_source, tmp_path):
    source = copy_source(sample_source, tmp_path)
    info_path = source / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    key = next(k for k, f in info["features"].items() if f["dtype"] == "video")
    info["features"][key]["shape"] = [30000, 30000, 3]
    info_path.write_text(json.dumps(info))
    with pytest.raises(SourceError, match=r"a 30000x30000 frame is outside this format's limits \(sides 1 to 16384"):
        pack_dataset(str(source), str(tmp_path / "dst"))


# -- printable: newlines and bidi controls from data do not reach the terminal ---------------------
def test_printable_escapes_newlines_and_bidi_controls():
    assert printable("a\nb\tc") == "a\\x0ab\\x09c"
    assert printable("evil\u202etxt.exe\u200b") == "evil\\u202etxt.exe\\u200b"
    assert printable("plain ascii, ünïcode") == "plain ascii, ünïcode"


def test_security_md_lists_every_bound_with_its_value():
    """docs/SECURITY.md's table names every constant of lerobot_shards/core/format/limits.py and its value."""
    import re

    from lerobot_shards.core.format import limits

    text = (Path(__file__).resolve().parents[2] / "docs" / "SECURITY.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([A-Z0-9_]+)` \| ([^|]+) \|", text, re.M)}
    names = [n for n in dir(limits) if n.isupper()]
    assert sorted(rows) == sorted(names)
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for name in names:
        shown = rows[name].split("(")[0].strip()
        number, _, unit = shown.partition(" ")
        assert int(number.replace(",", "")) * units.get(unit, 1) == getattr(limits, name), (name, shown)
