"""An independent oracle: LeRobot 0.6.1's ``LeRobotDataset.__getitem__``, re-implemented over
the *unpacked* LeRobot v3 source layout.

It shares no code with ``reader/`` (only torch, torchcodec, pyarrow and pandas) and follows
LeRobot's algorithm step by step: query rows are clamped to the episode with ``_is_pad``
marking clamped slots; tabular windows are ``torch.stack`` of per-row tensors; video frames
are decoded from the concatenated per-camera mp4 at ``from_timestamp + row timestamp``
(torchcodec, frame index ``round(ts * average_fps)``, tolerance check against the decoded
pts), converted with ``(frames / 255.0).type(torch.float32)`` and ``squeeze(0)``; row values
become tensors with ``torch.tensor(python_value)`` like ``hf_transform_to_torch``.

Layouts beyond the default follow LeRobot's code for them: image features are decoded from
their row's bytes with PIL as ``datasets.Image`` and ``pil_to_chw_tensor`` do (float32 whatever
``return_uint8`` says; 16-bit pictures float32 in their unit); depth videos are decoded with
PyAV to ``gray12le`` codes, the frame closest to each timestamp as ``decode_video_frames_pyav``
picks it, and dequantized with ``dequantize_depth``'s torch operations; depth pictures are
converted to the output unit; language columns are cast as ``datasets`` casts them to
LeRobot's features (float32 timestamps, tool calls through pandas' ujson).

The opt-in ``make parity`` target checks this oracle itself against real LeRobot.
"""

from __future__ import annotations

import io
import json
import math
from functools import lru_cache
from pathlib import Path

import av
import numpy as np
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
        self.features = self.info["features"]
        self.video_keys = [k for k, f in self.features.items() if f["dtype"] == "video"]
        self.image_keys = [k for k, f in self.features.items() if f["dtype"] == "image"]
        self.depth_keys = [
            k for k in self.video_keys + self.image_keys if (self.features[k].get("info") or {}).get("is_depth_map")
        ]
        episode_files = sorted((root / "meta" / "episodes").glob("*/*.parquet"))
        episodes = pa.concat_tables([pq.read_table(p) for p in episode_files]).to_pylist()
        self.episodes = {e["episode_index"]: e for e in episodes}
        self.tasks = pd.read_parquet(root / "meta" / "tasks.parquet")
        data_files = sorted((root / "data").glob("*/*.parquet"))
        table = _cast_like_datasets(
            pa.concat_tables([pq.read_table(p) for p in data_files], promote_options="default"), self.features
        )
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


def _cast_like_datasets(table: pa.Table, features: dict) -> pa.Table:
    """What ``datasets`` does to the data when LeRobot loads it with
    ``get_hf_features_from_features``: each value feature's column cast (pyarrow's safe cast)
    to ``Value(dtype)``, a 1-D shape to ``Sequence(Value(dtype), length=n)``, more dimensions
    to nested lists of ``dtype``."""
    aliases = {"float": "float32", "double": "float64", "bool": "bool_"}
    for key, feature in features.items():
        if feature["dtype"] in ("video", "image", "language") or key not in table.column_names:
            continue
        leaf = getattr(pa, aliases.get(feature["dtype"], feature["dtype"]))()
        shape = list(feature["shape"])
        if shape == [1]:
            target = leaf
        elif len(shape) == 1:
            # datasets' Sequence(length=None) is a list of any length
            target = pa.list_(leaf, shape[0]) if shape[0] is not None else pa.list_(leaf)
        else:
            target = leaf
            for _ in shape:
                target = pa.list_(target)
        column = table[key]
        if isinstance(column.type, pa.ExtensionType):
            continue  # datasets' own ArrayND columns already hold their dtype
        if column.type != target:
            table = table.set_column(table.schema.get_field_index(key), key, column.cast(target))
    return table


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


# -- LeRobot's image features (io_utils.pil_to_chw_tensor, datasets.Image) -------------------------
def _picture(cell) -> torch.Tensor:
    from PIL import Image, ImageOps

    image = Image.open(io.BytesIO(cell["bytes"]))
    image.load()
    if image.getexif().get(0x0112) is not None:
        image = ImageOps.exif_transpose(image)
    if image.mode in ("I;16", "I;16B", "I;16L"):
        return torch.from_numpy(np.array(image, dtype=np.float32))[None, ...]
    array = np.array(image, {"I": np.int32, "F": np.float32}.get(image.mode, np.uint8), copy=True)
    tensor = torch.from_numpy(array).view(image.size[1], image.size[0], len(image.getbands())).permute((2, 0, 1)).contiguous()
    return tensor.to(dtype=torch.float32).div(255) if tensor.dtype == torch.uint8 else tensor


