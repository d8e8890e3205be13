"""The lerobot-train integration's own parts (lerobot_shards/train/lerobot_train.py), without LeRobot: its
flags, the version gate, and the loader the trainer receives: epochs through LeRobot's
``cycle()``, the state written beside a checkpoint and a resume from it. ``make parity``
runs the whole thing through LeRobot 0.6.1's real trainer (scripts/parity_train.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset, create_mixture, pack_dataset
from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.testing import SampleSpec, write_sample_dataset
from lerobot_shards.train.lerobot_train import (
    STATE_FILE,
    LeRobotTrainError,
    ShardsOptions,
    TrainData,
    check_lerobot,
    checkpoint_loader_state,
    policy_windows,
    save_loader_state,
    split_args,
)
from tests.packed_fixtures import *

TOTAL = 141


def _cycle(iterable):
    """LeRobot 0.6.1's ``lerobot.utils.utils.cycle``: iter() again at every StopIteration."""
    iterator = iter(iterable)
    while True:
        try:
            yield next(iterator)
        except StopIteration:
            iterator = iter(iterable)


def test_our_flags_are_taken_out_and_the_rest_is_lerobots():
    given, rest = split_args(
        [
            "--policy.type=act",
            "--shards.storage_options",
            '{"endpoint_url": "http://x"}',
            "--shards.episode_pool_size=4",
            "--steps=10",
            "--shards.decode_device=none",
        ]
    )
    assert rest == ["--policy.type=act", "--steps=10"]
    assert given == {"storage_options": {"endpoint_url": "http://x"}, "episode_pool_size": 4, "decode_device": None}
    assert ShardsOptions.from_flags(given).read_options().fetch_threads == 2
    assert ShardsOptions.from_flags(given).read_options().episode_pool_size == 4
    with pytest.raises(ArgumentError, match=r"unknown option --shards.pool; known: .*--shards.storage_options"):
        split_args(["--shards.pool=3"])
    with pytest.raises(ArgumentError, match=r"unknown option --shards.seed \(the trainer's --seed sets it\)"):
        split_args(["--shards.seed=3"])
    with pytest.raises(ArgumentError, match=r"--shards.episode_pool_size='many'"):
        split_args(["--shards.episode_pool_size=many"])
    with pytest.raises(ArgumentError, match="not a JSON object"):
        split_args(["--shards.storage_options=[1]"])


def test_without_lerobot_or_on_an_untested_version_it_says_what_to_install(monkeypatch):
    import importlib.metadata as metadata

    def version(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", version)
    with pytest.raises(
        LeRobotTrainError, match=r"LeRobot's trainer, which needs Python 3.12 or later .*install lerobot-shards into"
    ):
        check_lerobot()
    monkeypatch.setattr(metadata, "version", lambda name: "0.7.0")
    with pytest.raises(LeRobotTrainError, match=r"lerobot 0.7.0 is installed; .* tested with lerobot 0.6.1"):
        check_lerobot()
    assert check_lerobot(allow_untested=True) == "0.7.0"


def _trainer_loader(root, state=None, workers=1):
    """What the trainer holds: TrainData in its DataLoader, handed to accelerate's prepare."""
    data = TrainData(PackedDataset(str(root), seed=7, return_uint8=True), options=ShardsOptions(), resume_state=state)
    trainer_dl = torch.utils.data.DataLoader(data, batch_size=8, num_workers=workers)
    return data, data.loader(trainer_dl)


def _plan(root, batches):
    loader, out, epoch = BatchLoader(PackedDataset(str(root), seed=7, return_uint8=True), batch_size=8, num_workers=1), [], 0
    while len(out) < batches:
        loader.set_epoch(epoch)
        out += [b["index"].tolist() for b in loader]
        epoch += 1
    return out[:batches]


def test_the_trainer_gets_the_readers_batches_epoch_after_epoch_and_resumes_from_a_checkpoint(packed_copy, tmp_path):
    data, loader = _trainer_loader(packed_copy)
    assert data.num_frames == TOTAL and data.num_episodes == 9 and data.meta.fps == 30
    per_epoch = len(loader)
    steps = per_epoch + 5  # past an epoch end, as lerobot-train's step loop goes
    stream = _cycle(loader)
    got = []
    for step in range(1, steps + 1):
        got.append(next(stream)["index"].tolist())
        if step == per_epoch + 2:  # lerobot-train saves after the step's update
            checkpoint = tmp_path / "checkpoints" / f"{step:06d}"
            save_loader_state(checkpoint, step)
    assert got == _plan(packed_copy, steps)
    epoch_zero = sorted(i for batch in got[:per_epoch] for i in batch)
    assert epoch_zero == sorted(set(epoch_zero)) and len(epoch_zero) == TOTAL  # each sample once per epoch

    saved = json.loads((checkpoint / "training_state" / STATE_FILE).read_text())
    assert saved["step"] == per_epoch + 2 and saved["loader"]["epoch"] == 1 and saved["loader"]["samples_consumed"] == 16
    cfg = SimpleNamespace(resume=True, checkpoint_path=str(checkpoint))
    _, resumed = _trainer_loader(packed_copy, state=checkpoint_loader_state(cfg))
    stream = _cycle(resumed)
    assert [next(stream)["index"].tolist() for _ in range(3)] == got[per_epoch + 2 :]

    with pytest.raises(LeRobotTrainError, match=r"lerobot_shards_loader.json: missing\. --resume=true continues"):
        checkpoint_loader_state(SimpleNamespace(resume=True, checkpoint_path=str(tmp_path / "plain-lerobot-checkpoint")))
    assert checkpoint_loader_state(SimpleNamespace(resume=False, checkpoint_path=None)) is None


def test_log_samples_writes_what_each_step_received(packed_copy, tmp_path):
    data = TrainData(
        PackedDataset(str(packed_copy), seed=1, return_uint8=True),
        options=ShardsOptions(log_samples=str(tmp_path / "log" / "s.jsonl")),
        resume_state=None,
    )
    loader = data.loader(torch.utils.data.DataLoader(data, batch_size=16, num_workers=0))
    received = [b["index"].tolist() for b in loader]
    logged = [json.loads(line) for line in (tmp_path / "log" / "s.jsonl.rank0").read_text().splitlines()]
    assert [r["index"] for r in logged] == received and {r["epoch"] for r in logged} == {0}


def test_decode_device_decodes_in_the_training_process_with_the_same_batches(packed_copy):
    """--shards.decode_device: workers ship members, a DecodeStage decodes each batch before the
    trainer sees it (here on the CPU; cuda is the same path with NVDEC)."""

    def batches(decode_device):
        data = TrainData(
            PackedDataset(str(packed_copy), seed=4, return_uint8=True, decode_device=decode_device),
            options=ShardsOptions.from_flags({"decode_device": decode_device}),
            resume_state=None,
        )
        loader = data.loader(torch.utils.data.DataLoader(data, batch_size=8, num_workers=1))
        return [(b["index"].tolist(), b["observation.images.top"]) for b in loader]

    plain, staged = batches(None), batches("cpu")
    assert [i for i, _ in plain] == [i for i, _ in staged]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(plain, staged))


