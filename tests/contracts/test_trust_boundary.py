"""What a dataset, pack or mixture says about itself is parsed once, typed and cross-checked
(issue 48): each attack of the review on the surfaces the layouts work added, run as the
attacker ran it, now gets a named error at ``check``/``pack``/open, and each layout row it
found (pictures with all-null paths, keys LeRobot accepts, videos longer than their rows,
episodes that start mid-GOP) packs and reads back as LeRobot reads it.

The field-by-field fuzzer over the same boundary is tests/contracts/test_field_fuzz.py.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from lerobot_shards import (
    EpisodeDataError,
    FormatError,
    HarmonizeError,
    MixtureDataset,
    MixtureSpecError,
    PackedDataset,
    SourceError,
    pack_dataset,
    verify,
)
from lerobot_shards.cli import main as cli
from lerobot_shards.core.format import CameraGeometry, parse_feature
from lerobot_shards.reader.decode import decode_image
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured
from tests.pack_tamper import edit_episodes_index, edit_manifest, plant_shard, reseal

ROOT = Path(__file__).resolve().parents[2]
TOP, PIC, DEPTH = "observation.images.top", "observation.images.pic", "observation.depth"


def _png(array: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _edit_info(root: Path, edit) -> None:
    path = root / "meta" / "info.json"
    info = json.loads(path.read_text())
    edit(info)
    path.write_text(json.dumps(info, indent=4))


def _rewrite_data(root: Path, edit) -> None:
    """Apply ``edit(table) -> table`` to every data parquet of a source."""
    for path in sorted((root / "data").glob("*/*.parquet")):
        pq.write_table(edit(pq.read_table(path)), path)


@pytest.fixture(scope="module")
def picture_source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pictures") / "src"
    write_sample_dataset(root, SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec(PIC, 32, 40, kind="image"),)))
    return root


def _copy(root: Path, tmp_path: Path, name: str = "src") -> Path:
    dst = tmp_path / name
    shutil.copytree(root, dst)
    return dst


def _replace_pictures(root: Path, key: str, pictures: list[bytes]) -> None:
    def edit(table: pa.Table) -> pa.Table:
        cells = table[key].to_pylist()
        for i, data in enumerate(pictures[: len(cells)]):
            cells[i] = {"bytes": data, "path": None}
        return table.set_column(table.schema.get_field_index(key), key, pa.array(cells, table.schema.field(key).type))

    _rewrite_data(root, edit)


# -- 1. pictures whose size differs from the feature's shape -------------------------------------------
def test_1_a_picture_unlike_its_features_shape_is_refused_at_pack_and_at_read(picture_source, tmp_path):
    """A [32, 40, 3] feature holding a 1x3840 grey PNG and a 16x80 RGB PNG: both hold 3,840
    values, which is all the old check compared; samples came out (1, 1, 3840) and (3, 16, 80)."""
    for name, array in (("grey", np.zeros((1, 3840), np.uint8)), ("rgb", np.zeros((16, 80, 3), np.uint8))):
        root = _copy(picture_source, tmp_path, name)
        _replace_pictures(root, PIC, [_png(array)])
        with pytest.raises(SourceError, match=r"frame 0: a PNG \w+ picture of \d+x\d+x\d; its feature's shape is 32x40x3"):
            pack_dataset(str(root), str(tmp_path / f"out-{name}"))
        result = CliRunner().invoke(cli, ["check", str(root)])
        assert result.exit_code == 1 and "its feature's shape is 32x40x3" in result.output, result.output
    # A pack whose author re-sealed a wrong-sized picture in (every digest recomputed): the reader
    # refuses the sample by name, and verify --decode finds it.
    pack = tmp_path / "pack"
    pack_dataset(str(picture_source), str(pack))
    bad = _png(np.zeros((16, 80, 3), np.uint8))

    def plant(table: pa.Table) -> pa.Table:
        cells = table[PIC].to_pylist()
        cells[1] = {"bytes": bad, "path": None}
        return table.set_column(table.schema.get_field_index(PIC), PIC, pa.array(cells, table.schema.field(PIC).type))

    plant_shard(pack, 0, plant)
    reseal(pack)
    with pytest.raises(FormatError, match=r"frame 1: a PNG RGB picture of 16x80x3; its feature's shape is 32x40x3"):
        list(PackedDataset(str(pack), shuffle=False))
    report = verify(str(pack), decode=True)
    assert not report.ok and any("16x80x3; its feature's shape is 32x40x3" in p for p in report.problems), report.problems
    assert report.pictures_decoded == 1  # frame 0; frame 1 is refused and named


def test_1_decode_image_holds_every_picture_to_the_declared_geometry():
    camera = CameraGeometry(32, 40, 3)
    assert tuple(decode_image(_png(np.zeros((32, 40, 3), np.uint8)), camera=camera, where="x").shape) == (3, 32, 40)
    for array in (np.zeros((40, 32, 3), np.uint8), np.zeros((32, 40), np.uint8), np.zeros((32, 40, 4), np.uint8)):
        with pytest.raises(FormatError, match="its feature's shape is 32x40x3"):
            decode_image(_png(array), camera=camera, where="x")


# -- 2. a small picture under a huge shape ---------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,message",
    [
        ([8192, 8192, 4], r"pictures of 8192x8192x4 = 268,435,456 values; at most 67,108,864 are allowed"),
        ([64, 64, 1000], r"shape \[64, 64, 1000\] has 1000 channels; a camera has 1, 2, 3, 4"),
        ([1, 1, 1, 1], r"a camera's shape is \[height, width, channels\]"),
    ],
)
def test_2_a_picture_feature_beyond_a_cameras_shape_is_refused_at_the_start(picture_source, tmp_path, shape, message):
    root = _copy(picture_source, tmp_path)
    _edit_info(root, lambda info: info["features"][PIC].update(shape=shape))
    with pytest.raises(SourceError, match=message):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_2_the_largest_picture_allowed_reads_within_the_hostile_budget(tmp_path):
    """A 4096x4096 RGBA picture (the most values a picture may hold) read as float32: Pillow's
    buffer and the one output tensor, not the 7 full-size copies that peaked at 2.2 GiB."""
    picture = tmp_path / "big.png"
    picture.write_bytes(_png(np.zeros((4096, 4096, 4), np.uint8)))
    measured = run_measured(
        """
        import sys
        from lerobot_shards.core.format.features import CameraGeometry
        from lerobot_shards.reader.decode.images import decode_image
        out = decode_image(open(sys.argv[1], "rb").read(), camera=CameraGeometry(4096, 4096, 4), where="big")
        assert out.shape == (4, 4096, 4096) and out.dtype.is_floating_point
        """,
        str(picture),
    )
    assert measured.outcome == "ok", measured.outcome
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES, f"{measured.peak_bytes / 2**20:.0f} MiB"


def test_2_pictures_convert_exactly_as_before():
    """The strip-wise conversion gives ToTensor's values for every mode the format reads."""
    from PIL import Image

    from lerobot_shards.reader.decode import image_tensor

    rng = np.random.default_rng(0)
    cases = {
        "RGB": rng.integers(0, 256, (37, 23, 3), dtype=np.uint8),
        "RGBA": rng.integers(0, 256, (5, 7, 4), dtype=np.uint8),
        "L": rng.integers(0, 256, (9, 11), dtype=np.uint8),
        "I;16": rng.integers(0, 65536, (6, 4), dtype=np.uint16),
        "F": rng.standard_normal((3, 5)).astype(np.float32),
    }
    for mode, array in cases.items():
        image = Image.fromarray(array)
        assert image.mode == mode
        chw = torch.from_numpy(array.reshape(array.shape[0], array.shape[1], -1).astype(np.float32)).permute(2, 0, 1)
        expected = chw / 255.0 if array.dtype == np.uint8 else chw
        got = image_tensor(image)
        assert got.dtype == torch.float32 and torch.equal(got, expected.to(torch.float32)), mode
        if array.dtype == np.uint8:
            assert torch.equal(
                image_tensor(image, as_float=False),
                torch.from_numpy(array.reshape(chw.shape[1], chw.shape[2], -1)).permute(2, 0, 1),
            )
    bilevel = Image.fromarray(rng.integers(0, 2, (4, 6), dtype=np.uint8) * 255).convert("1")
    assert torch.equal(image_tensor(bilevel, as_float=False), torch.from_numpy(np.asarray(bilevel, np.uint8) * 255)[None])


