"""Read as LeRobot reads (issue 54): datasets shaped as Hub repos carry them, and files that
disagree with each other, packed and compared with the independent oracle
(``tests/lerobot_reference.py``, itself checked against LeRobot 0.6.1 by ``make parity``).

Each test edits a small dataset the way a real writer leaves it (LeRobot 0.4.x's tasks file, a
hand-edited info.json, a recording script's column types, ...) and asserts what LeRobot does
with it: the same samples, or a refusal that names the file and the fix.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from lerobot_shards import FormatError, FrameMismatchError, PackedDataset, SourceError, check_dataset, pack_dataset, verify
from lerobot_shards.cli import main
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.lerobot_reference import reference_item
from tests.packer.test_layouts import assert_like_lerobot

TOP = "observation.images.top"
SPEC = SampleSpec(episodes=3, lengths=(5, 4, 6), seed=11, cameras=(CameraSpec(TOP, 32, 48),))


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("honest") / "src"
    write_sample_dataset(root, SPEC)
    return root


def _copy(honest: Path, tmp_path: Path) -> Path:
    root = tmp_path / "src"
    shutil.copytree(honest, root)
    return root


def _edit_info(root: Path, **fields) -> None:
    path = root / "meta" / "info.json"
    info = json.loads(path.read_text())
    info.update(fields)
    path.write_text(json.dumps(info, indent=4))


def _samples_equal_lerobot(source: Path, pack: Path) -> int:
    """Every sample of ``pack`` equals the oracle's over ``source``; returns how many."""
    compared = 0
    for sample in PackedDataset(str(pack), shuffle=False):
        expected = reference_item(source, int(sample["index"]), None)
        assert_like_lerobot(expected, sample, images=set(), where=f"index {int(sample['index'])}")
        compared += 1
    return compared


def _pack_and_compare(source: Path, tmp_path: Path) -> int:
    pack = tmp_path / "pack"
    pack_dataset(str(source), str(pack))
    report = verify(str(pack), decode=True)
    assert report.problems == [], report.problems
    return _samples_equal_lerobot(source, pack)


# -- meta/tasks.parquet as each LeRobot release writes it -----------------------------------------


def _tasks(root: Path) -> pd.DataFrame:
    return pd.read_parquet(root / "meta" / "tasks.parquet")


def test_lerobot_04_tasks_file_packs_verifies_and_reads_like_lerobot(honest, tmp_path):
    """LeRobot 0.4.0-0.4.4 wrote ``meta/tasks.parquet`` from a DataFrame with an unnamed index:
    columns ``task_index`` and ``__index_level_0__``. LeRobot 0.6.1 reads the index as the task;
    the pack did too, copied the file, then refused it in every reader."""
    root = _copy(honest, tmp_path)
    tasks = _tasks(root)
    pd.DataFrame({"task_index": tasks["task_index"].to_numpy()}, index=list(tasks.index)).to_parquet(
        root / "meta" / "tasks.parquet"
    )
    assert pq.read_schema(root / "meta" / "tasks.parquet").names == ["task_index", "__index_level_0__"]
    assert check_dataset(str(root)).findings == []
    assert _pack_and_compare(root, tmp_path) == sum(SPEC.lengths)


def test_plain_pyarrow_tasks_file_keeps_the_string_and_says_lerobot_does_not(honest, tmp_path):
    """Without pandas metadata LeRobot's index is the row number, and ``item["task"]`` is that
    number: we keep the string the file holds, and ``check`` and ``pack`` say so."""
    root = _copy(honest, tmp_path)
    tasks = _tasks(root)
    table = pa.table({"task_index": tasks["task_index"].to_numpy(), "task": list(tasks.index)})
    pq.write_table(table, root / "meta" / "tasks.parquet")
    notes = [f.message for f in check_dataset(str(root)).warnings]
    assert len(notes) == 1 and "LeRobot 0.6.1 gives each sample's task as its row number" in notes[0]
    pack = tmp_path / "pack"
    pack_dataset(str(root), str(pack))
    for sample in PackedDataset(str(pack), shuffle=False):
        lerobot = reference_item(root, int(sample["index"]), None)
        assert lerobot["task"] == int(sample["task_index"])  # LeRobot's (documented) answer
        assert sample["task"] == tasks.index[int(sample["task_index"])]  # the file's string