# -- LeRobot's depth (video_utils.decode_video_frames_pyav, depth_utils.dequantize_depth) ---------
def _depth_codes(path: Path, timestamps: list[float], tolerance_s: float) -> torch.Tensor:
    frames, stamps = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        # From the file's start (test files are small): a seek into a concatenation of lossless
        # HEVC episodes can land where the decoder drops the leading pictures after a random
        # access point (RASL), and the frame at the asked time is then missing.
        container.seek(0, stream=stream)
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            frames.append(torch.from_numpy(frame.to_ndarray(format="gray12le")).unsqueeze(0).contiguous())
            stamps.append(float(frame.pts * stream.time_base))
            if stamps[-1] >= max(timestamps):
                break
    dist = torch.cdist(torch.tensor(timestamps)[:, None], torch.tensor(stamps)[:, None], p=1)
    min_, argmin_ = dist.min(1)
    if not (min_ < tolerance_s).all():
        raise AssertionError(f"oracle: depth tolerance violated {min_}")
    return torch.stack([frames[i] for i in argmin_])


def _dequantize(codes: torch.Tensor, info: dict, unit: str) -> torch.Tensor:
    depth_min, depth_max = float(info.get("video.depth_min", 0.01)), float(info.get("video.depth_max", 10.0))
    shift, use_log = float(info.get("video.shift", 3.5)), bool(info.get("video.use_log", True))
    if use_log:
        scale, offset = (math.log(depth_max + shift) - math.log(depth_min + shift)) / 4095, math.log(depth_min + shift)
    else:
        scale, offset = (depth_max - depth_min) / 4095, depth_min
    buf = codes.squeeze(-3).to(dtype=torch.float32, copy=True)
    buf.mul_(scale).add_(offset)
    if use_log:
        buf.exp_().sub_(shift)
    buf.clamp_(depth_min, depth_max)
    buf.unsqueeze_(-3)
    if unit == "m":
        return buf
    return buf.mul_(1000.0).round_().clamp_(0.0, 65535)


# -- LeRobot's language columns, as datasets casts them to lerobot.datasets.language's features ---
_LANGUAGE_FIELDS = {
    "language_persistent": ("role", "content", "style", "timestamp", "camera", "tool_calls"),
    "language_events": ("role", "content", "style", "camera", "tool_calls"),
}


def _language(column: str, rows):
    from pandas.io.json import ujson_dumps, ujson_loads

    out = []
    for row in rows:
        item = {}
        for name in _LANGUAGE_FIELDS[column]:
            value = row.get(name)
            if name == "timestamp" and value is not None:
                value = np.float32(value).item()
            if name == "tool_calls" and value is not None:
                value = [ujson_loads(ujson_dumps(v)) for v in value]
            item[name] = value
        out.append(item)
    return out


def _cell(source: _Source, key: str, value, depth_unit: str):
    if key in source.image_keys:
        picture = _picture(value)
        info = source.features[key].get("info") or {}
        stored = info.get("depth_unit") if key in source.depth_keys else None
        if stored is not None and stored != depth_unit:
            picture = picture * 1000.0 if stored == "m" else picture / 1000.0
        return picture
    if key in _LANGUAGE_FIELDS:
        return _language(key, value)
    return _to_tensor(value)


def reference_item(
    source_root: str | Path,
    index: int,
    delta_timestamps: dict[str, list[float]] | None = None,
    *,
    return_uint8: bool = False,
    tolerance_s: float = 1e-4,
    depth_unit: str = "mm",
) -> dict:
    """Return what ``LeRobotDataset(root, delta_timestamps=...)`` yields for global ``index``.

    An ``episodes=`` subset does not change a sample's content, so the oracle is indexed
    by the global ``index`` column.
    """
    source = load_source(str(Path(source_root).resolve()))
    row = source.rows[source.position_of_index[index]]
    item = {column: _cell(source, column, row[column], depth_unit) for column in source.columns}
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
            item[key] = torch.stack([_cell(source, key, source.rows[source.position_of_index[i]][key], depth_unit) for i in rows])

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
            if key in source.depth_keys:
                shifted = [episode[f"videos/{key}/from_timestamp"] + ts for ts in timestamps]
                codes = _depth_codes(source.video_path(episode, key), shifted, tolerance_s)
                decoded = _dequantize(codes, source.features[key].get("info") or {}, depth_unit)
            else:
                decoded = decode_frames_like_lerobot(source, episode, key, timestamps, tolerance_s, return_uint8)
            frames[key] = decoded.squeeze(0)
        item = {**frames, **item}

    item["task"] = source.tasks.iloc[item["task_index"].item()].name
    return item


def reference_stats(source_root: str | Path) -> dict:
    """``LeRobotDataset.meta.stats``: ``load_stats`` over ``meta/stats.json`` (Python's JSON
    parser, which takes NaN and Infinity; every leaf ``np.atleast_1d(np.array(value))``,
    nested again by ``/``), None without the file."""
    path = Path(source_root) / "meta" / "stats.json"
    if not path.exists():
        return None
    flat: dict = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                walk(f"{prefix}/{key}" if prefix else key, child)
        else:
            flat[prefix] = np.atleast_1d(np.array(value))

    walk("", json.loads(path.read_text()))
    nested: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.split("/")
        inner = nested
        for part in parents:
            inner = inner.setdefault(part, {})
        inner[leaf] = value
    return nested