def _state(checkpoint, options: dict, **record) -> list[str]:
    """A loader state file in ``checkpoint`` recording ``options``; returns the resume argv."""
    path = checkpoint / "training_state" / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "step": 10, "loader": {}, "options": options, **record}))
    return [f"--config_path={checkpoint}/pretrained_model/train_config.json", "--resume=true"]


def test_a_checkpoint_cannot_choose_where_credentials_go(packed_copy, tmp_path, monkeypatch):
    """Issue 41 finding 3: a resume reused every option the checkpoint recorded, storage options
    included: a state file naming another endpoint sent the user's Hub token there. Now a host,
    credential, path or pin comes only from this run's flags; a recorded one that differs refuses
    the resume by name, before anything is read. Two loopback Hub servers: the user's (A, serving
    the pack) and the one a handed-over checkpoint names (B): B receives nothing, ever."""
    from lerobot_shards.train.lerobot_train import resume_options
    from tests.hub_server import HubServer

    monkeypatch.setenv("HF_TOKEN", "hf_the_users_own_token")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    a, b = HubServer().start(), HubServer().start()
    try:
        a.repo("org/pack").add_commit(packed_copy, "main")
        for given in ({}, {"storage_options": {"endpoint": a.url}}):
            argv = _state(tmp_path / "ckpt1", {"storage_options": {"endpoint": b.url}, "episode_pool_size": 3})
            with pytest.raises(
                LeRobotTrainError, match=r"--shards.storage_options other than this run's .* takes no host, credential"
            ):
                resume_options(argv, given)
        argv = _state(tmp_path / "ckpt2", {"manifest_sha256": "sha256:" + "0" * 64})
        with pytest.raises(LeRobotTrainError, match=r"--shards.manifest_sha256 other than this run's"):
            resume_options(argv, {})
        # The same endpoint the user gives: accepted; other recorded options (parsed by their flags) carry over.
        argv = _state(tmp_path / "ckpt3", {"storage_options": {"endpoint": a.url}, "episode_pool_size": 3, "cache_dir": None})
        options = resume_options(argv, {"storage_options": {"endpoint": a.url}})
        read = options.read_options()
        assert read.episode_pool_size == 3 and read.storage_options == {"endpoint": a.url}
        samples = list(PackedDataset("hf://datasets/org/pack", options=read, shuffle=False))
        assert len(samples) == TOTAL and a.counts["get"] > 0
        assert not b.counts and not b.log, "the checkpoint's host received a request"
    finally:
        a.stop()
        b.stop()


