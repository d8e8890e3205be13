"""``mixture create``: describe every packed dataset under a root in ``mixture.json``.

Reads ``DST/*/manifest.json`` (local or any fsspec URL). Datasets without a manifest are
incomplete or failed packs: they are listed, with the error recorded by the SLURM array in
``DST/_failures/<name>.json`` when there is one, and left out of the mixture.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from packer.destination import Destination
from reader.format import MANIFEST_PATH, FormatError, Manifest
from reader.mixture import MIXTURE_FORMAT

MIXTURE_PATH = "mixture.json"
FAILURES_DIR = "_failures"


@dataclass
class MixtureReport:
    datasets: list[dict] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)


def create_mixture(dst: str, *, storage_options: dict | None = None) -> MixtureReport:
    """Write ``DST/mixture.json`` for every complete packed dataset directly under ``DST``."""
    destination = Destination(dst, storage_options)
    report = MixtureReport()
    for name in destination.list(""):
        if name.startswith(("_", ".")) or name == MIXTURE_PATH:
            continue
        rel = f"{name}/{MANIFEST_PATH}"
        if not destination.exists(rel):
            failure = f"{FAILURES_DIR}/{name}.json"
            reason = json.loads(destination.read_bytes(failure)).get("error") if destination.exists(failure) else "no manifest.json (pack incomplete)"
            report.failures[name] = reason
            continue
        try:
            manifest = Manifest.from_json(destination.read_bytes(rel), where=rel)
        except FormatError as err:
            report.failures[name] = str(err)
            continue
        report.datasets.append(
            {
                "name": name,
                "path": name,
                "anchors": manifest.totals["frames"],
                "episodes": manifest.totals["episodes"],
                "fps": manifest.fps,
                "video_keys": manifest.video_keys,
                "features": {k: {"dtype": f["dtype"], "shape": f["shape"]} for k, f in manifest.features.items()},
                "weight": manifest.totals["frames"],
            }
        )
    for name in destination.list(FAILURES_DIR):
        stem = name.removesuffix(".json")
        if stem not in report.failures and not any(d["name"] == stem for d in report.datasets):
            report.failures[stem] = json.loads(destination.read_bytes(f"{FAILURES_DIR}/{name}")).get("error", "?")
    spec = {"format": MIXTURE_FORMAT, "version": 1, "default_weights": "anchors", "datasets": report.datasets}
    destination.write_bytes(MIXTURE_PATH, (json.dumps(spec, indent=1) + "\n").encode())
    return report
