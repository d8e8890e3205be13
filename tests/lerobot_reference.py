"""An independent oracle: LeRobot 0.6.1's ``LeRobotDataset.__getitem__``, re-implemented over
the *unpacked* LeRobot v3 source layout.

It shares no code with ``reader/`` (only torch, torchcodec, pyarrow and pandas) and follows
LeRobot's algorithm step by step: query rows are clamped to the episode with ``_is_pad``
marking clamped slots; tabular windows are ``torch.stack`` of per-row tensors; video frames
are decoded from the concatenated per-camera mp4 at ``from_timestamp + row timestamp``
(torchcodec, frame index ``round(ts * average_fps)``, tolerance check against the decoded
pts), converted with ``(frames / 255.0).type(torch.float32)`` and ``squeeze(0)``; row values
become tensors with ``torch.tensor(python_value)`` like ``hf_transform_to_torch``.

The opt-in ``make parity`` target checks this oracle itself against real LeRobot.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torchcodec.decoders import VideoDecoder


class _Source:
    def __init__(self, root: Path):
        self.root = root
        self.info = json.loads((root / "meta" / "info.json").read_text())
        self.fps = self.info["fps"]
        self.video_keys = [k for k, f in self.info["features"].items() if f["dtype"] == "video"]
        episode_files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
        episodes = pa.concat_tables([pq.read_table(p) for p in episode_files]).to_pylist()
        self.episodes = {e["episode_index"]: e for e in episodes}
        self.tasks = pd.read_parquet(root / "meta" / "tasks.parquet")
        data_files = sorted((root / "data").glob("*/*.parquet"))
        table = pa.concat_tables([pq.read_table(p) for p in data_files], promote_options="default")
        self.columns = table.column_names
        self.rows = table.to_pylist()
        self.position_of_index = {row["index"]: i for i, row in enumerate(self.rows)}
        self._decoders: dict[str, VideoDecoder] = {}

    def decoder(self, path: Path) -> VideoDecoder:
        key = str(path)
        if key not in self._decoders:
            self._decoders[key] = VideoDecoder(key)
        return self._decoders[key]

    def video_path(self, episode: dict, key: str) -> Path:
        return self.root / self.info["video_path"].format(
            video_key=key,
            chunk_index=episode[f"videos/{key}/chunk_index"],
            file_index=episode[f"videos/{key}/file_index"],
        )


@lru_cache(maxsize=8)
def load_source(root: str) -> _Source:
    return _Source(Path(root))


def _to_tensor(value):
    # hf_transform_to_torch: strings stay, everything else goes through torch.tensor().
    return value if isinstance(value, str) else torch.tensor(value)


def decode_frames_like_lerobot(
    source: _Source, episode: dict, key: str, timestamps: list[float], tolerance_s: float, return_uint8: bool
) -> torch.Tensor:
    decoder = source.decoder(source.video_path(episode, key))
    shifted = [episode[f"videos/{key}/from_timestamp"] + ts for ts in timestamps]
    average_fps = decoder.metadata.average_fps
    batch = decoder.get_frames_at(indices=[round(ts * average_fps) for ts in shifted])
    loaded_ts = batch.pts_seconds
    query = torch.tensor(shifted)
    dist = torch.cdist(query[:, None], loaded_ts[:, None].to(query.dtype), p=1)
    min_, argmin_ = dist.min(1)
    if not (min_ < tolerance_s).all():
        raise AssertionError(f"oracle: tolerance violated {min_} for {key} episode {episode['episode_index']}")
    frames = torch.stack([batch.data[i] for i in argmin_])
    if not return_uint8:
        frames = (frames / 255.0).type(torch.float32)
    return frames


def reference_item(
    source_root: str | Path,
    index: int,
    delta_timestamps: dict[str, list[float]] | None = None,
    *,
    return_uint8: bool = False,
    tolerance_s: float = 1e-4,
) -> dict:
    """Return what ``LeRobotDataset(root, delta_timestamps=...)`` yields for global ``index``.

    An ``episodes=`` subset does not change a sample's content, so the oracle is indexed
    by the global ``index`` column.
    """
    source = load_source(str(Path(source_root).resolve()))
    row = source.rows[source.position_of_index[index]]
    item = {column: _to_tensor(row[column]) for column in source.columns}
    episode = source.episodes[row["episode_index"]]
    ep_start, ep_end = episode["dataset_from_index"], episode["dataset_to_index"]

    query_indices = None
    if delta_timestamps is not None:
        delta_indices = {k: [round(d * source.fps) for d in v] for k, v in delta_timestamps.items()}
        query_indices = {
            key: [max(ep_start, min(ep_end - 1, index + d)) for d in deltas] for key, deltas in delta_indices.items()
        }
        padding = {
            f"{key}_is_pad": torch.BoolTensor([(index + d < ep_start) | (index + d >= ep_end) for d in deltas])
            for key, deltas in delta_indices.items()
        }
        item = {**item, **padding}
        for key, rows in query_indices.items():
            if key in source.video_keys:
                continue
            item[key] = torch.stack([_to_tensor(source.rows[source.position_of_index[i]][key]) for i in rows])

    if source.video_keys:
        current_ts = item["timestamp"].item()
        frames = {}
        for key in source.video_keys:
            if query_indices is not None and key in query_indices:
                timestamps = torch.stack(
                    [_to_tensor(source.rows[source.position_of_index[i]]["timestamp"]) for i in query_indices[key]]
                ).tolist()
            else:
                timestamps = [current_ts]
            decoded = decode_frames_like_lerobot(source, episode, key, timestamps, tolerance_s, return_uint8)
            frames[key] = decoded.squeeze(0)
        item = {**frames, **item}

    item["task"] = source.tasks.iloc[item["task_index"].item()].name
    return item
