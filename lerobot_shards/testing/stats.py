"""Per-episode and dataset statistics as LeRobot's writer computes them (``meta/stats.json``,
``stats/*`` columns of the episodes metadata)."""

from __future__ import annotations

import numpy as np

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)


def feature_stats(array: np.ndarray, *, image: bool = False, scale: float = 255.0) -> dict[str, np.ndarray]:
    """Per-feature stats like LeRobot's: min/max/mean/std/count and q01..q99. ``image``:
    (frames, H, W, C) values divided by ``scale`` (255 for colour, 1 for depth in its unit)."""
    if image:
        # (frames, H, W, C) -> per-channel stats shaped (C, 1, 1)
        data = array.astype(np.float64) / scale
        flat = data.reshape(-1, data.shape[-1])
        shape = (data.shape[-1], 1, 1)
        count = array.shape[0]
    else:
        flat = array.reshape(array.shape[0], -1).astype(np.float64)
        shape = flat.shape[1:]
        count = array.shape[0]
    stats = {
        "min": flat.min(axis=0).reshape(shape),
        "max": flat.max(axis=0).reshape(shape),
        "mean": flat.mean(axis=0).reshape(shape),
        "std": flat.std(axis=0).reshape(shape),
        "count": np.array([count], dtype=np.int64),
    }
    for q in QUANTILES:
        stats[f"q{int(q * 100):02d}"] = np.quantile(flat, q, axis=0).reshape(shape)
    return stats


def aggregate_episode_stats(per_episode: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, list]]:
    """Dataset stats: count-weighted mean/std, global min/max, count-weighted quantiles."""
    out: dict[str, dict[str, list]] = {}
    for key in per_episode[0]:
        items = [ep[key] for ep in per_episode]
        counts = np.array([s["count"][0] for s in items], dtype=np.float64)
        weights = (counts / counts.sum()).reshape((-1,) + (1,) * items[0]["mean"].ndim)
        means = np.stack([s["mean"] for s in items])
        mean = (means * weights).sum(axis=0)
        variance = ((np.stack([s["std"] for s in items]) ** 2 + (means - mean) ** 2) * weights).sum(axis=0)
        agg = {
            "min": np.min(np.stack([s["min"] for s in items]), axis=0),
            "max": np.max(np.stack([s["max"] for s in items]), axis=0),
            "mean": mean,
            "std": np.sqrt(variance),
            "count": np.array([int(counts.sum())]),
        }
        for q in QUANTILES:
            name = f"q{int(q * 100):02d}"
            agg[name] = (np.stack([s[name] for s in items]) * weights).sum(axis=0)
        out[key] = {name: value.tolist() for name, value in agg.items()}
    return out
