"""``info``: a packed dataset's manifest summarized (local or in a bucket), for a terminal or
as JSON; the manifest is validated as the reader validates it."""

from __future__ import annotations

from dataclasses import dataclass

from packer.tools.sql import load_manifest
from reader.format import Manifest
from reader.plan.windows import frames_needed, resolve_delta_timestamps
from reader.storage import Storage


@dataclass(frozen=True)
class DatasetSummary:
    """What ``info`` shows: ``rows()`` for a table, ``to_json()`` for scripts."""

    manifest: Manifest
    url: str
    pin: str

    def rows(self) -> list[tuple[str, str]]:
        m = self.manifest
        options = m.options
        source = m.source.get("repo_id") or m.source.get("uri")
        return [
            ("dataset", self.url),
            ("format", f"{m.format} v{m.format_version} (packer {m.packer_version})"),
            ("source", f"{source} ({m.source.get('codebase_version')})"),
            ("episodes / frames", f"{m.totals['episodes']} / {m.totals['frames']}"),
            ("shards / bytes", f"{m.totals['shards']} / {m.totals['bytes'] / 1e6:.2f} MB"),
            ("fps", str(m.fps)),
            ("video", f"{options.get('video')} " + ", ".join(f"{k} {m.features[k]['shape']}" for k in m.video_keys)),
            ("windows", self._windows() or "-"),
            ("dropped / padded / re-encoded", f"{len(m.extra.get('dropped_episodes', []))} / {len(m.extra.get('padded_episodes', []))} / {len(m.extra.get('reencoded_episodes', []))} of {m.totals['episodes']} episodes"),
        ]

    def _windows(self) -> str:
        """Each precomputed window with its keys' spans in frames and seconds, e.g.
        ``chunk: action 50 frames (1.00 s)``."""
        m, parts = self.manifest, []
        for name, window in m.windows.items():
            offsets = resolve_delta_timestamps(window, m.fps, tolerance_s=m.tolerance_s)
            spans = ", ".join(f"{key} {frames_needed(o)} frames ({frames_needed(o) / m.fps:.2f} s)" for key, o in offsets.items())
            parts.append(f"{name}: {spans}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        """What ``info --format json`` prints: the summary as plain values."""
        m = self.manifest
        return {
            "dataset": self.url, "pin": self.pin, "format": m.format, "format_version": m.format_version,
            "packer_version": m.packer_version, "source": m.source, "fps": m.fps, "totals": m.totals,
            "video": m.options.get("video"), "cameras": {k: list(m.features[k]["shape"]) for k in m.video_keys},
            "features": {k: {"dtype": f.get("dtype"), "shape": f.get("shape")} for k, f in m.features.items()},
            "windows": m.windows, "options": m.options,
            "dropped_episodes": m.extra.get("dropped_episodes", []), "padded_episodes": m.extra.get("padded_episodes", []),
            "reencoded_episodes": m.extra.get("reencoded_episodes", []),
        }


def summarize(dst: str, *, storage_options: dict | None = None) -> DatasetSummary:
    """Read and validate the manifest and return a summary; raises ``InspectError``."""
    storage = Storage(dst, storage_options)
    manifest, pin = load_manifest(storage)
    return DatasetSummary(manifest, storage.url, pin)