# -- 3. depth quantizers past float32 --------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes,message",
    [
        ({"video.depth_max": 1e39}, r"info video.depth_max 1e\+39 does not fit a float32"),
        ({"video.depth_min": -1e308, "video.depth_max": 1e308, "video.use_log": False}, r"does not fit a float32"),
        ({"video.shift": 1.7e308}, r"info video.shift 1.7e\+308 does not fit a float32"),
        ({"video.shift": 3e38}, r"every code dequantizes to the same float32 depth|overflows float32"),
        ({"video.depth_min": 1.0, "video.depth_max": 1.0 + 1e-12, "video.use_log": False}, r"every code dequantizes to the same"),
        ({"video.depth_min": -3e38, "video.depth_max": 3e38, "video.use_log": False}, r"overflows float32"),
    ],
)
def test_3_a_depth_quantizer_dequantization_cannot_hold_is_refused(changes, message):
    feature = {
        "dtype": "video",
        "shape": [48, 64, 1],
        "info": {"is_depth_map": True, "video.pix_fmt": "gray12le", "video.depth_min": 0.01, "video.depth_max": 10.0, **changes},
    }
    with pytest.raises(FormatError, match=message):
        parse_feature(DEPTH, feature, where="info.json")
    honest = {**feature, "info": {"is_depth_map": True, "video.pix_fmt": "gray12le"}}
    assert parse_feature(DEPTH, honest, where="info.json").depth is not None


