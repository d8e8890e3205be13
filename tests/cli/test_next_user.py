"""What the next new user hit (issue 49), each as the user met it: advice that fits the failure,
what `info` says about NVDEC, frame-mismatch policies that cover missing rows, nothing left
behind by a killed or refused job, paths that almost work, and the smaller rows.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from click.testing import CliRunner

from lerobot_shards import ArgumentError, MixtureDataset, PackedDataset, SourceError, pack_dataset, verify
from lerobot_shards.cli import main as cli
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.packed_fixtures import packed_hevc_nvdec  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
TOP, WRIST = "observation.images.top", "observation.images.wrist"


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, Path]:
    """A 3-episode source and its copy-mode pack."""
    root = tmp_path_factory.mktemp("small")
    write_sample_dataset(root / "src", SampleSpec(episodes=3, lengths=(5, 6, 7), cameras=(CameraSpec(TOP, 32, 32),)))
    pack_dataset(str(root / "src"), str(root / "pack"))
    return root / "src", root / "pack"


# -- 1. advice that fits the failure ------------------------------------------------------------------
def test_1_verify_of_a_path_with_no_pack_says_so_and_offers_no_repair(tmp_path):
    result = _run("verify", str(tmp_path / "DOES_NOT_EXIST"))
    assert result.exit_code == 1 and "no such directory" in result.output and "check the path" in result.output
    assert "--repair" not in result.output
    (tmp_path / "info.json").write_text("{}")
    result = _run("verify", str(tmp_path / "info.json"))
    assert "give the folder that holds manifest.json" in result.output and "--repair" not in result.output


def test_1_verify_of_a_mixture_says_to_verify_its_packs(small, tmp_path):
    mix = tmp_path / "mix"
    shutil.copytree(small[1], mix / "a")
    assert _run("mixture", "create", str(mix)).exit_code == 0
    for target in (mix, mix / "mixture.json"):
        result = _run("verify", str(target))
        assert result.exit_code == 1 and "checked pack by pack" in result.output and "--repair" not in result.output, (
            result.output
        )


def test_1_a_wrong_pin_is_not_a_repair_and_a_malformed_pin_is_bad_input(small):
    result = _run("verify", str(small[1]), "--manifest-sha256", "sha256:" + "a" * 64)
    assert result.exit_code == 1 and "a repair cannot change a pin" in result.output and "--repair" not in result.output
    result = _run("verify", str(small[1]), "--manifest-sha256", "sha256:abc")
    assert result.exit_code == 2 and "'sha256:abc' is not a pin: expected 'sha256:' and 64 hex digits" in result.output
    assert "re-packed or altered" not in result.output
    with pytest.raises(ArgumentError, match="is not a pin"):
        PackedDataset(str(small[1]), manifest_sha256="sha256:abc")


def test_1_a_part_pack_that_only_needs_finalize_is_told_so(small, tmp_path):
    dst = tmp_path / "parts"
    assert _run("pack", str(small[0]), str(dst), "--part", "0/2", "--shard-size-mb", "0.001").exit_code == 0
    result = _run("verify", str(dst))
    assert "finish packing it: re-run the pack command (every --part job of it)" in result.output, result.output
    assert _run("pack", str(small[0]), str(dst), "--part", "1/2", "--shard-size-mb", "0.001").exit_code == 0
    result = _run("verify", str(dst))
    assert result.exit_code == 1 and f"publish it with `lerobot-shards finalize {dst}`" in result.output, result.output
    assert "--repair" not in result.output


# -- 2. what info says about NVDEC ----------------------------------------------------------------------
def test_2_info_says_nvdec_from_the_stages_own_rules(tmp_path, packed_hevc_nvdec):
    """`--video h264` on an odd-sized camera writes High 4:4:4, which NVDEC refuses; frames
    under its minimum too. `info` said `NVDEC: yes` from the codec name; now it applies the
    stage's refusal (nvdec_refusal) to a real member, and says yes only where it would pass."""
    from lerobot_shards.reader.decode import nvdec_refusal

    write_sample_dataset(tmp_path / "odd", SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec(TOP, 145, 161),)))
    pack_dataset(str(tmp_path / "odd"), str(tmp_path / "h264"), video="h264")
    pack_dataset(str(tmp_path / "odd"), str(tmp_path / "hevc"), video="hevc")
    write_sample_dataset(tmp_path / "tiny", SampleSpec(episodes=1, lengths=(3,), cameras=(CameraSpec(TOP, 32, 32),)))
    pack_dataset(str(tmp_path / "tiny"), str(tmp_path / "tiny-hevc"), video="hevc")
    verdicts = {}
    for name in ("h264", "hevc", "tiny-hevc"):
        info = json.loads(_run("info", str(tmp_path / name), "--format", "json").output)
        verdicts[name] = info["nvdec"][TOP]
        row = _run("info", str(tmp_path / name)).output
        assert ("NVDEC: yes" in row) == verdicts[name], row
    assert verdicts == {"h264": False, "hevc": True, "tiny-hevc": False}
    info = json.loads(_run("info", str(packed_hevc_nvdec), "--format", "json").output)
    assert info["nvdec"] == {TOP: True}
    # The same function the stage refuses by: on the h264 4:4:4 member it names the chroma format.
    from tests.packed_fixtures import episodes_index, member_bytes

    row = episodes_index(tmp_path / "h264")[0]
    refusal, _ = nvdec_refusal(member_bytes(tmp_path / "h264", row, TOP), "h264", where=TOP)
    assert refusal and "h264 4:4:4 cannot be decoded by NVDEC" in refusal