def test_a_resume_logs_samples_where_this_run_says_never_where_the_checkpoint_did(tmp_path):
    """The sample log is where a run writes: a resumed run may log to a new file (as
    scripts/parity_train.py does), and a checkpoint's recorded log path is never taken."""
    from lerobot_shards.train.lerobot_train import resume_options

    argv = _state(tmp_path / "ckpt", {"log_samples": str(tmp_path / "theirs.jsonl"), "episode_pool_size": 3})
    assert resume_options(argv, {"log_samples": str(tmp_path / "mine.jsonl")}).log_samples == str(tmp_path / "mine.jsonl")
    resumed = resume_options(argv, {})
    assert resumed.log_samples is None and resumed.read_options().episode_pool_size == 3


@pytest.mark.parametrize(
    "content,why",
    [
        ("not json", r"not valid JSON|not JSON"),
        ("[1, 2]", "a JSON list, not an object"),
        ('{"format": 1, "step": "ten", "loader": {}, "options": {}}', "step 'ten' is not a non-negative integer"),
        ('{"format": 1, "step": 3, "options": {}}', "'loader' is not an object"),
        ('{"format": 1, "step": 3, "loader": {}, "options": {"episode_pool_size": "many"}}', r"episode_pool_size='many'"),
    ],
)
def test_a_malformed_loader_state_is_one_named_line(tmp_path, content, why):
    from lerobot_shards.train.lerobot_train import resume_options

    path = tmp_path / "ckpt" / "training_state" / STATE_FILE
    path.parent.mkdir(parents=True)
    path.write_text(content)
    argv = [f"--config_path={tmp_path}/ckpt/pretrained_model/train_config.json"]
    with pytest.raises(LeRobotTrainError, match=why) as caught:
        resume_options(argv, {})
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
    if "episode_pool_size" not in content:  # the loader state itself is checked the same way
        with pytest.raises(LeRobotTrainError, match=why):
            checkpoint_loader_state(SimpleNamespace(resume=True, checkpoint_path=tmp_path / "ckpt"))


def _lerobot_resolve(policy, meta):
    """LeRobot 0.6.1's ``resolve_delta_timestamps`` rule (lerobot/datasets/factory.py), which
    ``make parity`` runs for real (scripts/parity_train.py, mixed rates)."""
    out = {}
    for key in meta.features:
        if key == "action" and policy.action_delta_indices is not None:
            out[key] = [i / meta.fps for i in policy.action_delta_indices]
        if key.startswith("observation.") and policy.observation_delta_indices is not None:
            out[key] = [i / meta.fps for i in policy.observation_delta_indices]
    return out or None


def test_a_mixture_of_rates_is_refused_naming_them_or_read_in_frames_at_each_rate(tmp_path):
    """Issue 56 row 1: LeRobot turns a policy's steps into seconds at ``meta.fps``, which a mixture
    of 30 and 15 fps datasets does not have (it crashed inside LeRobot with a TypeError)."""
    for name, fps in (("fast", 30), ("slow", 15)):
        write_sample_dataset(tmp_path / "src" / name, SampleSpec(episodes=2, lengths=(5, 6), fps=fps, cameras=()))
        pack_dataset(str(tmp_path / "src" / name), str(tmp_path / "mix" / name))
    create_mixture(str(tmp_path / "mix"), names={"fast": "fast", "slow": "slow"})
    probe = MixtureDataset(str(tmp_path / "mix" / "mixture.json"))
    assert probe.meta.fps is None
    act = SimpleNamespace(action_delta_indices=list(range(4)), observation_delta_indices=None)
    with pytest.raises(LeRobotTrainError) as refused:
        policy_windows(_lerobot_resolve, act, probe, ShardsOptions().mixed_rates)
    assert "different rates (fast 30 fps, slow 15 fps)" in str(refused.value)
    flag = "--shards.mixed_rates=frames"
    assert f"Add {flag} to take" in str(refused.value)
    given, rest = split_args([flag, "--policy.type=act"])  # the advised flag, as printed
    assert rest == ["--policy.type=act"]
    frames = policy_windows(_lerobot_resolve, act, probe, ShardsOptions.from_flags(given).mixed_rates)
    assert frames == {"action": [0, 1, 2, 3]}
    dataset = MixtureDataset(str(tmp_path / "mix" / "mixture.json"), delta_frames=frames)
    for sample in dataset:
        start = int(sample["episode_index"]) * 1000 + int(sample["frame_index"])
        steps = (sample["action"][:, 0] - start).tolist()
        assert steps == [min(f, steps[-1]) for f in range(4)]  # consecutive frames of its own dataset
    # A policy without windows, and one rate, need no choice.
    plain = SimpleNamespace(action_delta_indices=None, observation_delta_indices=None)
    assert policy_windows(_lerobot_resolve, plain, probe, "refuse") is None
    one_rate = PackedDataset(str(tmp_path / "mix" / "fast"))
    assert policy_windows(_lerobot_resolve, act, one_rate, "refuse") is None
    with pytest.raises(ArgumentError, match="mixed_rates"):
        ShardsOptions.from_flags(split_args(["--shards.mixed_rates=seconds"])[0])


