"""``PackedDataset.meta``: LeRobotDatasetMetadata's fields for a pack, local or in a bucket.

The reference values are read independently from the source's own meta files (what
``LeRobotDatasetMetadata`` reads: info.json features, stats.json cast as LeRobot's
``load_stats`` does, tasks.parquet) and the pack's totals; ``make parity`` also compares with
``LeRobotDatasetMetadata`` itself. A hostile stats.json is refused with the file's name.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import s3fs

from lerobot_shards import PackedDataset, pack_dataset
from lerobot_shards.core.errors import FormatError
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset
from tests.pack_tamper import reseal
from tests.packed_fixtures import *
from tests.s3_server import s3_bucket, s3_server  # noqa: F401


def _lerobot_stats(path) -> dict:
    """LeRobot's load_stats on a plain file: flatten, np.atleast_1d(np.array(v)), unflatten."""

    def walk(prefix, value, out):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}/{k}" if prefix else k, v, out)
        else:
            out[prefix] = np.atleast_1d(np.array(value))
        return out

    nested: dict = {}
    for key, value in walk("", json.loads(path.read_text()), {}).items():
        feature, statistic = key.split("/", 1)
        nested.setdefault(feature, {})[statistic] = value
    return nested


def _assert_meta_matches_source(meta, source, packed):
    info = json.loads((source / "meta" / "info.json").read_text())
    manifest = json.loads((packed / "manifest.json").read_text())
    assert meta.fps == info["fps"]
    # A copy pack: the source's features, shapes as tuples as LeRobot loads them.
    assert meta.features == {k: {**f, "shape": tuple(f["shape"])} for k, f in info["features"].items()}
    assert meta.robot_type == info.get("robot_type")
    assert (meta.total_episodes, meta.total_frames) == (manifest["totals"]["episodes"], manifest["totals"]["frames"])
    assert meta.camera_keys == meta.video_keys == [k for k, f in info["features"].items() if f["dtype"] == "video"]
    assert meta.shapes == {k: tuple(f["shape"]) for k, f in info["features"].items()}
    reference = _lerobot_stats(source / "meta" / "stats.json")
    assert set(meta.stats) == set(reference)
    for feature, stats in reference.items():
        assert set(meta.stats[feature]) == set(stats), feature
        for name, value in stats.items():
            assert meta.stats[feature][name].shape == value.shape and np.array_equal(meta.stats[feature][name], value), (
                feature,
                name,
            )
    tasks = pd.read_parquet(source / "meta" / "tasks.parquet")
    tasks.index.name = "task"
    pd.testing.assert_frame_equal(
        meta.tasks.sort_values("task_index"), tasks[["task_index"]].sort_values("task_index"), check_dtype=False
    )


def test_meta_of_a_local_pack_is_the_sources_lerobot_metadata(sample_source, packed_copy):
    _assert_meta_matches_source(PackedDataset(str(packed_copy)).meta, sample_source, packed_copy)


def test_meta_of_a_bucket_pack_equals_the_local_one(sample_source, packed_copy, s3_bucket):
    url, options = s3_bucket
    s3fs.S3FileSystem(**options).put(str(packed_copy), f"{url.removeprefix('s3://')}/meta-pack", recursive=True)
    meta = PackedDataset(f"{url}/meta-pack", storage_options=options).meta
    _assert_meta_matches_source(meta, sample_source, packed_copy)


def test_meta_features_describe_the_packed_video(tmp_path):
    from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

    # One aspect ratio: --resize gives every camera one size (another aspect is refused).
    spec = SampleSpec(episodes=2, lengths=(3, 4), cameras=(CameraSpec("observation.images.top", 48, 64),))
    write_sample_dataset(tmp_path / "src", spec)
    packed = tmp_path / "resized"
    pack_dataset(str(tmp_path / "src"), str(packed), video="h264", resize=(24, 32), shard_size_mb=1)
    meta = PackedDataset(str(packed)).meta
    for key in meta.video_keys:
        assert meta.features[key]["shape"][:2] == (24, 32)
        assert meta.features[key]["info"]["video.codec"] == "h264"
        assert (meta.features[key]["info"]["video.height"], meta.features[key]["info"]["video.width"]) == (24, 32)