def test_tasks_out_of_row_order_are_refused_by_name(honest, tmp_path):
    """LeRobot looks a task up by row (``tasks.iloc[task_index]``): a file ordered otherwise
    gives other tasks than it says; refused, with the fix."""
    root = _copy(honest, tmp_path)
    tasks = _tasks(root)
    tasks.iloc[::-1].to_parquet(root / "meta" / "tasks.parquet")
    with pytest.raises(SourceError, match=r"tasks.parquet.*row 0 has task_index 2.*rewrite the file sorted by task_index"):
        pack_dataset(str(root), str(tmp_path / "pack"))
    result = CliRunner().invoke(main, ["check", str(root)])
    assert result.exit_code == 1 and "sorted by task_index" in result.output and "Traceback" not in result.output


# -- info.json as LeRobot parses it ---------------------------------------------------------------


@pytest.mark.parametrize("version", ["3.0", "v3", "v3.0.1", "3.1"])
def test_codebase_versions_lerobot_reads_pack(honest, tmp_path, version):
    """LeRobot compares the major version (``packaging.version.parse``): "3.0" is v3.0."""
    root = _copy(honest, tmp_path)
    _edit_info(root, codebase_version=version)
    assert _pack_and_compare(root, tmp_path) == sum(SPEC.lengths)