def test_a_typo_an_existing_output_dir_and_the_install_hint_say_the_fix(tmp_path):
    """Issue 56 row 16: a misspelt --shards flag names the one meant; a new run into an existing
    --output_dir is refused before LeRobot loads (its FileExistsError was a traceback under
    ``python -m``) with the resume command; the install hint names this checkout."""
    from pathlib import Path

    from lerobot_shards.train.lerobot_train import existing_output_dir, missing_lerobot_message

    with pytest.raises(ArgumentError, match=r"unknown option --shards.episode_pool; did you mean --shards.episode_pool_size\?"):
        split_args(["--shards.episode_pool=4"])
    run = tmp_path / "act-run"
    assert existing_output_dir([f"--output_dir={run}"]) is None
    config = run / "checkpoints" / "last" / "pretrained_model" / "train_config.json"
    config.parent.mkdir(parents=True)
    config.write_text("{}")
    refusal = existing_output_dir(["--policy.type=act", f"--output_dir={run}"])
    assert refusal == (
        f"--output_dir={run} already exists: continue that run with --resume=true --config_path={config}, "
        "or give another --output_dir"
    )
    assert existing_output_dir([f"--output_dir={run}", "--resume=true"]) is None
    # The forms LeRobot's parser also takes: a value after a space, true spelt otherwise.
    assert existing_output_dir(["--output_dir", str(run)]) == refusal
    assert existing_output_dir(["--output_dir", str(run), "--resume", "True"]) is None
    assert existing_output_dir([f"--output_dir={run}", "--resume=yes"]) is None
    assert existing_output_dir([f"--output_dir={run}", "--resume=false"]) == refusal
    checkout = Path(__file__).resolve().parents[2]
    message = missing_lerobot_message((3, 11), "/usr/bin/python3.11")
    assert f"pip install -e '{checkout}[pack,s3]'" in message and "PATH_TO" not in message


def test_lerobots_own_sampler_is_the_default_and_pool_runs_resume_as_pool(tmp_path):
    """Issue 66: ``--shards.order=sampler`` (default) replaces one name and leaves order, split,
    checkpoints and resume to LeRobot; a checkpoint with a loader state is a pool run's (every
    run before --shards.order was), resumed in that order unless told otherwise."""
    from lerobot_shards.train.lerobot_train import make_train_data, resume_options

    assert ShardsOptions().order == "sampler" and ShardsOptions.from_flags({"order": "pool"}).order == "pool"
    with pytest.raises(ArgumentError, match="order"):
        ShardsOptions.from_flags({"order": "random"})
    argv = _state(tmp_path / "ckpt", {"episode_pool_size": 3})  # a state file without "order"
    assert resume_options(argv, {}).order == "pool"
    assert resume_options(argv, {"order": "sampler"}).order == "sampler"
    assert resume_options(["--config_path=" + str(tmp_path / "plain" / "pretrained_model" / "x.json")], {}).order == "sampler"
    # The GPU stage decodes outside the workers: LeRobot's own loader cannot, so the flag says which order can.
    cfg = SimpleNamespace(dataset=SimpleNamespace(root="/packs/a", eval_split=0.0, episodes=None))
    # Refused before LeRobot is imported (it is not installed here) or anything opened.
    with pytest.raises(LeRobotTrainError, match=r"decode_device .* add --shards.order=pool"):
        make_train_data(cfg, ShardsOptions.from_flags({"decode_device": "cuda"}))


def test_in_lerobots_order_each_built_batch_is_logged(packed_copy, tmp_path):
    from lerobot_shards.train.lerobot_train import SampledData

    data = SampledData(str(packed_copy), log_samples=str(tmp_path / "log" / "s.jsonl"), episodes=[2, 5], return_uint8=True)
    assert data.episodes == [2, 5] and len(data) == 30 + 25
    loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=[54, 0, 3, 29, 30], num_workers=1)
    received = [b["index"].tolist() for b in loader]
    logged = [json.loads(line) for line in (tmp_path / "log" / "s.jsonl.rank0.worker0").read_text().splitlines()]
    assert [r["index"] for r in logged] == received and [r["positions"] for r in logged] == [[54, 0, 3, 29], [30]]
    assert received[0][0] == 62 + 24  # position 54: episode 5's last frame (episode 5 starts at index 62)
