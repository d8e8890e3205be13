"""Dataset statistics as LeRobot computes and combines them (``meta/stats.json``): LeRobot's
``aggregate_stats``, what a mixture's ``meta.stats`` is, and what a v2.1 source's per-episode
statistics (``episodes_stats.jsonl``) become, as LeRobot's converter makes its ``stats.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lerobot_shards.core.errors import FormatError


def aggregate_stats(stats_list: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, dict[str, np.ndarray]]:
    """Stats of several datasets as one, as LeRobot's ``aggregate_stats`` computes them: min of
    mins, max of maxes, count-weighted mean, pooled variance (within + between), quantiles
    count-weighted (an approximation, as in LeRobot). Vectors of different widths (padded
    features of a mixture) are aggregated per element over the datasets that have it; the
    elements no dataset has do not occur (widths come from the datasets).

    Raises:
        FormatError: a feature's statistics lack ``mean``, ``std``, ``min``, ``max`` or ``count``.
    """
    out: dict[str, dict[str, np.ndarray]] = {}
    for key in dict.fromkeys(k for stats in stats_list for k in stats):
        parts = [stats[key] for stats in stats_list if key in stats]
        for part in parts:
            missing = sorted({"mean", "std", "min", "max", "count"} - set(part))
            if missing:
                raise FormatError(f"stats of {key!r} lack {missing}")
        width = max(np.asarray(p["mean"]).shape[0] if np.asarray(p["mean"]).ndim else 1 for p in parts)
        out[key] = _aggregate_feature([{k: np.asarray(v, dtype=np.float64) for k, v in p.items()} for p in parts], width)
    return out


def _aggregate_feature(parts: list[dict[str, np.ndarray]], width: int) -> dict[str, np.ndarray]:
    def padded(value: np.ndarray, fill: float) -> np.ndarray:
        value = np.atleast_1d(value)
        if value.shape[0] < width:
            value = np.pad(value, [(0, width - value.shape[0])] + [(0, 0)] * (value.ndim - 1), constant_values=fill)
        return value

    def present(part: dict[str, np.ndarray]) -> np.ndarray:
        own = np.atleast_1d(part["mean"]).shape[0]
        shape = np.atleast_1d(part["mean"]).shape
        mask = np.zeros((width, *shape[1:]), dtype=bool)
        mask[:own] = True
        return mask

    masks = np.stack([present(p) for p in parts])
    counts = np.stack([np.broadcast_to(np.atleast_1d(p["count"]).reshape(-1)[0], masks.shape[1:]) for p in parts]) * masks
    total = counts.sum(axis=0)
    means = np.stack([padded(p["mean"], 0.0) for p in parts])
    variances = np.stack([padded(p["std"], 0.0) ** 2 for p in parts])
    mean = (means * counts).sum(axis=0) / total
    variance = ((variances + (means - mean) ** 2) * counts).sum(axis=0) / total
    result = {
        "min": np.where(masks, np.stack([padded(p["min"], np.inf) for p in parts]), np.inf).min(axis=0),
        "max": np.where(masks, np.stack([padded(p["max"], -np.inf) for p in parts]), -np.inf).max(axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": np.atleast_1d(np.asarray(sum(int(np.atleast_1d(p["count"]).reshape(-1)[0]) for p in parts))),
    }
    for q in [k for k in parts[0] if k.startswith("q") and k[1:].isdigit()]:
        if all(q in p for p in parts):
            result[q] = (np.stack([padded(p[q], 0.0) for p in parts]) * counts).sum(axis=0) / total
    return result


def stats_as_json(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Statistics as LeRobot writes them to ``stats.json`` (``serialize_dict``: arrays as lists)."""
    return {key: {name: np.asarray(value).tolist() for name, value in feature.items()} for key, feature in stats.items()}


__all__ = ["aggregate_stats", "stats_as_json"]