def test_integral_float_fps_reads_as_the_integer(honest, tmp_path):
    root = _copy(honest, tmp_path)
    _edit_info(root, fps=30.0)
    assert _pack_and_compare(root, tmp_path) == sum(SPEC.lengths)
    assert PackedDataset(str(tmp_path / "pack")).meta.fps == 30


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("v2.1", r"python -m lerobot\.scripts\.convert_dataset_v21_to_v30 --repo-id=ORG/NAME --root=\S*src$"),
        ("2.1", r'needs "codebase_version": "v2\.1" in meta/info\.json: set it, then run python -m lerobot\.scripts\.'),
        ("v2.0", r"to v2\.1 with LeRobot 0\.3\.3 \(python -m lerobot\.datasets\.v21\.convert_dataset_v20_to_v21 --repo-id"),
        ("v4.0", r"newer than the v3 format this version of lerobot-shards reads; upgrade lerobot-shards"),
        ("three", r"codebase_version 'three' is not a version"),
    ],
)
def test_unsupported_versions_get_the_command_that_fits(honest, tmp_path, version, expected):
    """The converter LeRobot 0.6.1 ships (``lerobot.scripts``, not ``lerobot.datasets.v30``),
    with the dataset's own folder as ``--root``; "2.1" without its "v" is refused by that
    converter, so the message says what to edit first; v2.0 needs two conversions."""
    root = _copy(honest, tmp_path)
    _edit_info(root, codebase_version=version)
    for command in (["check", str(root)], ["pack", str(root), str(tmp_path / "out")]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code != 0 and "Traceback" not in result.output, result.output
        lines = [line for line in result.output.splitlines() if "codebase_version" in line]
        assert len(lines) == 1, result.output
        assert re.search(expected, lines[0]), lines[0]
    assert not (tmp_path / "out").exists()


def test_an_ntsc_rate_packs_and_reads_as_lerobot_with_windows(tmp_path):
    """fps 29.97 (NTSC cameras: mp4 time base 1001/30000, rows at k / 29.97 s) was refused; LeRobot
    reads it. Copy packs equal LeRobot bit for bit, windows in seconds included; a re-encode within
    35 dB; the pack says 29.97 (format 5: older readers refuse a fractional fps by version), and
    so does a mixture of it (version 5)."""
    from fractions import Fraction

    from lerobot_shards import MixtureDataset

    root = tmp_path / "src"
    spec = SampleSpec(episodes=3, lengths=(20, 9, 14), fps=29.97, video_rate=Fraction(30000, 1001), cameras=SPEC.cameras)
    write_sample_dataset(root, spec)
    assert json.loads((root / "meta" / "info.json").read_text())["fps"] == 29.97
    assert check_dataset(str(root)).findings == []
    delta = {TOP: [-2 / 29.97, 0.0], "action": [0.0, 1 / 29.97, 2 / 29.97], "observation.state": [-1 / 29.97, 0.0]}
    for mode in ("copy", "hevc"):
        pack = tmp_path / mode
        pack_dataset(str(root), str(pack), video=mode, windows={"chunk": {"action": [0.0, 1 / 29.97]}})
        assert verify(str(pack), decode=True).problems == []
        assert json.loads((pack / "manifest.json").read_text())["format_version"] == 5
        compared = 0
        for sample in PackedDataset(str(pack), shuffle=False, delta_timestamps=delta):
            expected = reference_item(root, int(sample["index"]), delta)
            lossy = {TOP} if mode == "hevc" else set()
            assert_like_lerobot(expected, sample, images=set(), lossy=lossy, where=f"{mode} {int(sample['index'])}")
            compared += 1
        assert compared == sum(spec.lengths) and PackedDataset(str(pack)).meta.fps == 29.97
    mix = tmp_path / "mix"
    shutil.copytree(tmp_path / "copy", mix / "a")
    assert CliRunner().invoke(main, ["mixture", "create", str(mix)]).exit_code == 0
    assert json.loads((mix / "mixture.json").read_text())["version"] == 5
    mixture = MixtureDataset(str(mix / "mixture.json"), shuffle=False, delta_timestamps={"action": [0.0, 1 / 29.97]})
    assert len(list(mixture)) == sum(spec.lengths) and mixture.meta.fps == 29.97


def test_a_rate_below_one_frame_a_second_is_refused_by_name(honest, tmp_path):
    root = _copy(honest, tmp_path)
    _edit_info(root, fps=0.5)
    with pytest.raises(SourceError, match=r"fps must be a number from 1 to \d+, found 0.5"):
        pack_dataset(str(root), str(tmp_path / "pack"))


def test_what_the_packer_copies_is_parsed_as_the_pack_reads_it(honest, tmp_path):
    """A pack is never written that its own readers refuse: a tasks file the reader cannot
    parse stops the pack before anything is copied."""
    from lerobot_shards.core.pack import check_packed_metadata

    good = (honest / "meta" / "tasks.parquet").read_bytes()
    check_packed_metadata("meta/tasks.parquet", good, where="tasks")  # what the pack reads, it reads
    with pytest.raises(FormatError, match="needs an integer task_index column"):
        check_packed_metadata("meta/tasks.parquet", _parquet_bytes(pa.table({"task": ["a"]})), where="tasks")
    with pytest.raises(FormatError, match="must hold a JSON object"):
        check_packed_metadata("meta/stats.json", b"[1, 2]", where="stats")


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


# -- columns cast to their declared types ---------------------------------------------------------


def _rewrite_data(root: Path, edit) -> None:
    for path in sorted((root / "data").glob("*/*.parquet")):
        pq.write_table(edit(pq.read_table(path)), path)


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def test_columns_are_cast_to_their_declared_types_as_lerobot_casts_them(honest, tmp_path):
    """info.json says float32 / bool / float32[6], the parquet holds strings / int64 / int64
    lists (a recording script's types): LeRobot casts every column to its declared type when
    it loads the data; the pack stores what LeRobot returns."""
    root = _copy(honest, tmp_path)

    def edit(table: pa.Table) -> pa.Table:
        reward = pa.array([repr(float(v)) for v in table["next.reward"].to_pylist()], pa.string())
        done = table["next.done"].cast(pa.int64())
        action = pa.array([[round(x * 10) for x in row] for row in table["action"].to_pylist()], pa.list_(pa.int64()))
        return _set(_set(_set(table, "next.reward", reward), "next.done", done), "action", action)

    _rewrite_data(root, edit)
    assert pq.read_schema(next((root / "data").glob("*/*.parquet"))).field("next.reward").type == pa.string()
    assert check_dataset(str(root)).findings == []
    assert _pack_and_compare(root, tmp_path) == sum(SPEC.lengths)
    sample = next(iter(PackedDataset(str(tmp_path / "pack"), shuffle=False)))
    assert (sample["next.reward"].dtype, sample["next.done"].dtype, sample["action"].dtype) == (
        torch.float32,
        torch.bool,
        torch.float32,
    )


def test_a_value_the_declared_type_cannot_hold_is_refused_by_name(honest, tmp_path):
    """LeRobot's load fails on a float32 column holding "n/a": so do check and pack, naming
    the file, episode, column and value."""
    root = _copy(honest, tmp_path)

    def edit(table: pa.Table) -> pa.Table:
        return _set(table, "next.reward", pa.array(["n/a"] * table.num_rows, pa.string()))

    _rewrite_data(root, edit)
    with pytest.raises(SourceError, match=r"episode 0, column 'next.reward'.*cannot be cast to the declared float.*'n/a'"):
        pack_dataset(str(root), str(tmp_path / "pack"))
    result = CliRunner().invoke(main, ["check", str(root)])
    assert result.exit_code == 1 and result.output.count("cannot be cast to the declared float") == 3, result.output


def test_a_dtype_lerobot_cannot_load_is_refused_before_anything_is_written(honest, tmp_path):
    root = _copy(honest, tmp_path)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"]["next.reward"]["dtype"] = "real"
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match=r"feature 'next.reward' has dtype 'real', which is no type LeRobot"):
        pack_dataset(str(root), str(tmp_path / "pack"))
    assert not (tmp_path / "pack").exists()


