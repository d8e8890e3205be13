"""``preview``: one self-contained HTML page to look at a packed dataset instead of reading tables.

What it shows: a summary (episodes, frames, fps, cameras with codec, resolution and bitrate,
shard sizes), the tasks with their episode and frame counts, how many anchors have a full
window for each packed window, and per episode a contact sheet of a few frames per camera and
plots of the vector features (state, action) over time. Images are inlined (JPEG, base64),
plots are inline SVG: the file opens anywhere, offline.

It reads only what it shows: the manifest and indexes, and for each shown episode its row
group and members (every byte checked against its digest, as the reader does), decoding a
few frames per camera. Every string that comes from the dataset is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lerobot_shards.core.format import VIDEO_CODECS
from lerobot_shards.core.format.features import FeatureSpec
from lerobot_shards.core.pack.packed_index import PackedIndex
from lerobot_shards.core.storage import Storage
from lerobot_shards.reader.decode.frames import CpuDecoders
from lerobot_shards.reader.decode.spec import FrameSpec
from lerobot_shards.reader.fetch.episode_pool import EpisodeFetcher
from lerobot_shards.tools.summary import full_windows, task_frames

_THUMB_WIDTH = 160
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


@dataclass
class PreviewReport:
    """What ``render_preview`` wrote: episodes shown (of all), frames decoded, bytes of the page."""

    episodes_shown: int
    episodes_total: int
    frames_decoded: int
    html_bytes: int
    seconds: float


def render_preview(
    root: str,
    *,
    storage_options: dict | None = None,
    max_episodes: int = 12,
    frames_per_episode: int = 6,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[str, PreviewReport]:
    """Build the preview page of the pack at ``root`` (a directory or a bucket URL).

    Shows the first ``max_episodes`` episodes with ``frames_per_episode`` evenly spaced frames
    per camera; ``progress(done, total)`` is called after each episode.

    Returns:
        ``(html, report)``.

    Raises:
        FormatError / IntegrityError: the pack is damaged (names the file).
        DecodeError: a member does not decode.
    """
    if max_episodes < 0 or frames_per_episode < 1:
        raise ValueError("max_episodes must be >= 0 and frames_per_episode >= 1")
    started = time.perf_counter()
    storage = Storage(root, storage_options)
    index = PackedIndex(storage, with_tasks=True)
    manifest = index.manifest
    fetcher = EpisodeFetcher.for_pack(storage, index)
    stage = CpuDecoders("auto")
    shown = index.episodes[:max_episodes]
    sections, decoded = [], 0
    for done, entry in enumerate(shown, 1):
        episode = fetcher.fetch(done - 1)
        picks = sorted({int(round(x)) for x in np.linspace(0, entry.length - 1, min(frames_per_episode, entry.length))})
        sheets = []
        for key, member in entry.cameras.items():
            camera = manifest.features[key].camera
            assert camera is not None  # a video feature is a camera (parse_feature)
            decoder = stage.open(
                episode.video[key], where=episode.where(key), spec=FrameSpec(camera.height, camera.width, member.samples)
            )
            frames = stage.decode(decoder, [member.position(p) for p in picks], where=episode.where(key))
            decoded += len(picks)
            sheets.append((key, [_jpeg(frame) for frame in frames]))
        plots = [
            (
                name,
                svg_plot(
                    np.asarray(values, dtype=np.float64),
                    dimension_names(manifest.features[name] if name in manifest.features else None, values.shape[1]),
                    manifest.fps,
                ),
            )
            for name, values in _vector_columns(episode.columns)
        ]
        sections.append(_episode_html(entry, picks, sheets, plots, manifest.fps))
        if progress is not None:
            progress(done, len(shown))
    page = _page(root, manifest, index, full_windows(storage, manifest), sections, len(shown), task_frames(storage, manifest))
    report = PreviewReport(len(shown), len(index.episodes), decoded, len(page.encode()), time.perf_counter() - started)
    return page, report


def _jpeg(frame) -> str:
    from PIL import Image

    pixels = frame.permute(1, 2, 0).contiguous().numpy()
    image = Image.fromarray(pixels)
    image.thumbnail((_THUMB_WIDTH, _THUMB_WIDTH * 4))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=80)
    return base64.b64encode(buffer.getvalue()).decode()


def _vector_columns(columns: dict) -> list[tuple[str, np.ndarray]]:
    """Float feature columns worth plotting (state, action, ...), in column order, as (rows, dims)."""
    out = []
    for name, value in columns.items():
        if name in ("timestamp", "index", "frame_index", "episode_index", "task_index") or not hasattr(value, "numpy"):
            continue
        array = value.numpy()
        if array.dtype.kind == "f" and array.ndim in (1, 2) and len(array):
            out.append((name, array if array.ndim == 2 else array[:, None]))
    return out


_MAX_LINES = 32  # a plot stays readable; beyond it the legend says "first 32 of N"


def dimension_names(feature: FeatureSpec | None, dims: int) -> list[str]:
    """A label per dimension from a feature's ``names`` (a list, or LeRobot's ``{"motors": [...]}``),
    else ``dim i``; names from the dataset are untrusted and only ever shown escaped."""
    names = feature.names if feature is not None else None
    if names is None or len(names) != dims:
        return [f"dim {i}" for i in range(dims)]
    return [n[:40] for n in names]


def line_colours(count: int) -> list[str]:
    """``count`` colours no two alike: the palette's first, then hues spread around the circle
    (two lightnesses), so a plot of 14 (or 32) dimensions never draws two lines alike."""
    if count <= len(_PALETTE):
        return list(_PALETTE[:count])
    return [f"hsl({round(360 * i / count)}, 70%, {38 if i % 2 else 52}%)" for i in range(count)]


def svg_plot(values: np.ndarray, names: list[str], fps: float, width: int = 560, height: int = 170) -> str:
    """One polyline per dimension on a shared y range, seconds on x, value labels in the left
    margin (not over the curves), and a legend of the dimension names below."""
    shown = values[:, :_MAX_LINES]
    finite = shown[np.isfinite(shown)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    span = high - low or 1.0
    left, right, top, bottom = 46, 8, 8, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    steps = max(len(shown) - 1, 1)
    lines = []
    colours = line_colours(shown.shape[1])
    for dim in range(shown.shape[1]):
        points = " ".join(
            f"{left + i * plot_w / steps:.1f},{top + plot_h - (v - low) / span * plot_h:.1f}"
            for i, v in enumerate(shown[:, dim])
            if np.isfinite(v)
        )
        lines.append(f'<polyline fill="none" stroke="{colours[dim]}" stroke-width="1.2" points="{points}"/>')
    seconds = (len(shown) - 1) / fps if fps else 0.0
    ticks = []
    for k in range(5):
        x = left + k * plot_w / 4
        # The last label ends at the plot's right edge: centred there, half of it was cut off.
        anchor = "end" if k == 4 else "middle"
        ticks.append(
            f'<text x="{x:.1f}" y="{height - 6}" font-size="10" fill="#666" text-anchor="{anchor}">{seconds * k / 4:.1f}s</text>'
        )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="plot">'
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ddd"/>{"".join(lines)}'
        f'<text x="{left - 4}" y="{top + 10}" font-size="10" fill="#666" text-anchor="end">{high:.3g}</text>'
        f'<text x="{left - 4}" y="{top + plot_h}" font-size="10" fill="#666" text-anchor="end">{low:.3g}</text>'
        f"{''.join(ticks)}</svg>"
    )
    legend = "".join(
        f'<span class="key"><i style="background:{colours[dim]}"></i>{_e(name)}</span>'
        for dim, name in enumerate(names[:_MAX_LINES])
    )
    if values.shape[1] > _MAX_LINES:
        legend += f'<span class="key">(first {_MAX_LINES} of {values.shape[1]} dimensions)</span>'
    return svg + f'<div class="legend">{legend}</div>'


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _episode_html(entry, picks, sheets, plots, fps) -> str:
    tasks = ", ".join(_e(t) for t in entry.tasks) or "-"
    rows = []
    for key, images in sheets:
        cells = "".join(
            f'<figure><img src="data:image/jpeg;base64,{data}" alt="{_e(key)} frame {frame}"><figcaption>{frame}</figcaption></figure>'
            for data, frame in zip(images, picks)
        )
        rows.append(f'<div class="sheet"><div class="cam">{_e(key)}</div>{cells}</div>')
    charts = "".join(f'<div class="chart"><div class="cam">{_e(name)}</div>{svg}</div>' for name, svg in plots)
    return (
        f"<section><h3>Episode {entry.episode_index} <small>{entry.length} frames, {entry.length / fps:.1f} s, "
        f'shard {entry.shard}; task: {tasks}</small></h3>{"".join(rows)}<div class="charts">{charts}</div></section>'
    )


def _task_rows(index: PackedIndex, frames_per_task: dict[int, int]) -> str:
    """The task table's rows: per task, the episodes that list it and the rows that hold it
    (counted per row: an episode of two tasks adds each of its rows to one of them)."""
    task_episodes: Counter[str] = Counter()
    for entry in index.episodes:
        for task in entry.tasks or ("(none)",):
            task_episodes[task] += 1
    names = index.tasks
    rows: Counter[str] = Counter()
    for task_index, count in frames_per_task.items():
        rows[names.get(task_index, f"(task_index {task_index})")] += count
    return "".join(
        f"<tr><td>{_e(t)}</td><td>{task_episodes[t]}</td><td>{rows[t]}</td></tr>" for t in sorted(set(task_episodes) | set(rows))
    )


def _page(root, manifest, index, validity, sections, shown, frames_per_task: dict[int, int]) -> str:
    episodes = index.episodes
    seconds = int(episodes.length.sum()) / manifest.fps
    cameras = []
    for k, key in enumerate(episodes.video_keys):
        feature = manifest.features[key]
        info = feature.info
        height, width = feature.camera.size if feature.camera else ("?", "?")
        member_bytes = int(episodes.member_size[:, k].sum())
        codecs = sorted(VIDEO_CODECS[c] for c in np.unique(episodes.member_codec[:, k]).tolist())
        bitrate = member_bytes * 8 / seconds / 1e3 if seconds else 0.0
        cameras.append(
            f"<tr><td>{_e(key)}</td><td>{_e('/'.join(codecs))}</td><td>{_e(height)}x{_e(width)}</td>"
            f"<td>{_e(info.get('video.g', ''))}</td><td>{member_bytes / 1e6:.1f} MB</td><td>{bitrate:.0f} kbit/s</td></tr>"
        )
    sizes = sorted(s.tar_bytes + s.parquet_bytes for s in manifest.shards)
    shard_text = (
        f"{len(sizes)} ({sizes[0] / 1e6:.1f} / {sizes[len(sizes) // 2] / 1e6:.1f} / {sizes[-1] / 1e6:.1f} MB min/median/max)"
        if sizes
        else "0"
    )
    tasks = _task_rows(index, frames_per_task)
    windows = (
        "".join(
            f"<tr><td>{_e(name)}</td><td>{_e(json.dumps(manifest.windows[name]))}</td><td>{full} of {total} ({100 * full / max(total, 1):.1f}%)</td></tr>"
            for name, full, total in validity
        )
        or '<tr><td colspan="3">no windows packed (see <code>pack --window</code>)</td></tr>'
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>lerobot-shards preview: {_e(root)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; }}
table {{ border-collapse: collapse; margin: 8px 0 18px; }} td, th {{ border: 1px solid #ddd; padding: 3px 8px; text-align: left; }}
section {{ border-top: 1px solid #ccc; padding-top: 6px; }} small {{ color: #666; font-weight: normal; }}
.sheet {{ display: flex; align-items: flex-start; gap: 4px; margin: 4px 0; }} .cam {{ width: 180px; font-size: 12px; color: #444; overflow-wrap: anywhere; }}
figure {{ margin: 0; }} figcaption {{ font-size: 10px; color: #888; text-align: center; }} img {{ display: block; width: {_THUMB_WIDTH}px; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 12px; margin: 6px 0 14px; }}
.legend {{ max-width: 560px; font-size: 11px; color: #444; }}
.legend .key {{ display: inline-block; margin: 0 10px 2px 0; white-space: nowrap; }}
.legend i {{ display: inline-block; width: 10px; height: 3px; margin: 0 4px 2px 0; vertical-align: middle; }}
</style></head>
<body data-images-loaded="pending">
<h1>{_e(root)}</h1>
<h2>Summary</h2>
<table>
<tr><th>format</th><td>{_e(manifest.format_version)}</td></tr>
<tr><th>episodes</th><td>{len(episodes)} ({shown} shown below)</td></tr>
<tr><th>frames</th><td>{sum(e.length for e in episodes)} at {manifest.fps} fps ({seconds / 60:.1f} min)</td></tr>
<tr><th>shards</th><td>{shard_text}</td></tr>
<tr><th>source</th><td>{_e(manifest.source.get("uri", "") if isinstance(manifest.source, dict) else "")}</td></tr>
</table>
<h2>Cameras</h2>
<table><tr><th>key</th><th>codec</th><th>size</th><th>GOP</th><th>bytes</th><th>bitrate</th></tr>{"".join(cameras)}</table>
<h2>Tasks</h2>
<table><tr><th>task</th><th>episodes</th><th>frames</th></tr>{tasks}</table>
<h2>Windows</h2>
<table><tr><th>window</th><th>delta_timestamps</th><th>anchors with the full window</th></tr>{windows}</table>
<h2>Episodes</h2>
{"".join(sections)}
<script>
window.addEventListener("load", () => {{
  const images = Array.from(document.images);
  const ok = images.filter((img) => img.complete && img.naturalWidth > 0).length;
  document.body.dataset.imagesLoaded = ok + "/" + images.length;
}});
</script>
</body></html>
"""


__all__ = ["PreviewReport", "render_preview"]