# -- 3. --on-frame-mismatch covers missing rows ---------------------------------------------------------
def _drop_rows(src: Path, episode: int, frames: set[int]) -> None:
    for path in sorted((src / "data").glob("*/*.parquet")):
        table = pq.read_table(path)
        keep = [
            i
            for i, (e, f) in enumerate(zip(table["episode_index"].to_pylist(), table["frame_index"].to_pylist()))
            if not (e == episode and f in frames)
        ]
        pq.write_table(table.take(keep), path)


@pytest.mark.parametrize("missing", [{4, 5, 6}, {1, 2, 4}], ids=["at-the-end", "in-the-middle"])
def test_3_missing_rows_are_what_the_policy_decides(small, tmp_path, missing):
    src = tmp_path / "src"
    shutil.copytree(small[0], src)
    _drop_rows(src, 2, missing)
    result = _run("check", str(src))
    assert result.exit_code == 1, result.output
    assert "episode 2 has 4 rows, metadata says length 7" in result.output
    assert (
        "to pack: --on-frame-mismatch pad packs the 1 episode" in result.output
        and "--episodes 0-1 packs the other 2" in result.output
    )
    with pytest.raises(SourceError, match="--on-frame-mismatch pad fills each missing row from the one before it"):
        pack_dataset(str(src), str(tmp_path / "refused"))
    dropped = pack_dataset(str(src), str(tmp_path / "dropped"), on_frame_mismatch="drop-episode")
    assert dropped.dropped_episodes == [2] and dropped.episodes == 2
    padded = pack_dataset(str(src), str(tmp_path / "padded"), on_frame_mismatch="pad")
    assert padded.padded_episodes == [2] and padded.frames == 5 + 6 + 7
    honest = {int(s["index"]): s for s in PackedDataset(str(small[1]), shuffle=False)}
    got = {int(s["index"]): s for s in PackedDataset(str(tmp_path / "padded"), shuffle=False)}
    assert got.keys() == honest.keys()
    start = 11  # episode 2's first index
    for frame in range(7):
        sample, truth = got[start + frame], honest[start + frame]
        assert torch.equal(sample[TOP], truth[TOP])  # every row keeps its own video frame
        assert int(sample["frame_index"]) == frame and float(sample["timestamp"]) == pytest.approx(frame / 30)
        source = max((f for f in range(frame + 1) if f not in missing), default=min(set(range(7)) - missing))
        assert torch.equal(sample["observation.state"], honest[start + source]["observation.state"])


