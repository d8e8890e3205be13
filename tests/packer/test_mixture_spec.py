"""mixture.json schema and heterogeneous-feature harmonization, on hand-built sample dicts:
different state sizes, missing cameras, different fps, renames, drops and every error."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch.utils.data import default_collate

from lerobot_shards.core.errors import HarmonizeError, MixtureSpecError
from lerobot_shards.core.format import MixtureSpec, resolve_dataset_path
from lerobot_shards.reader.runtime import DatasetFeatures, FeatureHarmonizer

SCALARS = {k: {"dtype": "int64", "shape": [1]} for k in ("frame_index", "episode_index", "index", "task_index")}
SCALARS["timestamp"] = {"dtype": "float32", "shape": [1]}


def _features(state: int, action: int, cameras: dict[str, tuple[int, int]], action_dtype: str = "float32") -> dict:
    out = {
        "observation.state": {"dtype": "float32", "shape": [state], "names": [f"j{i}" for i in range(state)]},
        "action": {"dtype": action_dtype, "shape": [action], "names": None},
    }
    for key, (height, width) in cameras.items():
        out[key] = {"dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"]}
    return {**out, **SCALARS}


TOP, WRIST, FRONT = "observation.images.top", "observation.images.wrist", "observation.images.front"
FEATURES = {
    "arm": (30, _features(6, 6, {TOP: (8, 12), WRIST: (4, 4)})),
    "slow": (10, _features(4, 4, {TOP: (8, 12)})),
    "front": (30, _features(6, 7, {FRONT: (8, 12)}, action_dtype="float64")),
}
KEY_MAP = {"front": {FRONT: TOP}}
DELTA = {"action": [0.0, 0.1, 0.2], TOP: [-0.1, 0.0]}


def _spec_dict() -> dict:
    return {
        "format": "lerobot-shards-mixture",
        "version": 1,
        "default_weights": "anchors",
        "datasets": [
            {
                "name": name,
                "path": name,
                "anchors": 10 * (i + 1),
                "episodes": i + 1,
                "fps": fps,
                "features": feats,
                "video_keys": [k for k, f in feats.items() if f["dtype"] == "video"],
                "weight": 10 * (i + 1),
            }
            for i, (name, (fps, feats)) in enumerate(FEATURES.items())
        ],
    }


def _harmonizer(**kwargs) -> FeatureHarmonizer:
    datasets = [DatasetFeatures.from_manifest_features(n, fps, f) for n, (fps, f) in FEATURES.items()]
    return FeatureHarmonizer.build(datasets, **{"key_map": KEY_MAP, "delta_timestamps": DELTA, **kwargs})


def _sample(name: str, frame: int = 5) -> dict:
    """What PackedDataset yields for one anchor of `name` with its per-dataset windows."""
    fps, feats = FEATURES[name]
    steps = {k: len(v) for k, v in DELTA.items()}
    state, action = feats["observation.state"]["shape"][0], feats["action"]["shape"][0]
    dtype = torch.float64 if feats["action"]["dtype"] == "float64" else torch.float32
    sample = {
        "observation.state": torch.arange(state, dtype=torch.float32) + 1,
        "action": torch.ones(steps["action"], action, dtype=dtype),
        "action_is_pad": torch.tensor([False, False, True]),
        "timestamp": torch.tensor(frame / fps),
        "frame_index": torch.tensor(frame),
        "episode_index": torch.tensor(0),
        "index": torch.tensor(frame),
        "task_index": torch.tensor(0),
        "task": f"task of {name}",
    }
    for key, f in feats.items():
        if f["dtype"] == "video":
            height, width, _ = f["shape"]
            windowed = key == TOP or KEY_MAP.get(name, {}).get(key) == TOP
            sample[key] = torch.full((2, 3, height, width) if windowed else (3, height, width), 0.5)
            if windowed:
                sample[key + "_is_pad"] = torch.tensor([True, False])
    return sample


# -- mixture.json -------------------------------------------------------------------------


def test_spec_round_trips_and_gives_weights():
    spec = MixtureSpec.from_dict(_spec_dict())
    assert spec.names == ["arm", "slow", "front"] and spec.total_anchors == 60
    assert spec.weights() == [10.0, 20.0, 30.0]
    assert spec.entry("slow").fps == 10 and spec.entry("slow").video_keys == (TOP,)
    state = spec.entry("arm").features["observation.state"]
    assert (state.dtype, state.shape, state.names) == ("float32", (6,), tuple(f"j{i}" for i in range(6)))
    again = MixtureSpec.from_json(spec.to_json())
    assert again.to_dict() == spec.to_dict() and again.to_json() == spec.to_json()
    data = _spec_dict()
    data["default_weights"] = "explicit"
    data["datasets"][0]["weight"] = 0.5
    data["datasets"][1]["where"] = "chunk_action_pad_after = 0"
    data["datasets"][2]["note"] = "kept"
    explicit = MixtureSpec.from_dict(data)
    assert explicit.weights() == [0.5, 20.0, 30.0] and explicit.entry("slow").where == "chunk_action_pad_after = 0"
    assert MixtureSpec.from_json(explicit.to_json()).to_dict()["datasets"][2]["note"] == "kept"
    with pytest.raises(KeyError, match=r"no dataset 'x' in the mixture; known: \['arm', 'slow', 'front'\]"):
        spec.entry("x")


def _broken(edit) -> dict:
    data = copy.deepcopy(_spec_dict())
    edit(data)
    return data


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d.update(format="lerobot-shards"), "expected format 'lerobot-shards-mixture', found 'lerobot-shards'"),
        (lambda d: d.update(version=6), r"version 6 is not supported \(supported: \[1, 2, 3, 4, 5\]\)"),
        (
            lambda d: d.update(default_weights="uniform"),
            r"default_weights must be one of \['anchors', 'explicit'\], got 'uniform'",
        ),
        (lambda d: d.update(datasets={}), "field 'datasets' must be a list, got dict"),
        (lambda d: d.update(datasets=[]), "a mixture needs at least one dataset"),
        (lambda d: d["datasets"][1].pop("fps"), r"datasets\[1\] \('slow'\): missing field\(s\) \['fps'\]; write the file with"),
        (
            lambda d: d["datasets"][1].update(fps="10"),
            r"datasets\[1\] \('slow'\): field 'fps' must be a number from 1 to \d+, got '10'",
        ),
        (lambda d: d["datasets"][0].update(anchors=-1), r"\('arm'\): field 'anchors' must be an int >= 0, got -1"),
        (lambda d: d["datasets"][0].update(name=""), r"datasets\[0\]: field 'name' must be a non-empty string, got ''"),
        (lambda d: d["datasets"][2].update(name="arm"), r"dataset names must be unique, found \['arm'\] more than once"),
        (
            lambda d: d["datasets"][0].update(weight=3),
            r"\('arm'\): field 'weight' is 3 but default_weights is 'anchors' \(weight = anchors = 10\)",
        ),
        (
            lambda d: d["datasets"][0].update(video_keys=["action"]),
            r"\('arm'\): field 'video_keys' lists \['action'\], which are not video",
        ),
        (
            lambda d: d["datasets"][0]["features"]["action"].update(shape="6"),
            r"\('arm'\): feature 'action': shape must be a list",
        ),
        (lambda d: [e.update(anchors=0, weight=0) for e in d["datasets"]], "the weights sum to 0"),
        # Issue 31: the mixture maxima that size its compiled index (episodes, camera members).
        (
            lambda d: d["datasets"][1].update(episodes=10_000_000),
            "10000004 episodes with 10000005 camera members; a mixture holds at most 10000000 episodes and 40000000 members",
        ),
        (lambda d: d["datasets"][0].update(episodes=20_000_000), "20000005 episodes with 40000005 camera members"),
    ],
)
def test_spec_errors_name_the_dataset_and_field(edit, message):
    with pytest.raises(MixtureSpecError, match=message):
        MixtureSpec.from_dict(_broken(edit), where="s3://b/mix/mixture.json")


def test_spec_error_on_bad_json_names_the_file():
    with pytest.raises(MixtureSpecError, match=r"mix/mixture.json: not valid JSON"):
        MixtureSpec.from_json("{", where="mix/mixture.json")


def test_dataset_paths_resolve_relative_to_the_mixture_file():
    assert resolve_dataset_path("s3://b/mix/mixture.json", "org--a") == "s3://b/mix/org--a"
    assert resolve_dataset_path("/data/mix/mixture.json", "org--a") == "/data/mix/org--a"
    assert resolve_dataset_path("mix/mixture.json", "a") == "mix/a"
    assert resolve_dataset_path("mixture.json", "a") == "a"
    assert resolve_dataset_path("mix/mixture.json", "group/a") == "mix/group/a"
    # Absolute paths and URLs only when the caller trusts the file: a shared mixture.json must
    # not pick which hosts a reader contacts or which local files it opens.
    assert resolve_dataset_path("s3://b/mix/mixture.json", "/abs/a", allow_remote=True) == "/abs/a"
    assert resolve_dataset_path("/data/mix/mixture.json", "s3://other/a", allow_remote=True) == "s3://other/a"
    for hostile in ("/abs/a", "s3://other/a", "http://169.254.169.254/latest", "~/.aws", "../outside", "a/../../b", "./a"):
        with pytest.raises(MixtureSpecError, match="mixture"):
            resolve_dataset_path("s3://b/mix/mixture.json", hostile)


# -- harmonization ------------------------------------------------------------------------


def test_layout_pads_vectors_unions_cameras_and_resolves_windows_per_fps():
    h = _harmonizer()
    assert h.pad_widths == {"observation.state": 6, "action": 7}
    assert h.cameras == {TOP: (3, 8, 12), WRIST: (3, 4, 4)}
    assert h.dtypes == {"action": "float64"}
    # 0.1 s is 3 frames at 30 fps and 1 frame at 10 fps.
    assert h.offsets[0]["action"].tolist() == [0, 3, 6] and h.offsets[0][TOP].tolist() == [-3, 0]
    assert h.offsets[1]["action"].tolist() == [0, 1, 2] and h.offsets[1][TOP].tolist() == [-1, 0]
    # The renamed dataset is asked for its own key.
    assert h.source_delta_timestamps(2) == {"action": [0.0, 0.1, 0.2], FRONT: [-0.1, 0.0]}
    assert h.source_delta_timestamps(1) == {"action": [0.0, 0.1, 0.2], TOP: [-0.1, 0.0]}


def test_samples_of_different_datasets_batch_with_masks():
    h = _harmonizer()
    out = [h.apply(i, _sample(name)) for i, name in enumerate(h.names)]
    for sample in out:
        assert set(sample) == set(h.output_keys())
    batch = default_collate(out)
    assert batch["observation.state"].shape == (3, 6) and batch["action"].shape == (3, 3, 7)
    assert batch["action"].dtype == torch.float64
    assert batch["observation.state_mask"].tolist() == [[True] * 6, [True] * 4 + [False] * 2, [True] * 6]
    assert batch["action_mask"].tolist() == [[True] * 6 + [False], [True] * 4 + [False] * 3, [True] * 7]
    # Padding is zeros after the real values, which are untouched.
    assert batch["observation.state"][1].tolist() == [1, 2, 3, 4, 0, 0]
    assert batch["action"][0, :, 6].abs().sum() == 0 and (batch["action"][0, :, :6] == 1).all()
    # Cameras: top everywhere (front renamed), wrist only in "arm": zeros + mask False.
    assert batch[TOP].shape == (3, 2, 3, 8, 12) and batch[f"{TOP}_mask"].tolist() == [True, True, True]
    assert batch[WRIST].shape == (3, 3, 4, 4) and batch[f"{WRIST}_mask"].tolist() == [True, False, False]
    assert not batch[WRIST][1:].any() and (batch[WRIST][0] == 0.5).all()
    assert batch[f"{TOP}_is_pad"].tolist() == [[True, False]] * 3
    assert batch["dataset_index"].tolist() == [0, 1, 2] and batch["dataset_name"] == ["arm", "slow", "front"]
    assert batch["task"] == ["task of arm", "task of slow", "task of front"]
    assert FRONT not in batch


def test_missing_camera_windows_fill_and_flag_every_step():
    datasets = [
        DatasetFeatures.from_manifest_features("a", 30, _features(2, 2, {TOP: (8, 12), WRIST: (4, 4)})),
        DatasetFeatures.from_manifest_features("b", 30, _features(2, 2, {TOP: (8, 12)})),
    ]
    h = FeatureHarmonizer.build(datasets, delta_timestamps={WRIST: [-1 / 30, 0.0]}, return_uint8=True)
    sample = {k: torch.zeros(2) for k in ("observation.state",)} | {
        "action": torch.zeros(2),
        TOP: torch.zeros(3, 8, 12, dtype=torch.uint8),
    }
    sample |= {k: torch.tensor(0) for k in SCALARS}
    out = h.apply(1, sample)
    assert out[WRIST].shape == (2, 3, 4, 4) and out[WRIST].dtype == torch.uint8
    assert out[f"{WRIST}_is_pad"].tolist() == [True, True] and not bool(out[f"{WRIST}_mask"])


def test_missing_vector_is_zeros_with_an_all_false_mask_and_drops_select():
    feats = _features(3, 2, {})
    without_state = {k: v for k, v in _features(3, 2, {}).items() if k != "observation.state"}
    extra = {**feats, "observation.effort": {"dtype": "float32", "shape": [3]}}
    h = FeatureHarmonizer.build(
        [DatasetFeatures.from_manifest_features("a", 10, extra), DatasetFeatures.from_manifest_features("b", 10, without_state)],
        key_map={"a": {"timestamp": None}},
        delta_timestamps={"observation.state": [0.0, 0.1]},
    )
    # "timestamp" dropped from a, so only b has it; "observation.effort" only in a: numeric keys
    # only some datasets have are kept, zeros and a False mask where missing (issue 40).
    assert h.filled == {"timestamp": ((), "float32"), "observation.effort": ((3,), "float32")} and not h.dropped
    base = {k: torch.tensor(0) for k in SCALARS} | {"action": torch.ones(2)}
    out = h.apply(1, base)
    assert (
        not out["observation.effort"].any()
        and out["observation.effort"].shape == (3,)
        and not bool(out["observation.effort_mask"])
    )
    assert out["observation.state"].shape == (2, 3) and not out["observation.state"].any()
    assert out["observation.state_mask"].tolist() == [False] * 3 and out["observation.state_is_pad"].tolist() == [True, True]
    full = h.apply(
        0,
        base
        | {
            "observation.state": torch.ones(2, 3),
            "observation.state_is_pad": torch.tensor([False, True]),
            "observation.effort": torch.ones(3),
        },
    )
    assert set(full) == set(out) == set(h.output_keys())
    assert full["observation.effort"].tolist() == [1.0] * 3 and bool(full["observation.effort_mask"])
    assert float(full["timestamp"]) == 0.0 and not bool(full["timestamp_mask"]) and bool(out["timestamp_mask"])
    assert full["observation.state_is_pad"].tolist() == [False, True]
    with pytest.raises(
        HarmonizeError, match=r"dataset 'a': the sample lacks \['observation.state', 'action', 'observation.effort'\], which"
    ):
        h.apply(0, {k: torch.tensor(0) for k in SCALARS})


def test_from_spec_uses_the_recorded_features():
    spec = MixtureSpec.from_dict(_spec_dict())
    h = FeatureHarmonizer.from_spec(spec, key_map=KEY_MAP, delta_timestamps=DELTA)
    assert h.names == ("arm", "slow", "front") and h.fps == (30, 10, 30) and h.pad_widths["action"] == 7


def _build(features: dict[str, tuple[int, dict]], **kwargs):
    return FeatureHarmonizer.build(
        [DatasetFeatures.from_manifest_features(n, fps, f) for n, (fps, f) in features.items()], **kwargs
    )


@pytest.mark.parametrize(
    "features,kwargs,message",
    [
        (
            {"a": (30, _features(2, 2, {TOP: (8, 12)})), "b": (30, _features(2, 2, {TOP: (16, 12)}))},
            {},
            r"camera 'observation.images.top' is \(H, W, C\) \(8, 12, 3\) in 'a' and \(16, 12, 3\) in 'b'; repack one with",
        ),
        (
            FEATURES,
            {"delta_timestamps": {"action": [1 / 15]}, "key_map": KEY_MAP},
            r"dataset 'slow' \(fps 10\): delta_timestamps\['action'\] has values that are not multiples",
        ),
        (
            FEATURES,
            {"delta_timestamps": {"observation.velocity": [0.0]}},
            r"delta_timestamps keys \['observation.velocity'\] are in no dataset",
        ),
        (
            {"a": (30, {**SCALARS, "x": {"dtype": "string", "shape": [1]}}), "b": (30, SCALARS)},
            {"delta_timestamps": {"x": [0.0]}},
            r"delta_timestamps keys \['x'\] are not in every dataset and cannot be filled where missing",
        ),
        (FEATURES, {"key_map": {"nope": {}}}, r"key_map names datasets \['nope'\] that are not in the mixture"),
        (
            FEATURES,
            {"key_map": {"arm": {"observation.images.left": TOP}}},
            r"key_map\['arm'\] renames \['observation.images.left'\], which dataset 'arm' lacks",
        ),
        (FEATURES, {"key_map": {"arm": {WRIST: TOP}}}, r"dataset 'arm': several source keys map to \['observation.images.top'\]"),
        (
            FEATURES,
            {"pad_keys": ("action",)},
            r"feature 'observation.state' has different shapes across datasets \('arm' \(6,\), 'slow' \(4,\)",
        ),
        (
            {"a": (30, _features(2, 2, {TOP: (8, 12)}))},
            {"pad_keys": (TOP,)},
            r"dataset 'a': pad key 'observation.images.top' has shape \(8, 12, 3\)",
        ),
        (
            {
                "a": (30, {**SCALARS, "lang": {"dtype": "string", "shape": [1]}}),
                "b": (30, {**SCALARS, "lang": {"dtype": "int64", "shape": [1]}}),
            },
            {},
            r"feature 'lang' has dtypes \['int64', 'string'\] across datasets",
        ),
    ],
)
def test_harmonizer_errors(features, kwargs, message):
    with pytest.raises(HarmonizeError, match=message):
        _build(features, **kwargs)


def test_vector_wider_than_declared_is_an_error():
    h = _harmonizer()
    sample = _sample("slow")
    sample["action"] = torch.ones(3, 9)
    with pytest.raises(HarmonizeError, match=r"dataset 'slow': 'action' has width 9, more than the mixture's 7"):
        h.apply(1, sample)


def test_spec_module_imports_without_torch():
    import subprocess
    import sys

    code = "import sys, lerobot_shards.core.format.mixture, lerobot_shards.reader.runtime.harmonize, lerobot_shards.reader.plan.mixture_plan; assert 'torch' not in sys.modules, 'torch imported'"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    json.dumps(_spec_dict())  # the fixture itself is plain JSON