@pytest.mark.parametrize(
    "stats",
    [
        {"action": {"mean": ["x"]}},
        {"action": {"mean": [[1, 2], [3]]}},
        ["not", "an", "object"],
        {"action": 5, "action/mean": [1]},
    ],
)
def test_a_hostile_stats_file_is_refused_naming_it(packed_copy, tmp_path, stats):
    root = tmp_path / "pack"
    shutil.copytree(packed_copy, root)
    (root / "meta" / "stats.json").write_text(json.dumps(stats))
    reseal(root)  # an attacker who re-seals every digest
    dataset = PackedDataset(str(root))
    with pytest.raises(FormatError, match="stats.json"):
        _ = dataset.meta


def _stats_of(values: np.ndarray) -> dict:
    return {
        "mean": values.mean(0),
        "std": values.std(0),
        "min": values.min(0),
        "max": values.max(0),
        "count": np.array([len(values)]),
        "q50": np.quantile(values, 0.5, axis=0),
    }


def test_aggregated_stats_equal_the_stats_of_the_pooled_data_per_element():
    from lerobot_shards import aggregate_stats

    rng = np.random.default_rng(0)
    narrow, wide = rng.normal(1.0, 2.0, size=(300, 3)), rng.normal(-4.0, 0.5, size=(500, 5))
    image = rng.random((200, 3, 1, 1))
    stats = aggregate_stats(
        [{"state": _stats_of(narrow), "img": _stats_of(image)}, {"state": _stats_of(wide), "img": _stats_of(image * 2)}]
    )
    pooled_first = np.concatenate([narrow, wide[:, :3]])
    np.testing.assert_allclose(stats["state"]["mean"][:3], pooled_first.mean(0))
    np.testing.assert_allclose(stats["state"]["std"][:3], pooled_first.std(0))
    np.testing.assert_allclose(stats["state"]["mean"][3:], wide[:, 3:].mean(0))  # only the wide dataset has these
    np.testing.assert_allclose(stats["state"]["std"][3:], wide[:, 3:].std(0))
    np.testing.assert_array_equal(
        stats["state"]["min"], np.concatenate([np.minimum(narrow.min(0), wide[:, :3].min(0)), wide[:, 3:].min(0)])
    )
    np.testing.assert_array_equal(
        stats["state"]["max"], np.concatenate([np.maximum(narrow.max(0), wide[:, :3].max(0)), wide[:, 3:].max(0)])
    )
    both = np.concatenate([image, image * 2])
    np.testing.assert_allclose(stats["img"]["mean"], both.mean(0))
    np.testing.assert_allclose(stats["img"]["std"], both.std(0))
    assert stats["img"]["mean"].shape == (3, 1, 1) and int(stats["state"]["count"][0]) == 800


def test_mixture_meta_describes_the_harmonized_samples(tmp_path):
    from lerobot_shards import MixtureDataset

    roots = []
    for name, state_dim in (("narrow", 3), ("wide", 5)):
        spec = SampleSpec(
            episodes=2,
            lengths=(6, 7),
            state_dim=state_dim,
            action_dim=state_dim,
            seed=state_dim,
            cameras=(CameraSpec("observation.images.top", 32, 48),),
        )
        write_sample_dataset(tmp_path / name, spec)
        pack_dataset(str(tmp_path / name), str(tmp_path / f"{name}-pack"))
        roots.append(str(tmp_path / f"{name}-pack"))
    mixture = MixtureDataset(roots, names=["narrow", "wide"])
    meta = mixture.meta
    sample = next(iter(mixture))
    assert meta.features["observation.state"]["shape"] == (5,) == tuple(sample["observation.state"].shape)
    assert meta.features["observation.images.top"]["shape"] == (32, 48, 3)
    assert not any(k.endswith("_mask") for k in meta.features)
    assert meta.total_frames == 26 and meta.total_episodes == 4 and meta.fps == 30
    narrow, wide = (PackedDataset(r).meta.stats["observation.state"] for r in roots)
    total = narrow["count"][0] + wide["count"][0]
    expected = np.concatenate(
        [(narrow["mean"] * narrow["count"][0] + wide["mean"][:3] * wide["count"][0]) / total, wide["mean"][3:]]
    )
    np.testing.assert_allclose(meta.stats["observation.state"]["mean"], expected)