@pytest.fixture(scope="module")
def depth_source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("depth") / "src"
    spec = SampleSpec(
        episodes=2, lengths=(3, 4), cameras=(CameraSpec(TOP, 48, 64), CameraSpec(DEPTH, 48, 64, kind="depth_video"))
    )
    write_sample_dataset(root, spec)
    return root


def test_3_the_packer_refuses_the_quantizer_at_the_start(depth_source, tmp_path):
    root = _copy(depth_source, tmp_path)
    _edit_info(root, lambda info: info["features"][DEPTH]["info"].update({"video.depth_max": 1e39}))
    with pytest.raises(SourceError, match=rf"feature '{DEPTH}': info video.depth_max 1e\+39 does not fit a float32"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


# -- 4. a colour video declared a depth map ---------------------------------------------------------------
def _declare_depth(info: dict, *, keep_format: bool) -> None:
    feature = info["features"][TOP]
    feature["shape"] = [48, 64, 1]
    feature["info"]["is_depth_map"] = True
    if not keep_format:
        del feature["info"]["video.pix_fmt"], feature["info"]["video.channels"]


def test_4_a_colour_video_declared_depth_is_refused_by_its_info(depth_source, tmp_path):
    root = _copy(depth_source, tmp_path)
    _edit_info(root, lambda info: _declare_depth(info, keep_format=True))
    with pytest.raises(SourceError, match=rf"feature '{TOP}': is_depth_map, but its info says video.pix_fmt 'yuv420p'"):
        pack_dataset(str(root), str(tmp_path / "out"))


def test_4_a_colour_video_declared_depth_is_refused_by_its_stream(depth_source, tmp_path):
    """The info no longer names a colour format: the stream itself is read (its codec
    configuration), at the start of check and pack, before any frame is cut or re-encoded."""
    root = _copy(depth_source, tmp_path)
    _edit_info(root, lambda info: _declare_depth(info, keep_format=False))
    message = rf"depth camera {TOP}: the stream .* is yuv420p, not one plane of depth codes"
    with pytest.raises(SourceError, match=message):
        pack_dataset(str(root), str(tmp_path / "out"))
    result = CliRunner().invoke(cli, ["check", str(root)])
    assert result.exit_code == 1 and "not one plane of depth codes" in result.output, result.output
    # The real depth camera of the same dataset passes the same check.
    pack_dataset(str(depth_source), str(tmp_path / "honest"))
    assert PackedDataset(str(tmp_path / "honest")).features.depth_keys == [DEPTH]


def test_4_a_pack_whose_depth_member_is_colour_is_refused_by_the_reader(depth_source, tmp_path):
    """A hostile pack: the manifest says depth, the member is a colour stream (re-sealed)."""
    pack = tmp_path / "pack"
    pack_dataset(str(depth_source), str(pack))
    from tests.pack_tamper import replace_member
    from tests.packed_fixtures import episodes_index, member_bytes

    colour = member_bytes(pack, episodes_index(pack)[0], TOP)
    replace_member(pack, 0, DEPTH, colour)
    with pytest.raises(FormatError, match=rf"{DEPTH}.*not one plane of depth codes"):
        list(PackedDataset(str(pack), shuffle=False))


# -- 5. language columns of the wrong type ----------------------------------------------------------------
@pytest.fixture(scope="module")
def language_source(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("language") / "src"
    write_sample_dataset(root, SampleSpec(episodes=2, lengths=(3, 4), language=True, cameras=(CameraSpec(TOP, 32, 32),)))
    return root


@pytest.mark.parametrize(
    "array,found",
    [
        (lambda n: pa.array(["plan: reach the cube"] * n), "string"),
        (lambda n: pa.array(list(range(n)), pa.int64()), "int64"),
        (lambda n: pa.array([["a", "b"]] * n, pa.list_(pa.string())), r"list<\w+: string>"),
        (
            lambda n: pa.array(
                [[{"role": 1, "content": 2.5}]] * n, pa.list_(pa.struct([("role", pa.int64()), ("content", pa.float64())]))
            ),
            "field 'role' of type int64",
        ),
    ],
)
def test_5_a_language_column_of_another_type_is_refused_at_the_start(language_source, tmp_path, array, found):
    root = _copy(language_source, tmp_path)
    _rewrite_data(
        root, lambda t: t.set_column(t.schema.get_field_index("language_persistent"), "language_persistent", array(t.num_rows))
    )
    with pytest.raises(SourceError, match=rf"language column 'language_persistent' (is|has) .*{found}"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_5_a_pack_whose_language_column_is_not_lerobots_is_refused_by_the_reader(language_source, tmp_path):
    pack = tmp_path / "pack"
    pack_dataset(str(language_source), str(pack))
    plant_shard(
        pack,
        0,
        lambda t: t.set_column(t.schema.get_field_index("language_events"), "language_events", pa.array(["x"] * t.num_rows)),
    )
    reseal(pack)
    with pytest.raises(FormatError, match=r"language column 'language_events' is string; expected list<struct"):
        list(PackedDataset(str(pack), shuffle=False))


# -- 6. key maps in someone else's mixture ----------------------------------------------------------------
@pytest.fixture(scope="module")
def mixture_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mixture")
    for name, seed in (("a", 1), ("b", 2)):
        write_sample_dataset(
            root / f"src-{name}", SampleSpec(episodes=2, lengths=(3, 4), seed=seed, cameras=(CameraSpec(TOP, 32, 32),))
        )
        pack_dataset(str(root / f"src-{name}"), str(root / "mix" / name))
    result = CliRunner().invoke(cli, ["mixture", "create", str(root / "mix")])
    assert result.exit_code == 0, result.output
    return root / "mix"


@pytest.mark.parametrize(
    "key_map,message",
    [
        ({"observation.state": "task"}, r"renames 'observation.state' to 'task', a key every mixture sample sets itself"),
        ({"observation.state": "dataset_index"}, r"to 'dataset_index', a key every mixture sample sets itself"),
        ({"observation.state": "observation.images.top_mask"}, r"a name ending in '_mask', which the mixture generates"),
        ({"next.reward": "action_is_pad"}, r"a name ending in '_is_pad'"),
        (
            {"action": "observation.state", "observation.state": "action"},
            r"renames 'action' to 'observation.state', the key of another feature of the dataset that it does not leave out",
        ),
    ],
)
def test_6_a_key_map_that_would_hide_a_feature_is_refused(mixture_dir, tmp_path, key_map, message):
    spec = json.loads((mixture_dir / "mixture.json").read_text())
    spec["version"] = max(spec["version"], 3)
    spec["datasets"][0]["key_map"] = key_map
    mix = tmp_path / "mix"
    shutil.copytree(mixture_dir, mix)
    (mix / "mixture.json").write_text(json.dumps(spec))
    with pytest.raises(MixtureSpecError, match=message):
        MixtureDataset(str(mix / "mixture.json"))
    flags = [f"--key-map=a:{old}={new}" for old, new in key_map.items()]
    result = CliRunner().invoke(cli, ["mixture", "create", str(mix), *flags])
    assert result.exit_code != 0 and "choose another name" in result.output or "does not leave out" in result.output, (
        result.output
    )


def test_6_dropping_a_feature_frees_its_name(mixture_dir, tmp_path):
    mix = tmp_path / "mix"
    shutil.copytree(mixture_dir, mix)
    result = CliRunner().invoke(
        cli, ["mixture", "create", str(mix), "--key-map=a:observation.state=", "--key-map=a:action=observation.state"]
    )
    assert result.exit_code == 0, result.output
    ds = MixtureDataset(str(mix / "mixture.json"), shuffle=False)
    assert ds.key_map["a"]["action"] == "observation.state"


def test_6_a_feature_named_like_a_key_the_mixture_sets_is_refused_by_the_harmonizer():
    from lerobot_shards.reader.runtime import DatasetFeatures, FeatureHarmonizer

    vector = {"dtype": "float32", "shape": [2]}
    a = DatasetFeatures.from_manifest_features("a", 30, {"action": vector, "dataset_index": vector})
    b = DatasetFeatures.from_manifest_features("b", 30, {"action": vector, "dataset_index": vector})
    with pytest.raises(
        HarmonizeError, match=r"dataset 'a': feature 'dataset_index' \(after key maps\) is a key the mixture sample sets"
    ):
        FeatureHarmonizer.build([a, b])
    c = DatasetFeatures.from_manifest_features("c", 30, {"action": vector, "action_mask": vector})
    with pytest.raises(HarmonizeError, match=r"feature 'action_mask' \(after key maps\)"):
        FeatureHarmonizer.build([c])


# -- 7. recorded options of the wrong type ------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_pack(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("small")
    write_sample_dataset(root / "src", SampleSpec(episodes=2, lengths=(3, 4), cameras=(CameraSpec(TOP, 32, 32),)))
    pack_dataset(str(root / "src"), str(root / "pack"))
    return root / "pack"


@pytest.mark.parametrize("option,value", [("resize", 5), ("windows", [1, 2]), ("episodes", "abc"), ("crf", "x"), ("gop", [3])])
def test_7_verify_reports_recorded_options_it_cannot_read_instead_of_crashing(small_pack, tmp_path, option, value):
    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    edit_manifest(pack, lambda m: m["options"].update({option: value}))
    (pack / "meta" / "stats.json").write_bytes((pack / "meta" / "stats.json").read_bytes() + b" ")  # damage to report
    result = CliRunner().invoke(cli, ["verify", str(pack)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (TypeError, AttributeError)), result.output
    assert f"recorded option {option!r}" in result.output, result.output
    assert f"--{option}" not in result.output.split("recorded option")[0]  # no repair line built from it


def test_7_pack_options_refuse_values_of_the_wrong_type():
    from lerobot_shards import OptionsError
    from lerobot_shards.packer.options import PackOptions

    for fields in ({"resize": 5}, {"episodes": "abc"}, {"windows": [1, 2]}, {"gop": "3"}, {"crf": 1.5}, {"video": 3}):
        with pytest.raises(OptionsError):
            PackOptions(**fields)
    assert PackOptions.from_recorded(PackOptions(video="hevc", resize=(32, 48)).to_json_dict()).resize == (32, 48)
    with pytest.raises(FormatError, match=r"recorded option 'resize'"):
        PackOptions.from_recorded({"video": "hevc", "resize": 5})


# -- 8. --follow-symlinks and files that never end --------------------------------------------------------
@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_8_follow_symlinks_follows_links_to_regular_files_only(small_pack, tmp_path, target):
    src = tmp_path / "src"
    write_sample_dataset(src, SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec(TOP, 32, 32),)))
    stats = src / "meta" / "stats.json"
    stats.unlink()
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo")
        os.symlink(tmp_path / "fifo", stats)
    else:
        os.symlink(target, stats)
    command = [sys.executable, "-m", "lerobot_shards", "pack", str(src), str(tmp_path / "out"), "--follow-symlinks"]
    # A hang guard (the old code read /dev/zero forever): a refusal takes a second or two.
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1, result.stderr
    kind = "a character device" if target == "/dev/zero" else "a FIFO"
    assert f"meta/stats.json: the metadata is {kind}, not a regular file" in result.stderr, result.stderr


# -- layout rows ------------------------------------------------------------------------------------------
def test_an_all_null_string_column_reads_and_a_converted_image_dataset_packs(picture_source, tmp_path):
    """LeRobot's v2.1 converter writes every picture's ``path`` null: the column's dictionary is
    empty, which the bounded reader indexed past its end (``ArrowIndexError``)."""
    from lerobot_shards.core.format.parquet import Budget, read_bounded

    for array in (pa.array([None, None, None], pa.string()), pa.array([{"bytes": b"x", "path": None}] * 3)):
        buffer = io.BytesIO()
        pq.write_table(pa.table({"c": array}), buffer)
        table = read_bounded(buffer.getvalue(), where="t", budget=Budget(max_bytes=1 << 20), max_rows=10)
        assert table["c"].to_pylist() == array.to_pylist()
    root = _copy(picture_source, tmp_path)

    def null_paths(table: pa.Table) -> pa.Table:
        cells = [{"bytes": c["bytes"], "path": None} for c in table[PIC].to_pylist()]
        return table.set_column(table.schema.get_field_index(PIC), PIC, pa.array(cells, table.schema.field(PIC).type))

    _rewrite_data(root, null_paths)
    pack_dataset(str(root), str(tmp_path / "pack"))
    packed = [s[PIC] for s in PackedDataset(str(tmp_path / "pack"), shuffle=False)]
    honest_pack = tmp_path / "honest"
    pack_dataset(str(picture_source), str(honest_pack))
    honest = [s[PIC] for s in PackedDataset(str(honest_pack), shuffle=False)]
    assert len(packed) == 3 and all(torch.equal(a, b) for a, b in zip(packed, honest))


def test_a_video_longer_than_its_rows_packs_losslessly_by_default(tmp_path):
    """LeRobot's v2.1 converter leaves 1-3 frames past an episode's rows: they were refused
    unless --on-frame-mismatch pad (which then listed the episode as padded). LeRobot never reads
    them, so every policy keeps the first ``length`` frames, by stream copy, and says so."""
    from tests.packed_fixtures import shift_video_window

    src = tmp_path / "src"
    write_sample_dataset(src, SampleSpec(episodes=3, lengths=(6, 5, 7), fps=30, cameras=(CameraSpec(TOP, 32, 32),)))
    honest = tmp_path / "honest"
    pack_dataset(str(src), str(honest))
    shift_video_window(src, 0, TOP, end=2 / 30)  # episode 0's window reaches 2 frames into episode 1's
    result = CliRunner().invoke(cli, ["check", str(src)])
    assert result.exit_code == 0 and "video has 8 frames for 6 rows: the member keeps the first 6" in result.output, result.output
    for policy in ("error", "pad", "drop-episode"):
        dst = tmp_path / policy
        report = pack_dataset(str(src), str(dst), on_frame_mismatch=policy)
        assert report.trimmed_episodes == [0] and report.padded_episodes == [] and report.dropped_episodes == []
        assert report.reencoded_episodes == []  # a stream copy: lossless
        got = {int(s["index"]): s for s in PackedDataset(str(dst), shuffle=False)}
        want = {int(s["index"]): s for s in PackedDataset(str(honest), shuffle=False)}
        assert got.keys() == want.keys() and all(torch.equal(got[i][TOP], want[i][TOP]) for i in got)
    result = CliRunner().invoke(cli, ["pack", str(src), str(tmp_path / "cli")])
    assert result.exit_code == 0 and "trimmed 1 (videos longer than their rows" in result.output, result.output
    info = CliRunner().invoke(cli, ["info", str(tmp_path / "cli"), "--format", "json"])
    assert json.loads(info.output)["trimmed_episodes"] == [0], info.output


def test_feature_keys_lerobot_accepts_pack_and_read(tmp_path):
    """LeRobot refuses only '/' in a key: spaces, unicode and parentheses pack and read back.
    Where a key becomes a file name it is %-encoded (tar member names); parquet columns and SQL
    (quoted, as any DuckDB identifier) take it as it is; a window on such a key gets its own
    pad column."""
    import tarfile

    from lerobot_shards import run_sql

    front, wrist, reward = "observation.images.front cam (rgb)", "observation.images.腕", "reward (norm)"
    src = tmp_path / "src"
    write_sample_dataset(
        src, SampleSpec(episodes=2, lengths=(4, 5), cameras=(CameraSpec(front, 32, 32), CameraSpec(wrist, 32, 32)))
    )

    def rename(info: dict) -> None:
        info["features"] = {(reward if k == "next.reward" else k): v for k, v in info["features"].items()}

    _edit_info(src, rename)
    _rewrite_data(src, lambda t: t.rename_columns([reward if n == "next.reward" else n for n in t.column_names]))
    pack = tmp_path / "pack"
    pack_dataset(str(src), str(pack), windows={"w": {reward: [0.0, 1 / 30], front: [-1 / 30, 0.0]}})
    with tarfile.open(pack / "shards" / "shard-000000.tar") as tar:
        names = tar.getnames()
    assert "ep-000000.observation.images.front%20cam%20%28rgb%29.mp4" in names
    assert "ep-000000.observation.images.%E8%85%95.mp4" in names
    ds = PackedDataset(str(pack), shuffle=False, delta_timestamps={front: [-1 / 30, 0.0], reward: [0.0, 1 / 30]})
    samples = list(ds)
    assert len(samples) == 9 and samples[0][front].shape == (2, 3, 32, 32) and samples[0][wrist].shape == (3, 32, 32)
    assert samples[0][f"{front}_is_pad"].tolist() == [True, False] and samples[0][reward].shape == (2,)
    assert verify(str(pack), decode=True).ok
    _, rows = run_sql(str(pack), f'SELECT count(*), sum("{reward}") IS NOT NULL FROM frames')
    assert rows == [(9, True)]
    _, rows = run_sql(str(pack), f'SELECT sum("video/{front}/frames") FROM episodes')
    assert rows == [(9,)]
    columns, _ = run_sql(str(pack), "SELECT * FROM samples LIMIT 1")
    assert len([c for c in columns if c.endswith("_pad_before")]) == 2


def test_a_key_with_a_slash_or_a_control_character_is_refused_at_the_start(picture_source, tmp_path):
    for bad in ("a/b", "tab\there", ".."):
        root = _copy(picture_source, tmp_path, f"src{len(bad)}")
        _edit_info(root, lambda info, bad=bad: info["features"].update({bad: info["features"]["next.reward"]}))
        with pytest.raises(SourceError, match=r"is not allowed: LeRobot keys are 1-200 characters without '/'"):
            pack_dataset(str(root), str(tmp_path / f"out{len(bad)}"))


@pytest.fixture(scope="module")
def one_stream_source(tmp_path_factory) -> tuple[Path, torch.Tensor, list[int]]:
    """LeRobot's image-to-video converter encodes all of a camera's episodes as one stream with
    GOP 2: with these lengths episodes 1, 2 and 3 start between keyframes. Returns the source,
    every frame of the stream as torchcodec decodes it (what LeRobot reads) and the starts."""
    from lerobot_shards.testing import encode_episode_video, identity_frame

    lengths = (15, 14, 16, 15, 15)
    src = tmp_path_factory.mktemp("one-stream") / "src"
    write_sample_dataset(src, SampleSpec(episodes=5, lengths=lengths, gop=2, cameras=(CameraSpec(TOP, 64, 96),)))
    video = next((src / "videos" / TOP).rglob("*.mp4"))
    frames = np.stack([identity_frame(e, j, 64, 96, 0) for e, n in enumerate(lengths) for j in range(n)])
    encode_episode_video(frames, video, 30, crf=30, gop=2, preset=12)
    from torchcodec.decoders import VideoDecoder

    decoded = VideoDecoder(str(video), seek_mode="exact").get_frames_at(indices=list(range(sum(lengths)))).data
    starts = np.cumsum((0,) + lengths[:-1]).tolist()
    return src, decoded, starts


def test_copy_mode_stays_exact_when_an_episode_starts_between_keyframes(one_stream_source, tmp_path):
    """The member starts at the keyframe before the episode and the reader skips the pre-roll
    (``video/<key>/preroll``, format 4): every frame equals LeRobot's, where the re-encode
    these episodes got before differed by up to 16/255 in 49 of 75 samples."""
    src, decoded, starts = one_stream_source
    pack = tmp_path / "pack"
    report = pack_dataset(str(src), str(pack))
    assert report.reencoded_episodes == []
    manifest = json.loads((pack / "manifest.json").read_text())
    assert manifest["format_version"] == 4
    rows = {r["episode_index"]: r for r in pq.read_table(pack / "index" / "episodes.parquet").to_pylist()}
    assert [rows[e][f"video/{TOP}/preroll"] for e in range(5)] == [0, 1, 1, 1, 0]
    for ds in (
        PackedDataset(str(pack), shuffle=False, return_uint8=True),
        PackedDataset(str(pack), shuffle=False, decoder="pyav", return_uint8=True),
    ):
        for sample in ds:
            e, j = int(sample["episode_index"]), int(sample["frame_index"])
            assert torch.equal(sample[TOP], decoded[starts[e] + j]), (e, j)
    windowed = PackedDataset(str(pack), shuffle=False, return_uint8=True, delta_timestamps={TOP: [-2 / 30, 0.0]})
    for sample in windowed:
        e, j = int(sample["episode_index"]), int(sample["frame_index"])
        assert torch.equal(sample[TOP][0], decoded[starts[e] + max(j - 2, 0)])
    assert verify(str(pack), decode=True).ok
    # A compiled mixture carries the pre-roll too (mixture version 4).
    mix = tmp_path / "mix"
    shutil.copytree(pack, mix / "a")
    assert CliRunner().invoke(cli, ["mixture", "create", str(mix)]).exit_code == 0
    assert json.loads((mix / "mixture.json").read_text())["version"] == 4
    for sample in MixtureDataset(str(mix / "mixture.json"), shuffle=False, return_uint8=True):
        e, j = int(sample["episode_index"]), int(sample["frame_index"])
        assert torch.equal(sample[TOP], decoded[starts[e] + j])


def test_a_pre_roll_moved_across_a_keyframe_is_refused_by_readers_and_verify(one_stream_source, tmp_path):
    """Issue 54 row 10: a re-sealed index whose pre-roll still adds up to the member's frames
    but spans a keyframe gave rows other frames, and verify --decode passed. A pre-roll runs
    from the keyframe before an episode to its first frame, which is none: checked against the
    member's own sync samples when a reader admits it and by verify."""

    src, _, _ = one_stream_source
    pack = tmp_path / "pack"
    pack_dataset(str(src), str(pack))

    def shift(rows: list[dict]) -> None:
        row = next(r for r in rows if r["episode_index"] == 1)
        row[f"video/{TOP}/preroll"] += 1  # 2: the member's frame 2 is a keyframe (GOP 2)
        row[f"video/{TOP}/frames"] -= 1

    edit_episodes_index(pack, shift)
    with pytest.raises(EpisodeDataError, match=r"episode 1.*a pre-roll of 2 frames holds keyframe 2"):
        list(PackedDataset(str(pack), shuffle=False, return_uint8=True, prefetch_episodes=0))
    report = verify(str(pack))
    assert not report.ok and any("a pre-roll of 2 frames holds keyframe 2" in p for p in report.problems), report.problems


def test_a_pack_without_pre_roll_stays_format_3(picture_source, tmp_path):
    pack_dataset(str(picture_source), str(tmp_path / "pack"))
    assert json.loads((tmp_path / "pack" / "manifest.json").read_text())["format_version"] == 3


def test_the_demuxer_path_cuts_from_the_keyframe_before_too(one_stream_source, tmp_path):
    """Files the byte-range cut does not take (an edit list, another muxer's timing) are cut by
    the demuxer, which now also keeps the packets since the keyframe before an episode."""
    from lerobot_shards.packer.shard import cut_episode
    from lerobot_shards.packer.source import SourceVideoReader, open_dataset_source

    src, decoded, starts = one_stream_source
    source = open_dataset_source(src)
    location = source.video_location(0, TOP)
    reader = SourceVideoReader(location.path)
    from torchcodec.decoders import VideoDecoder

    try:
        for e in range(5):
            length = source.episodes[e].length
            video, found = cut_episode(source.video_location(e, TOP), reader, max_frames=length)
            assert video is not None and found == length and video.preroll == (1 if e in (1, 2, 3) else 0), (e, video)
            frames = (
                VideoDecoder(video.data, seek_mode="exact").get_frames_at(indices=[video.preroll + j for j in range(length)]).data
            )
            assert torch.equal(frames, decoded[starts[e] : starts[e] + length]), e
    finally:
        reader.close()


def test_a_process_that_packs_a_source_again_after_its_data_changed_reads_the_new_rows(tmp_path):
    """``open_source`` keeps a parsed source per process (its metadata's sizes and times as the
    key); the data rows it held were keyed by path alone, so a notebook that packed, edited a
    data file and packed again packed the old rows (found by the field fuzzer)."""
    src = tmp_path / "src"
    write_sample_dataset(src, SampleSpec(episodes=2, lengths=(3, 4), cameras=(CameraSpec(TOP, 32, 32),)))
    pack_dataset(str(src), str(tmp_path / "first"))
    _rewrite_data(src, lambda t: t.set_column(t.schema.get_field_index("index"), "index", pa.nulls(t.num_rows, pa.int64())))
    with pytest.raises(SourceError, match=r"column index holds nulls"):  # the new rows, not the cached ones
        pack_dataset(str(src), str(tmp_path / "second"))