# -- 4. nothing left behind -------------------------------------------------------------------------------
def test_4_a_killed_packs_staging_is_swept_by_its_rerun(tmp_path):
    """A SIGKILLed pack (a preempted SLURM job) left its staging shard in the temp folder for
    good; the re-run of the same pack now removes what a dead run of it staged."""
    src = tmp_path / "src"
    write_sample_dataset(src, SampleSpec(episodes=4, lengths=(30, 30, 30, 30), cameras=(CameraSpec(TOP, 96, 128),)))
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp)}
    dst = tmp_path / "dst"
    command = [sys.executable, "-m", "lerobot_shards", "pack", str(src), str(dst), "--video", "h264", "--shard-size-mb", "0.01"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300  # a hang guard: staging starts within seconds
    while not any(p.name.startswith("lerobot-shards-") for p in temp.iterdir()) and time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail("the pack ended before it staged a shard")
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    left = [p for p in temp.iterdir() if p.name.startswith("lerobot-shards-")]
    assert left, "the killed pack left nothing to sweep"
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert "staging folder(s) a killed run" in rerun.stderr
    assert not [p for p in temp.iterdir() if p.name.startswith("lerobot-shards-")]
    assert verify(str(dst)).ok


def test_4_a_failed_sample_write_leaves_nothing_in_its_folder(tmp_path, monkeypatch):
    from lerobot_shards.testing import dataset as writer

    calls = {"n": 0}
    real = writer.encode_episode_video

    def fail_second(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full (simulated)")
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "encode_episode_video", fail_second)
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    with pytest.raises(OSError, match="simulated"):
        write_sample_dataset(out, SampleSpec(episodes=3, lengths=(3, 3, 3), cameras=(CameraSpec(TOP, 32, 32),)))
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]  # no lerobot-sample-*, no partial dataset
    with pytest.raises(OSError, match="simulated"):
        calls["n"] = 0
        write_sample_dataset(tmp_path / "new", SampleSpec(episodes=3, lengths=(3, 3, 3), cameras=(CameraSpec(TOP, 32, 32),)))
    assert not (tmp_path / "new").exists()


def test_4_a_refused_mixture_create_touches_nothing_and_says_what_stays(small, tmp_path):
    """Issue 55 row 6 reverses issue 49's: a refusal moved mixture.json aside, and a trainer
    reading that mixture lost it to a typo. Now a refusal writes and moves nothing, and says
    that the mixture.json in place is unchanged and what it lists."""
    mix = tmp_path / "mix"
    shutil.copytree(small[1], mix / "a")
    assert _run("mixture", "create", str(mix)).exit_code == 0
    before = {p.relative_to(mix): p.read_bytes() for p in mix.rglob("*") if p.is_file() and p.relative_to(mix).parts[0] != "a"}
    (mix / "broken").mkdir()  # an unfinished pack: a strict mixture create refuses
    (mix / "broken" / "pack-plan.json").write_text("{}")
    result = _run("mixture", "create", str(mix))
    assert result.exit_code == 1 and "mixture.json not written" in result.output
    assert "the existing mixture.json is unchanged (it lists 1 dataset (a), pin sha256:" in result.output, result.output
    typo = _run("mixture", "create", str(mix), "--name", f"a={mix / 'nope'}")
    assert typo.exit_code == 1 and "the existing mixture.json is unchanged" in typo.output, typo.output
    after = {
        p.relative_to(mix): p.read_bytes()
        for p in mix.rglob("*")
        if p.is_file() and p.relative_to(mix).parts[0] not in ("a", "broken")
    }
    assert after == before
    assert len(MixtureDataset(str(mix / "mixture.json"))) == 18  # the trainer's mixture still reads


# -- 5. paths that almost work ----------------------------------------------------------------------------
def test_5_a_mixture_folder_a_pack_folder_and_a_missing_output_folder(small, tmp_path):
    mix = tmp_path / "mix"
    shutil.copytree(small[1], mix / "a")
    result = _run("mixture", "create", str(mix))
    assert result.exit_code == 0 and "pin sha256:" in result.output  # the mixture's pin, to copy
    pin = next(line.split()[1] for line in result.output.splitlines() if line.startswith("pin "))
    assert len(MixtureDataset(str(mix), manifest_sha256=pin)) == 18  # the folder mixture create took
    with pytest.raises(ArgumentError, match=r"is a packed dataset, not a mixture: open it with lerobot_shards.PackedDataset"):
        MixtureDataset(str(mix / "a"))
    result = _run("mixture", "create", str(mix / "a"))
    assert result.exit_code == 1 and "is a packed dataset, not a folder of packs" in result.output
    assert "index (unfinished)" not in result.output and not (mix / "a" / "mixture.json").exists()
    result = _run("preview", str(small[1]), "-o", str(tmp_path / "missing" / "x.html"))
    assert result.exit_code == 1 and "no such folder to write x.html in" in result.output
    assert "Traceback" not in result.output and "episode 1/" not in result.output  # refused before decoding