# -- a codec readers of a pack do not decode -------------------------------------------------------


def _reencode_videos(root: Path, codec: str) -> None:
    """Every mp4 rewritten in ``codec`` (frame for frame, same rate and timestamps), as a
    recording script using OpenCV's ``mp4v`` writer leaves it."""
    import av

    for path in sorted(root.glob("videos/*/*/*.mp4")):
        with av.open(str(path)) as container:
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
        staged = path.with_suffix(".new.mp4")
        with av.open(str(staged), "w") as out:
            stream = out.add_stream(codec, rate=SPEC.fps)
            stream.height, stream.width = frames[0].shape[:2]
            stream.pix_fmt = "yuv420p"
            stream.options = {"qscale": "2"}
            for pts, pixels in enumerate(frames):
                frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
                frame.pts = pts
                out.mux(stream.encode(frame))
            out.mux(stream.encode())
        staged.replace(path)


def test_a_codec_readers_do_not_decode_is_refused_with_the_video_option_that_packs_it(honest, tmp_path):
    """OpenCV's ``mp4v`` (MPEG-4 Part 2): ``check`` said "ok to pack" and ``pack`` exited 0,
    then every read failed. Now both refuse in copy mode, naming the camera and ``--video
    h264``; that command packs it, verifies and reads within 35 dB of what LeRobot decodes
    (the bound of every lossy row of the layout matrix; 36.8 dB here, at 32x48)."""
    root = _copy(honest, tmp_path)
    _reencode_videos(root, "mpeg4")
    report = check_dataset(str(root))
    assert [f.level for f in report.findings] == ["error"]
    assert f"camera {TOP} is mpeg4" in report.findings[0].message and "--video h264" in report.findings[0].message
    result = CliRunner().invoke(main, ["pack", str(root), str(tmp_path / "copy")])
    assert result.exit_code == 1 and "Pack with --video h264" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "copy").exists()
    result = CliRunner().invoke(main, ["pack", str(root), str(tmp_path / "h264"), "--video", "h264"])  # as advised
    assert result.exit_code == 0, result.output
    assert verify(str(tmp_path / "h264"), decode=True).problems == []
    compared = 0
    for sample in PackedDataset(str(tmp_path / "h264"), shuffle=False):
        expected = reference_item(root, int(sample["index"]), None)
        assert_like_lerobot(expected, sample, images=set(), lossy={TOP}, min_psnr=35.0, where=str(int(sample["index"])))
        compared += 1
    assert compared == sum(SPEC.lengths)


