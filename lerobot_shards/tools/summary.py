"""``info``: a packed dataset's manifest summarized (local or in a bucket), for a terminal or
as JSON; the manifest is validated as the reader validates it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lerobot_shards.core.errors import FormatError, InspectError, StorageError
from lerobot_shards.core.format import (
    EPISODES_INDEX_PATH,
    SAMPLES_INDEX_PATH,
    SUPPORTED_FORMAT_VERSIONS,
    Manifest,
    check_bytes,
    parse_episodes_index,
    shard_tar_path,
)
from lerobot_shards.core.format.layout import pad_column
from lerobot_shards.core.format.parquet import iter_bounded_batches
from lerobot_shards.core.pack.packed_index import load_tasks, verified_read
from lerobot_shards.core.storage import Storage
from lerobot_shards.core.windows import frames_needed, resolve_delta_timestamps
from lerobot_shards.reader.decode.nvdec_rules import nvdec_refusal
from lerobot_shards.tools.sql import load_manifest


@dataclass(frozen=True)
class DatasetSummary:
    """What ``info`` shows: ``rows()`` for a table, ``to_json()`` for scripts. ``tasks``: the
    task count; ``windows_full``: per packed window, anchors with the whole window and all."""

    manifest: Manifest
    url: str
    pin: str
    tasks: int = 0
    windows_full: tuple[tuple[str, int, int], ...] = ()
    # Per colour camera, why NVDEC cannot decode its members (None: it can), judged on a real
    # member by the GPU stage's own rules (reader/decode/nvdec_rules.py).
    nvdec: tuple[tuple[str, str | None], ...] = ()

    def _cameras(self) -> str:
        """Each camera's size and packed codec, and whether NVDEC can decode it (what
        ``decode_device="cuda"`` needs)."""
        m, parts = self.manifest, []
        for key in m.video_keys:
            feature = m.features[key]
            size = "x".join(map(str, feature.camera.size)) if feature.camera else "?"
            parts.append(f"{key} {size} {feature.codec or '?'}")
        refused = [(key, why) for key, why in self.nvdec if why]
        if not self.nvdec:
            nvdec = "-"
        elif not refused:
            nvdec = "yes"
        else:
            nvdec = "no: " + "; ".join(f"{key}: {why.split(': ', 1)[-1]}" for key, why in refused)
        return f"{m.options.get('video')}: " + ", ".join(parts) + f"; NVDEC: {nvdec}" if parts else "none"

    def _policy_counts(self) -> str:
        """Dropped, padded and re-encoded episodes of those the pack read: the packed ones and
        the dropped ones (a dropped episode is not in the pack's total, so both are said)."""
        m = self.manifest
        dropped = len(m.extra.get("dropped_episodes", []))
        counts = f"{dropped} / {len(m.extra.get('padded_episodes', []))} / {len(m.extra.get('reencoded_episodes', []))}"
        packed = m.totals["episodes"]
        if dropped:
            return f"{counts} of {packed + dropped} episodes read ({packed} packed)"
        return f"{counts} of {packed} episodes"

    def _widths(self) -> str:
        f = self.manifest.features
        return " / ".join(str(f[k].shape[0]) if k in f and f[k].shape else "-" for k in ("observation.state", "action"))

    def rows(self) -> list[tuple[str, str]]:
        m = self.manifest
        source = m.source.get("repo_id") or m.source.get("uri")
        return [
            ("dataset", self.url),
            ("format", f"{m.format} format version {m.format_version} (readers read {_readable()}; packer {m.packer_version})"),
            ("source", f"{source} ({m.source.get('codebase_version')})"),
            ("episodes / frames", f"{m.totals['episodes']} / {m.totals['frames']}"),
            ("shards / bytes", f"{m.totals['shards']} / {m.totals['bytes'] / 1e6:.2f} MB"),
            ("fps", str(m.fps)),
            ("cameras", self._cameras()),
            ("state / action widths", self._widths()),
            ("tasks", str(self.tasks)),
            ("windows", self._windows() or "-"),
            (
                "dropped / padded / re-encoded",
                self._policy_counts()
                + (
                    f"; {len(m.extra['trimmed_episodes'])} trimmed (video longer than the rows)"
                    if m.extra.get("trimmed_episodes")
                    else ""
                ),
            ),
        ]

    def _windows(self) -> str:
        """Each precomputed window with its keys' spans in frames and seconds, e.g.
        ``chunk: action 50 frames (1.00 s)``."""
        m, parts = self.manifest, []
        full = {name: (whole, total) for name, whole, total in self.windows_full}
        for name, window in m.windows.items():
            offsets = resolve_delta_timestamps(window, m.fps, tolerance_s=m.tolerance_s)
            spans = ", ".join(f"{key} {frames_needed(o)} frames ({frames_needed(o) / m.fps:.2f} s)" for key, o in offsets.items())
            share = (
                f"; full window on {full[name][0]} of {full[name][1]} anchors ({full[name][0] / max(full[name][1], 1):.0%})"
                if name in full
                else ""
            )
            parts.append(f"{name}: {spans}{share}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        """What ``info --format json`` prints: the summary as plain values."""
        m = self.manifest
        return {
            "dataset": self.url,
            "pin": self.pin,
            "format": m.format,
            "format_version": m.format_version,
            "packer_version": m.packer_version,
            "source": m.source,
            "fps": m.fps,
            "totals": m.totals,
            "video": m.options.get("video"),
            "cameras": {k: list(m.features[k].shape) for k in m.video_keys},
            "codecs": {k: m.features[k].codec for k in m.video_keys},
            "nvdec": {k: why is None for k, why in self.nvdec},
            "nvdec_refusals": {k: why for k, why in self.nvdec if why},
            "tasks": self.tasks,
            "windows_full": {name: {"full": whole, "anchors": total} for name, whole, total in self.windows_full},
            "features": {k: {"dtype": f.dtype, "shape": list(f.shape)} for k, f in m.features.items()},
            "windows": m.windows,
            "options": m.options,
            "dropped_episodes": m.extra.get("dropped_episodes", []),
            "padded_episodes": m.extra.get("padded_episodes", []),
            "reencoded_episodes": m.extra.get("reencoded_episodes", []),
            "trimmed_episodes": m.extra.get("trimmed_episodes", []),
        }


def summarize(dst: str, *, storage_options: dict | None = None) -> DatasetSummary:
    """Read and validate the manifest, the tasks and (with windows) the sample index, and
    return a summary.

    Raises:
        InspectError: no or an invalid manifest, or a file that differs from its digest.
    """
    storage = Storage(dst, storage_options)
    manifest, pin = load_manifest(storage)
    try:
        tasks = len(load_tasks(storage, manifest))
        windows = tuple(full_windows(storage, manifest))
        nvdec = tuple(nvdec_verdicts(storage, manifest))
    except (FormatError, StorageError) as err:
        raise InspectError(str(err)) from None
    return DatasetSummary(manifest, storage.url, pin, tasks=tasks, windows_full=windows, nvdec=nvdec)


def nvdec_verdicts(storage: Storage, manifest: Manifest) -> list[tuple[str, str | None]]:
    """Per colour video camera, why NVDEC cannot decode it, or None: the GPU stage's own rules
    (``nvdec_refusal``) applied to the camera's member of the first episode, read and checked
    against its digest (depth cameras are decoded on the CPU in any case)."""
    cameras = [k for k in manifest.video_keys if not manifest.features[k].is_depth]
    if not cameras or not manifest.totals["episodes"]:
        return []
    episodes = parse_episodes_index(verified_read(storage, manifest, EPISODES_INDEX_PATH), manifest)
    entry = episodes[0]
    out = []
    for key in cameras:
        member, camera = entry.cameras[key], manifest.features[key].camera
        tar = shard_tar_path(entry.shard)
        data = storage.read_range(tar, member.offset, member.size)
        where = f"{tar} episode {entry.episode_index} camera {key}"
        check_bytes(data, size=member.size, sha256=member.sha256, where=where)
        size = camera.size if camera is not None else (None, None)
        refusal, _ = nvdec_refusal(
            data, member.codec, where=key, frames=member.samples, height=size[0], width=size[1], camera=key
        )
        out.append((key, refusal))
    return out


def _readable() -> str:
    """The format versions this reader reads, as ``2-5``."""
    versions = sorted(SUPPORTED_FORMAT_VERSIONS)
    return f"{versions[0]}-{versions[-1]}" if len(versions) > 1 else str(versions[0])


def task_frames(storage: Storage, manifest: Manifest) -> dict[int, int]:
    """Rows per ``task_index``, counted over the digest-checked sample index (a row per frame,
    each with its own task: an episode whose task changes counts each row once), streamed."""
    frames = manifest.totals["frames"]
    if not frames:
        return {}
    data = verified_read(storage, manifest, SAMPLES_INDEX_PATH)
    counts: dict[int, int] = {}
    for batch in iter_bounded_batches(
        data,
        where=storage.describe(SAMPLES_INDEX_PATH),
        columns=["task_index"],
        rows=frames,
        rows_expected=f"the manifest records {frames} frames",
    ):
        values, numbers = np.unique(batch.column("task_index").to_numpy(zero_copy_only=False), return_counts=True)
        for value, number in zip(values.tolist(), numbers.tolist()):
            counts[int(value)] = counts.get(int(value), 0) + int(number)
    return counts


def full_windows(storage: Storage, manifest: Manifest) -> list[tuple[str, int, int]]:
    """Per packed window: ``(name, anchors whose every key has no padded slot, all anchors)``,
    from the digest-checked sample index, streamed."""
    if not manifest.windows:
        return []
    frames = manifest.totals["frames"]
    data = verified_read(storage, manifest, SAMPLES_INDEX_PATH)
    full = dict.fromkeys(manifest.windows, 0)
    columns = [
        pad_column(window, key, side) for window, keys in manifest.windows.items() for key in keys for side in ("before", "after")
    ]
    # A row per frame: streamed in batches, never decoded whole.
    for batch in iter_bounded_batches(
        data,
        where=storage.describe(SAMPLES_INDEX_PATH),
        columns=columns,
        rows=frames,
        rows_expected=f"the manifest records {frames} frames",
    ):
        for window, keys in manifest.windows.items():
            ok = np.ones(batch.num_rows, dtype=bool)
            for key in keys:
                for side in ("before", "after"):
                    ok &= batch.column(pad_column(window, key, side)).to_numpy(zero_copy_only=False) == 0
            full[window] += int(ok.sum())
    return [(window, full[window], frames) for window in manifest.windows]