# -- 6. the smaller rows ------------------------------------------------------------------------------------
def test_6_windows_not_on_a_frame_say_the_nearest_offsets_and_the_frames_form(small, tmp_path):
    result = _run("pack", str(small[0]), str(tmp_path / "a"), "--window", 'chunk={"action":[0,0.05]}')
    assert result.exit_code == 1
    assert "the nearest multiples are [0.0, 0.066667] s, frame offsets [0, 2] at 30 fps" in result.output
    assert "--window-frames chunk='{\"action\":[0,2]}'" in result.output and result.output.rstrip().endswith("(--window)")
    result = _run("pack", str(small[0]), str(tmp_path / "b"), "--window-frames", 'chunk={"nope":[0,1]}')
    assert result.exit_code == 1 and result.output.rstrip().endswith("(--window-frames)"), result.output


def test_6_stats_counts_are_ints_and_admissions_are_explained(small):
    dataset = PackedDataset(str(small[1]), shuffle=False)
    list(dataset)
    stats = dataset.stats()
    assert isinstance(stats["samples"], int) and stats["samples"] == 18 and isinstance(stats["episodes_admitted"], int)
    assert isinstance(stats["fetch_seconds"], float)
    demo = (ROOT / "scripts" / "demo.py").read_text()
    assert "admitted by each" in demo


def test_6_repair_of_a_copied_pack_warns_once_and_a_part_without_shards_says_so(small, tmp_path, caplog):
    copied = tmp_path / "copied"
    pack_dataset(str(small[0]), str(copied), shard_size_mb=0.001)
    journal = tmp_path / "other-journal"  # another machine's journal: it vouches for none of them
    with caplog.at_level("WARNING"):
        report = pack_dataset(str(small[0]), str(copied), shard_size_mb=0.001, repair=True, journal=str(journal))
    said = [r for r in caplog.records if "not in this machine's pack journal" in r.getMessage()]
    assert report.shards_written == 3 and len(said) == 1, [r.getMessage() for r in said]
    result = _run("pack", str(small[0]), str(tmp_path / "parts"), "--part", "4/5")
    assert result.exit_code == 0 and "this part has no shard to pack (the plan has fewer shards than parts)" in result.output


# -- 7. the train journey on a fresh machine -----------------------------------------------------------
def test_7_without_lerobot_the_message_says_how_to_get_both_in_one_environment():
    from lerobot_shards.train.lerobot_train import missing_lerobot_message

    old = missing_lerobot_message((3, 11), "/venv/bin/python")
    assert (
        "needs Python 3.12 or later (this is 3.11" in old
        and "install lerobot-shards into the environment where LeRobot runs" in old
    )
    assert f"pip install -e '{ROOT}[pack,s3]'" in old  # this checkout (issue 56 row 16: it was a placeholder)
    new = missing_lerobot_message((3, 12), "/env/bin/python")
    assert new.endswith("pip install 'lerobot[dataset]==0.6.1' 'accelerate==1.16.0'")
    readme = (ROOT / "README.md").read_text()
    train = readme[readme.index("### Train with lerobot-train") :]
    assert "lerobot-env/bin/pip install -e '/path/to/lerobot-shards[pack,s3]' 'lerobot[dataset]==0.6.1'" in train
    # what the message advises is what the README says and make parity installs (issue 68 row 12:
    # the project resolved together with LeRobot, accelerate pinned to the tested one)
    assert "lerobot-env/bin/pip install 'lerobot[dataset]==0.6.1' 'accelerate==1.16.0'" in train
    assert "[pack,s3]' 'lerobot[dataset]==0.6.1'" in old
    setup = (ROOT / "scripts" / "parity_setup.sh").read_text()
    assert "pip install -q 'lerobot[dataset]==0.6.1' 'accelerate==1.16.0'" in setup
    assert "pip install -q -e '.[pack,s3]' 'lerobot[dataset]==0.6.1'" in setup