# -- rows and files the episodes table does not list ----------------------------------------------


def test_rows_and_files_no_episode_lists_are_named_with_counts(honest, tmp_path, caplog):
    """DROID carries 44 % rows of episodes its table does not list: they were dropped with no
    word and check said "ok to pack". Now check and pack name the file, the episodes and their
    rows, and files no episode uses; what is packed still equals LeRobot sample for sample."""
    root = _copy(honest, tmp_path)
    episodes = next((root / "meta" / "episodes").glob("*/*.parquet"))
    table = pq.read_table(episodes)
    pq.write_table(table.filter(pa.compute.not_equal(table["episode_index"], 1)), episodes)
    video = next((root / "videos" / TOP).glob("*/*.mp4"))
    shutil.copy(video, video.with_name("file-009.mp4"))
    report = check_dataset(str(root))
    assert report.ok and report.episodes == 2
    messages = [f.message for f in report.warnings]
    assert len(messages) == 2, messages
    assert "4 of its 15 rows belong to episodes meta/episodes does not list (1 (4 rows)): they are not packed" in messages[0]
    assert f"1 file(s) no episode of meta/episodes uses, not packed: videos/{TOP}/chunk-000/file-009.mp4" in messages[1]
    with caplog.at_level(logging.WARNING):
        pack_dataset(str(root), str(tmp_path / "pack"))
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [m for m in said if "not packed" in m] == [m.split("ERROR ")[-1] for m in messages]  # once each, as check said
    assert _samples_equal_lerobot(root, tmp_path / "pack") == 5 + 6


# -- statistics against what they describe --------------------------------------------------------


def _poison_stats(root: Path) -> None:
    path = root / "meta" / "stats.json"
    stats = json.loads(path.read_text())
    stats["action"]["mean"][0] = float("nan")
    stats["action"]["std"][1] = float("inf")
    stats["observation.state"]["min"] = [v + 1e6 for v in stats["observation.state"]["max"]]
    path.write_text(json.dumps(stats))  # NaN and Infinity, as Python's json writes them


def test_unsound_stats_are_named_and_never_reach_a_mixtures_aggregate(honest, tmp_path, caplog):
    """NaN means, infinite stds and min above max passed check ("ok to pack") and reached
    ``ds.meta.stats`` and, through a mixture's aggregate, every dataset's normalisation."""
    from lerobot_shards import MixtureDataset, MixtureFeatureWarning

    root = _copy(honest, tmp_path)
    _poison_stats(root)
    report = check_dataset(str(root))
    assert report.ok and len(report.warnings) == 1
    note = report.warnings[0].message
    assert "action: mean holds NaN (1 of 6 values), std holds inf (1 of 6 values)" in note
    assert "observation.state: min exceeds max in 6 of 6 values" in note
    with caplog.at_level(logging.WARNING):
        pack_dataset(str(root), str(tmp_path / "bad"))
    assert [r.getMessage() for r in caplog.records if "stats.json" in r.getMessage()] == [note]
    pack_dataset(str(honest), str(tmp_path / "good"))
    good = PackedDataset(str(tmp_path / "good")).meta.stats
    assert bool(np.isnan(PackedDataset(str(tmp_path / "bad")).meta.stats["action"]["mean"][0]))  # as LeRobot reads it
    with pytest.warns(MixtureFeatureWarning, match=r"action of bad \(mean holds NaN.*observation.state of bad \(min exceeds"):
        stats = MixtureDataset([str(tmp_path / "good"), str(tmp_path / "bad")], names=["good", "bad"]).meta.stats
    for key in ("action", "observation.state"):
        for name, value in stats[key].items():
            assert np.isfinite(value).all(), (key, name)
            np.testing.assert_allclose(value, good[key][name], err_msg=f"{key} {name}")  # the sound dataset's alone
    assert stats["next.reward"]["count"][0] == 2 * sum(SPEC.lengths)  # the sound features of both


