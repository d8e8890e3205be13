"""Mixtures (issue 8): exactly-once over the union by default, weights honored, resume equality
across workers, heterogeneous datasets (cameras, state sizes, fps) batched with masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lerobot_shards import BatchLoader, MixtureDataset, PackedDataset, create_mixture, pack_dataset
from lerobot_shards.core.errors import MixtureSpecError, ResumeStateError
from lerobot_shards.reader.plan import PlanError
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

TOP = CameraSpec("observation.images.top", 32, 48)


@pytest.fixture(scope="module")
def mixture_root(tmp_path_factory):
    """Three packed datasets: different state sizes, a missing camera, another fps, a rename."""
    root = tmp_path_factory.mktemp("mixture")
    specs = {
        "arm": SampleSpec(episodes=3, lengths=(6, 9, 4), cameras=(TOP, CameraSpec("observation.images.wrist", 32, 32))),
        "slow": SampleSpec(episodes=2, lengths=(5, 7), fps=15, state_dim=4, action_dim=4, cameras=(TOP,)),
        "front": SampleSpec(episodes=2, lengths=(3, 8), cameras=(CameraSpec("observation.images.front", 32, 48),), seed=3),
    }
    for name, spec in specs.items():
        write_sample_dataset(root / "src" / name, spec)
        pack_dataset(str(root / "src" / name), str(root / "packed" / name))
    return root / "packed"


def _mixture(root, **kwargs) -> MixtureDataset:
    return MixtureDataset(
        [str(root / n) for n in ("arm", "slow", "front")],
        key_map={"front": {"observation.images.front": "observation.images.top"}},
        return_uint8=True,
        **kwargs,
    )


TOTAL = 6 + 9 + 4 + 5 + 7 + 3 + 8


@pytest.mark.parametrize("world_size,num_workers", [(1, 0), (1, 2), (2, 0), (2, 2)])
def test_default_weights_are_exactly_once_over_the_union(mixture_root, world_size, num_workers):
    seen = []
    for rank in range(world_size):
        dataset = _mixture(mixture_root, rank=rank, world_size=world_size, seed=1)
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=num_workers)
        mine = [(d, i) for b in loader for d, i in zip(b["dataset_index"].tolist(), b["index"].tolist())]
        assert len(mine) == len(dataset) == TOTAL // world_size
        seen += mine
    assert len(seen) == len(set(seen)) and len(seen) >= TOTAL - (world_size - 1)


def test_weights_are_honored(mixture_root):
    dataset = _mixture(mixture_root, weights=[3, 1, 0], samples_per_epoch=600, seed=2)
    samples = [(int(s["dataset_index"]), int(s["index"])) for s in dataset]
    # Quotas are exact per epoch: 600 split 3:1:0.
    assert np.bincount([d for d, _ in samples], minlength=3).tolist() == [450, 150, 0]
    # Sources cycle: "arm" has 19 anchors drawn 450 times, each cycle exactly once, so every
    # anchor comes 23 or 24 times (450 = 23 x 19 + 13).
    per_anchor = np.bincount([i for d, i in samples if d == 0])
    assert sorted(set(per_anchor[per_anchor > 0].tolist())) == [23, 24] and (per_anchor == 24).sum() == 13
    # The next epoch continues the cycle where this one stopped.
    dataset.set_epoch(1)
    both = np.bincount([i for d, i in samples if d == 0] + [int(s["index"]) for s in dataset if int(s["dataset_index"]) == 0])
    assert set(both[both > 0].tolist()) == {47, 48}  # 900 = 47 x 19 + 7


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("world_size", [1, 2])
def test_resume_equality_across_ranks_and_workers(mixture_root, weighted, world_size):
    kwargs = {"weights": [1, 2, 1], "samples_per_epoch": 96} if weighted else {}

    def run(rank, state=None):
        dataset = _mixture(mixture_root, seed=4, rank=rank, world_size=world_size, **kwargs)
        if state:
            dataset.load_state_dict(state)
        loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)
        return [list(zip(b["dataset_index"].tolist(), b["index"].tolist())) for b in loader]

    for rank in range(world_size):
        full = run(rank)
        for k in (1, 5):
            # samples_consumed is identical on every rank: per-rank counts are equal.
            saver = _mixture(mixture_root, seed=4, rank=rank, world_size=world_size, **kwargs)
            state = saver.state_dict(samples_consumed=sum(len(b) for b in full[:k]), batch_size=4, num_workers=2)
            resumed = run(rank, state)
            assert resumed == full[k:], f"rank {rank} after {k} batches"


def _mixture_chain(root, shapes, batches_per_phase, **kwargs) -> list[tuple[int, int]]:
    """One epoch through [(world_size, num_workers, batch_size), ...], saving and resuming
    between phases (see tests/reader/test_reader_resume_chains.py); returns the (dataset, index) pairs."""
    seen, state, consumed = [], None, 0
    for phase, (world_size, num_workers, batch_size) in enumerate(shapes):
        last, saved, counts = phase == len(shapes) - 1, [], []
        for rank in range(world_size):
            dataset = _mixture(root, seed=4, rank=rank, world_size=world_size, **kwargs)
            if state is not None:
                dataset.load_state_dict(state)
            expected = len(dataset)
            mine = []
            for k, b in enumerate(torch.utils.data.DataLoader(dataset, batch_size=batch_size, num_workers=num_workers)):
                if not last and k == batches_per_phase[phase]:
                    break
                mine += list(zip(b["dataset_index"].tolist(), b["index"].tolist()))
            counts.append(len(mine))
            seen += mine
            if last:
                assert len(mine) == expected, f"len(ds) {expected} but {len(mine)} served"
            else:
                saved.append(
                    dataset.state_dict(samples_consumed=consumed + len(mine), batch_size=batch_size, num_workers=num_workers)
                )
        assert len(set(counts)) == 1, f"phase {phase}: ranks served {counts}"
        if not last:
            assert all(s == saved[0] for s in saved)
            state, consumed = saved[0], saved[0]["samples_consumed"]
    return seen


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_proportional_chain_of_shapes_is_exactly_once_over_the_union(mixture_root):
    seen = _mixture_chain(mixture_root, [(2, 2, 3), (3, 0, 2), (1, 3, 4)], [2, 3])
    assert len(seen) == len(set(seen)), "a sample was served twice"
    assert TOTAL - (1 + 2 + 0) <= len(seen) <= TOTAL


@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_weighted_chain_serves_each_planned_draw_once(mixture_root):
    # Weighted draws repeat anchors by design (sources cycle); what a resume must not do is
    # serve a planned draw twice or skip one: the resumed draws are the uninterrupted ones
    # for an unchanged shape, and the same multiset minus re-split drops for another shape.
    kwargs = {"weights": [1, 2, 1], "samples_per_epoch": 96}
    full = sorted(_mixture_chain(mixture_root, [(2, 2, 3)], [], **kwargs))
    same = sorted(_mixture_chain(mixture_root, [(2, 2, 3), (2, 2, 3)], [4], **kwargs))
    assert same == full
    chained = _mixture_chain(mixture_root, [(2, 2, 3), (3, 1, 2), (1, 0, 5)], [3, 2], **kwargs)
    from collections import Counter

    missing = Counter(full) - Counter(chained)
    assert not Counter(chained) - Counter(full), "a draw the plan does not hold was served"
    assert sum(missing.values()) <= 2 + 0, missing  # re-split drops: < 3 ranks, then < 1


def test_a_mixture_state_of_another_configuration_is_refused(mixture_root):
    state = _mixture(mixture_root, seed=4).state_dict(samples_consumed=4, batch_size=4, num_workers=0)
    with pytest.raises(ResumeStateError, match="seed: found 4, expected 5"):
        _mixture(mixture_root, seed=5).load_state_dict(state)
    with pytest.raises(ResumeStateError, match=r"weights: found None, expected \[1.0, 1.0, 1.0\]"):
        _mixture(mixture_root, seed=4, weights=[1, 1, 1], samples_per_epoch=30).load_state_dict(state)
    with pytest.raises(ResumeStateError, match="resume state of a MixtureDataset, not of a PackedDataset"):
        PackedDataset(str(mixture_root / "arm"), seed=4).load_state_dict(state)


def test_heterogeneous_datasets_batch_with_masks(mixture_root):
    delta = {"action": [0.0, 2 / 30], "observation.images.top": [-2 / 30, 0.0]}
    dataset = _mixture(mixture_root, delta_timestamps=delta, seed=5)
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=TOTAL)))
    assert batch["observation.state"].shape == (TOTAL, 6) and batch["action"].shape == (TOTAL, 2, 6)
    names = batch["dataset_name"]
    for row, name in enumerate(names):
        width = 4 if name == "slow" else 6
        assert batch["observation.state_mask"][row].tolist() == [True] * width + [False] * (6 - width)
        assert bool(batch["observation.images.wrist_mask"][row]) == (name == "arm")
        assert bool(batch["observation.images.top_mask"][row])  # "front" was renamed to top
        if name != "arm":
            assert not batch["observation.images.wrist"][row].any()
    assert batch["observation.images.top"].shape == (TOTAL, 2, 3, 32, 48)
    assert dataset.fps == {"arm": 30, "slow": 15, "front": 30}
    # 2/30 s is one frame at 15 fps and two at 30 fps: the action window differs per dataset.
    slow = [i for i, n in enumerate(names) if n == "slow"][0]
    arm = [i for i, n in enumerate(names) if n == "arm"][0]
    assert batch["action"][slow, 1, 0] - batch["action"][slow, 0, 0] in (0.0, 1.0)
    assert batch["action"][arm, 1, 0] - batch["action"][arm, 0, 0] in (0.0, 1.0, 2.0)
    assert set(dataset.normalization_stats) == {"arm", "slow", "front"}
    before = dataset.stats()["samples"]
    _each_stats_file_read_once(mixture_root)
    assert len(list(dataset)) == TOTAL  # an exhausted iterator has published its counters
    assert dataset.stats()["samples"] - before == TOTAL and dataset.stats()["episodes_admitted"] >= 7


def _each_stats_file_read_once(mixture_root):
    """meta and normalization_stats of a mixture opened from its packs read each pack's
    meta/stats.json once between them."""
    from unittest import mock

    from lerobot_shards.core.storage import Storage

    dataset = _mixture(mixture_root)
    reads = []
    original = Storage.read_range

    def counted(self, rel, offset, size):
        reads.append((self.url, rel))
        return original(self, rel, offset, size)

    with mock.patch.object(Storage, "read_range", counted):
        dataset.meta  # noqa: B018
        stats = dataset.normalization_stats
    read = [r for r in reads if r[1] == "meta/stats.json"]
    assert len(read) == len(set(read)) == 3 and set(stats) == {"arm", "slow", "front"}


def test_mixture_file_and_errors(mixture_root, tmp_path):
    # Paths relative to the mixture file open as they are.
    for name in ("arm", "slow"):
        (tmp_path / name).symlink_to(mixture_root / name)
    create_mixture(str(tmp_path), names={"arm": "arm", "slow": "slow"})
    dataset = MixtureDataset(str(tmp_path / "mixture.json"))
    assert dataset.names == ["arm", "slow"] and len(dataset) == 19 + 12
    # Absolute paths (or URLs) in a shared mixture file open only when the caller allows them.
    elsewhere = tmp_path / "elsewhere"
    create_mixture(str(elsewhere), names={"arm": str(mixture_root / "arm"), "slow": str(mixture_root / "slow")})
    with pytest.raises(MixtureSpecError, match="absolute or a URL"):
        MixtureDataset(str(elsewhere / "mixture.json"))
    assert len(MixtureDataset(str(elsewhere / "mixture.json"), allow_remote_paths=True)) == 19 + 12
    with pytest.raises(ValueError, match="needs both weights and samples_per_epoch"):
        MixtureDataset(str(tmp_path / "mixture.json"), weights=[1, 1])
    with pytest.raises(
        ValueError,
        match=r"camera 'observation.images.wrist' is \(H, W, C\) \(32, 32, 3\) in 'a' and \(32, 48, 3\) in 'front'; repack",
    ):
        MixtureDataset(
            [str(mixture_root / "arm"), str(mixture_root / "front")],
            key_map={"front": {"observation.images.front": "observation.images.wrist"}},
            names=["a", "front"],
        )
    with pytest.raises(PlanError, match="non-negative"):
        _mixture(mixture_root, weights=[-1, 1, 1], samples_per_epoch=10)


def test_features_only_some_datasets_have_are_filled_or_named(mixture_root, tmp_path):
    """Finding 3 of issue 40: a feature only some datasets have was dropped without a word.
    A numeric one is kept, zeros and ``<key>_mask = False`` where it is missing (as a camera);
    one that cannot be (language lists) is left out and named, at open and by mixture create.
    A picture camera batches with the same camera stored as video elsewhere."""
    from lerobot_shards.core.errors import MixtureFeatureWarning

    talk_source = tmp_path / "src" / "talk"
    write_sample_dataset(
        talk_source,
        SampleSpec(
            episodes=2,
            lengths=(4, 6),
            language=True,
            seed=7,
            cameras=(TOP, CameraSpec("observation.images.wrist", 32, 32, kind="image")),
        ),
    )
    pack_dataset(str(talk_source), str(tmp_path / "talk"))
    paths = [str(mixture_root / "arm"), str(tmp_path / "talk")]
    with pytest.warns(MixtureFeatureWarning, match=r"language_events \(in talk\); language_persistent \(in talk\)"):
        dataset = MixtureDataset(paths, key_map={"arm": {"next.reward": None}}, return_uint8=True, shuffle=False)
    total = 6 + 9 + 4 + 4 + 6
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=total)))
    assert "language_persistent" not in batch and "language_events" not in batch
    for row, name in enumerate(batch["dataset_name"]):
        assert bool(batch["next.reward_mask"][row]) == (name == "talk")
        if name == "arm":
            assert float(batch["next.reward"][row]) == 0.0
        assert bool(batch["observation.images.wrist_mask"][row])
    assert (
        batch["observation.images.wrist"].shape == (total, 3, 32, 32)
        and batch["observation.images.wrist"].dtype == torch.float32  # pictures: float32 under return_uint8, as LeRobot's
    )
    talk = [r for r, n in enumerate(batch["dataset_name"]) if n == "talk"]
    assert batch["next.reward"][talk].abs().sum() > 0  # real values where the dataset has them

    root = tmp_path / "mixture"
    report = create_mixture(str(root), names={"arm": str(mixture_root / "arm"), "talk": str(tmp_path / "talk")})
    assert report.dropped_features == {"language_events": ["talk"], "language_persistent": ["talk"]}
    assert report.filled_features == {}
    from lerobot_shards.packer import format_report

    assert any(line.startswith("FEATURE language_events: only in talk") for line in format_report(report))


def test_windows_in_frames_take_each_datasets_own_rate(mixture_root):
    """``delta_frames`` (lerobot-train's ``--shards.mixed_rates=frames``, issue 56 row 1): the same
    frame offsets at 30 and 15 fps; each dataset's samples equal its own pack read with those
    frames as seconds at its own rate, pads included."""
    frames = {"action": [0, 1, 2], "observation.images.top": [-1, 0]}
    mixture = _mixture(mixture_root, delta_frames=frames, seed=5)
    assert mixture.fps == {"arm": 30, "slow": 15, "front": 30}
    samples = list(mixture)
    assert len(samples) == TOTAL
    for name in ("arm", "slow", "front"):
        fps = mixture.fps[name]
        camera = "observation.images.front" if name == "front" else "observation.images.top"
        delta = {"action": [f / fps for f in frames["action"]], camera: [f / fps for f in frames["observation.images.top"]]}
        packed = PackedDataset(str(mixture_root / name), delta_timestamps=delta, return_uint8=True)
        expected = {int(s["index"]): s for s in packed}
        mine = [s for s in samples if s["dataset_name"] == name]
        assert sorted(int(s["index"]) for s in mine) == sorted(expected)
        for sample in mine:
            reference = expected[int(sample["index"])]
            # action[:, 0] is episode * 1000 + frame: three consecutive frames of this dataset
            start = int(sample["episode_index"]) * 1000 + int(sample["frame_index"])
            steps = (sample["action"][:, 0] - start).tolist()
            assert steps == [min(f, steps[-1]) for f in frames["action"]]
            assert torch.equal(sample["action"][:, : reference["action"].shape[1]], reference["action"])
            assert torch.equal(sample["action_is_pad"], reference["action_is_pad"])
            assert torch.equal(sample["observation.images.top"], reference[camera])
            assert torch.equal(sample["observation.images.top_is_pad"], reference[camera + "_is_pad"])
    with pytest.raises(ValueError, match=r"frame offsets are integers"):
        _mixture(mixture_root, delta_frames={"action": [0, 0.5]})
    with pytest.raises(ValueError, match=r"not both"):
        _mixture(mixture_root, delta_frames={"action": [0, 1]}, delta_timestamps={"action": [0.0]})


@pytest.mark.timeout(600)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_first_batch_built_here_changes_no_batch_of_a_mixture(mixture_root, workers):
    """The first batch built in the training process (DESIGN_NOTES section 29) over a mixture
    (a missing camera zero-filled, a renamed camera, another fps): the workers-only batches."""

    def run(here: bool) -> list[dict]:
        loader = BatchLoader(_mixture(mixture_root, seed=2), batch_size=4, num_workers=workers, first_batch_here=here)
        loader.set_epoch(1)
        return [{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()} for batch in loader]

    here, workers_only = run(True), run(False)
    assert len(here) == len(workers_only) and sum(len(b["index"]) for b in here) == TOTAL
    for a, b in zip(here, workers_only):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]) if isinstance(a[key], torch.Tensor) else a[key] == b[key], key