# -- which frame each row reads -------------------------------------------------------------------


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = float((a.double() - b.double()).pow(2).mean()) * 255.0**2
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def _frames_like_lerobot(source: Path, pack: Path, *, min_psnr: float = 30.0) -> list[float]:
    """Every sample's camera within ``min_psnr`` of the oracle's frame (a re-encoded member:
    34-44 dB at 32x48 with the hevc settings; another frame of the episode is 13-24 dB), every
    other key exactly. Returns, per sample, the PSNR between the oracle's frame and the video's
    frame *at the row's place* (its frame_index-th of the window, what a pack giving row j the
    window's frame j gave): low where the rows' timestamps pick other frames."""
    against_place = []
    info = json.loads((source / "meta" / "info.json").read_text())
    for sample in PackedDataset(str(pack), shuffle=False):
        index = int(sample["index"])
        expected = reference_item(source, index, None)
        assert_like_lerobot(expected, sample, images=set(), lossy={TOP}, min_psnr=min_psnr, where=f"index {index}")
        episode, frame = int(sample["episode_index"]), int(sample["frame_index"])
        at_place = reference_item(source, index, None)  # the oracle's frame for this row ...
        ep = next(
            e
            for e in pq.read_table(next((source / "meta/episodes").glob("*/*.parquet"))).to_pylist()
            if e["episode_index"] == episode
        )
        from tests.lerobot_reference import decode_frames_like_lerobot, load_source

        rate = info["features"][TOP]["info"]["video.fps"]  # the camera's own rate
        placed = decode_frames_like_lerobot(load_source(str(source.resolve())), ep, TOP, [frame / rate], 1e-4, False).squeeze(
            0
        )  # ... against the video's frame at the row's place
        against_place.append(_psnr(at_place[TOP], placed))
    return against_place


def _rows_at_half_the_camera_rate(root: Path) -> None:
    """A camera recorded at its native 60 fps under a 30 fps dataset: every other row of a
    60 fps dataset dropped, the rest re-timed at 1/30 s, the videos (and their episode
    windows) untouched."""
    lengths = {}
    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        table = table.filter(pa.compute.equal(pa.compute.bit_wise_and(table["frame_index"], 1), 0))
        frames = pa.compute.divide(table["frame_index"], 2)
        table = _set(table, "frame_index", frames)
        table = _set(table, "timestamp", pa.compute.divide(frames.cast(pa.float64()), 30.0).cast(pa.float32()))
        for e in table["episode_index"].to_pylist():
            lengths[e] = lengths.get(e, 0) + 1
        pq.write_table(table, path)
    starts, at = {}, 0
    for e in sorted(lengths):
        starts[e], at = at, at + lengths[e]
    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        index = [starts[e] + f for e, f in zip(table["episode_index"].to_pylist(), table["frame_index"].to_pylist())]
        pq.write_table(_set(table, "index", pa.array(index, pa.int64())), path)
    episodes = next((root / "meta" / "episodes").glob("*/*.parquet"))
    table = pq.read_table(episodes)
    es = table["episode_index"].to_pylist()
    table = _set(table, "length", pa.array([lengths[e] for e in es], pa.int64()))
    table = _set(table, "dataset_from_index", pa.array([starts[e] for e in es], pa.int64()))
    table = _set(table, "dataset_to_index", pa.array([starts[e] + lengths[e] for e in es], pa.int64()))
    pq.write_table(table, episodes)
    _edit_info(root, fps=30, total_frames=sum(lengths.values()))


def test_a_camera_at_twice_the_rows_rate_gives_each_row_lerobots_frame(tmp_path):
    """60 fps video under a 30 fps info.json: LeRobot gives row k the frame at k/30 s, the
    video's frame 2k; the pack gave frame k, and check warned LeRobot would raise (it does
    not). Now the member holds LeRobot's frames in row order (re-encoded, said)."""
    root = tmp_path / "src"
    write_sample_dataset(root, SampleSpec(episodes=2, lengths=(10, 8), seed=12, fps=60, cameras=SPEC.cameras))
    _rows_at_half_the_camera_rate(root)
    report = check_dataset(str(root))
    assert report.ok and report.reencoded == [0, 1]
    said = [f.message for f in report.warnings]
    assert "(rows 0-4 read frames 0, 2, 4, 6, 8, as LeRobot" in said[0] and "(rows 0-3 read frames 0, 2, 4, 6, as" in said[1]
    pack_dataset(str(root), str(tmp_path / "pack"))
    assert verify(str(tmp_path / "pack"), decode=True).problems == []
    against_place = _frames_like_lerobot(root, tmp_path / "pack")
    assert len(against_place) == 9 and max(against_place[1:5]) < 30.0  # each row's place was another frame


def test_timestamps_out_of_order_give_each_row_its_own_frame(honest, tmp_path):
    """Two rows whose timestamps are swapped: LeRobot gives each the frame at its timestamp."""
    root = _copy(honest, tmp_path)

    def edit(table: pa.Table) -> pa.Table:
        stamps = table["timestamp"].to_pylist()
        stamps[1], stamps[2] = stamps[2], stamps[1]  # episode 0, rows 1 and 2
        return _set(table, "timestamp", pa.array(stamps, pa.float32()))

    _rewrite_data(root, edit)
    report = check_dataset(str(root))
    assert report.ok and report.reencoded == [0]
    assert "rows 0-4 read frames 0, 2, 1, 3, 4" in report.warnings[-1].message
    pack_dataset(str(root), str(tmp_path / "pack"))
    against_place = _frames_like_lerobot(root, tmp_path / "pack")
    assert max(against_place[1:3]) < 30.0 and min(against_place[:1] + against_place[3:]) == math.inf


def test_rows_without_a_frame_are_refused_as_lerobot_raises_and_pad_packs_them(honest, tmp_path):
    root = _copy(honest, tmp_path)

    def edit(table: pa.Table) -> pa.Table:
        stamps = table["timestamp"].to_pylist()
        stamps[6] += 0.5 / 30  # episode 1, row 1: half a frame off
        return _set(table, "timestamp", pa.array(stamps, pa.float32()))

    _rewrite_data(root, edit)
    report = check_dataset(str(root))
    assert [(f.level, f.episode) for f in report.errors] == [("error", 1)]
    assert "1 row(s) have no frame within 0.0001 s of their timestamp (from row 1)" in report.errors[0].message
    assert "--on-frame-mismatch drop-episode packs" not in report.fix() and "--episodes 0,2 packs the other 2" in report.fix()
    with pytest.raises(FrameMismatchError, match="LeRobotDataset raises FrameTimestampError on them"):
        pack_dataset(str(root), str(tmp_path / "pack"))
    report = pack_dataset(str(root), str(tmp_path / "padded"), on_frame_mismatch="pad")
    assert report.padded_episodes == [1]
