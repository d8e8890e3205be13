"""``manifest.json``: the packed dataset's table of contents, commit point and root of trust.

Every other file a reader uses is checked against what the manifest records for it: shard
files and the shard parquet footers by size and SHA-256, the index and ``meta/`` files by
size and SHA-256 (``files``), and (through the episodes index) every row group and member.
The manifest itself carries ``content_sha256``, a digest of its own content, so damage to
it is detected too; a user who trusts one manifest pins it by the SHA-256 of its bytes
(``manifest_sha256``), and then every sample is the packed one or an error.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lerobot_shards.core.errors import (
    FormatError,
    IntegrityError,
    PinMismatchError,
    UnsupportedFormatVersionError,
)
from lerobot_shards.core.format.features import Features, parse_features
from lerobot_shards.core.format.fields import (
    Fields,
    canonical_json,
    check_pin,
    is_int,
    is_sha256_hex,
    load_json,
    sha256_hex,
)
from lerobot_shards.core.format.layout import (
    EPISODES_INDEX_PATH,
    FORMAT_NAME,
    FPS_FORMAT_VERSION,
    FRAME_MISMATCH_POLICIES,
    INDEX_DIR,
    MANIFEST_PATH,
    META_DIR,
    RETIRED_FORMAT_VERSIONS,
    SAMPLES_INDEX_PATH,
    SUPPORTED_FORMAT_VERSIONS,
    TASKS_PATH,
    VIDEO_MODES,
    check_feature_key,
    check_key,
    pad_columns,
    safe_relative_path,
    shard_name,
)
from lerobot_shards.core.format.limits import (
    MAX_DATASET_EPISODES,
    MAX_DATASET_FRAMES,
    MAX_DATASET_MEMBERS,
    MAX_FOOTER_BYTES,
    MAX_FPS,
    MAX_JSON_DEPTH,
    MAX_MANIFEST_BYTES,
    MAX_WINDOW_OFFSETS,
)

CONTENT_DIGEST_FIELD = "content_sha256"
_MAX_SIZE = 1 << 50  # no file of a dataset is a petabyte: larger numbers are damage


@dataclass(frozen=True)
class FileEntry:
    """Size and SHA-256 of one file (``bytes`` long, digest of all of it)."""

    bytes: int
    sha256: str


@dataclass(frozen=True)
class FooterEntry:
    """Where a shard parquet's footer lies (``[offset, offset + bytes)``, the file's end) and
    its SHA-256: the footer (metadata + length + magic) is what a reader parses first."""

    offset: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class ShardEntry:
    """One shard in the manifest. Byte counts and sha256 cover the whole files."""

    index: int
    name: str
    num_episodes: int
    frames: int
    tar_bytes: int
    tar_sha256: str
    parquet_bytes: int
    parquet_sha256: str
    parquet_footer: FooterEntry

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> ShardEntry:
        f = Fields(data, where)
        index = f.int("index", hi=_MAX_SIZE)
        name = f.str("name")
        if name != shard_name(index):
            raise FormatError(f"{where}: shard {index} must be named {shard_name(index)!r}, found {name[:80]!r}")
        parquet_bytes = f.int("parquet_bytes", hi=_MAX_SIZE)
        footer = f.obj("parquet_footer")
        entry = FooterEntry(
            footer.int("offset", hi=_MAX_SIZE), footer.int("bytes", lo=12, hi=MAX_FOOTER_BYTES), footer.sha256("sha256")
        )
        if entry.offset + entry.bytes != parquet_bytes:
            raise FormatError(
                f"{where}: parquet_footer [{entry.offset}, {entry.offset + entry.bytes}) must end the "
                f"{parquet_bytes}-byte shard parquet"
            )
        return cls(
            index=index,
            name=name,
            num_episodes=f.int("num_episodes", hi=_MAX_SIZE),
            frames=f.int("frames", hi=_MAX_SIZE),
            tar_bytes=f.int("tar_bytes", hi=_MAX_SIZE),
            tar_sha256=f.sha256("tar_sha256"),
            parquet_bytes=parquet_bytes,
            parquet_sha256=f.sha256("parquet_sha256"),
            parquet_footer=entry,
        )


@dataclass(frozen=True)
class Manifest:
    """``manifest.json``, validated.

    Attributes:
        format: always ``FORMAT_NAME``.
        format_version: integer, bumped on any incompatible change.
        packer_version: version of the packer that wrote the dataset.
        options: packing options that shape the output (video mode, codec settings, ...).
        source: where the data came from (uri or repo_id/revision, codebase_version) and its
            ``fingerprint`` (digests of the source metadata, sizes of its data files).
        fps: frames per second of every stream.
        features: LeRobot ``info.json`` features, parsed (``Features``); video features
            describe the packed codec, tabular ones what the shard parquet holds
            (``extra["schema_drift"]`` when the source's info.json and data parquet disagree).
        video_keys: camera feature names, in member order within an episode.
        windows: named ``delta_timestamps`` windows precomputed into the sample index.
        tolerance_s: tolerance used to validate window offsets.
        shards: one entry per shard, in shard order.
        files: size and SHA-256 of every ``index/`` and ``meta/`` file, by relative path.
        totals: ``episodes``, ``frames``, ``shards``, ``bytes`` (tar + parquet).
        extra: ``dropped_episodes``, ``padded_episodes``, ``reencoded_episodes`` (and
            ``schema_drift`` when present).
    """

    format: str
    format_version: int
    packer_version: str
    options: dict[str, Any]
    source: dict[str, Any]
    fps: float
    features: Features
    video_keys: list[str]
    windows: dict[str, dict[str, list[float]]]
    tolerance_s: float
    shards: list[ShardEntry]
    files: dict[str, FileEntry]
    totals: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)

    # -- writing ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON data, ``content_sha256`` included (computed over the rest)."""
        # Field order is the JSON's; features go out as the dataset wrote them (their digest).
        data = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "features"}
        data = {
            **{k: data[k] for k in ("format", "format_version", "packer_version", "options", "source", "fps")},
            "features": self.features.to_json(),
            **data,
        }
        data["shards"] = [asdict(s) for s in self.shards]
        data["files"] = {k: asdict(v) for k, v in self.files.items()}
        data[CONTENT_DIGEST_FIELD] = content_sha256(data)
        return data

    def to_json(self) -> str:
        """Serialize deterministically (field order, feature order as in the source)."""
        import json

        return json.dumps(self.to_dict(), indent=1) + "\n"

    # -- reading ----------------------------------------------------------------------------
    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = MANIFEST_PATH, expected_sha256: str | None = None) -> Manifest:
        """Parse and validate ``manifest.json`` bytes.

        ``expected_sha256`` pins the manifest: the SHA-256 of ``text`` must equal it.

        Raises:
            PinMismatchError: the bytes are not the pinned manifest.
            UnsupportedFormatVersionError: a format version this reader does not read.
            IntegrityError: ``content_sha256`` does not match the content (damaged manifest).
            FormatError: anything else malformed (the message names the field).
        """
        raw = text.encode() if isinstance(text, str) else bytes(text)
        if expected_sha256 is not None:
            expected_sha256 = check_pin(expected_sha256)
            found = sha256_hex(raw)
            if found != expected_sha256.removeprefix("sha256:").lower():
                raise PinMismatchError(
                    f"{where}: sha256 {found} is not the pinned manifest {expected_sha256}; the dataset was "
                    "re-packed or altered since it was pinned"
                )
        data = load_json(raw, where=where, max_bytes=MAX_MANIFEST_BYTES, max_depth=MAX_JSON_DEPTH)
        return cls.from_dict(data, where=where)

    @classmethod
    def from_dict(cls, data: Any, *, where: str = MANIFEST_PATH) -> Manifest:
        """Validate and build a manifest; see ``from_json`` for what it raises."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise FormatError(f"{where}: expected format {FORMAT_NAME!r}, found {str(found)[:80]!r}")
        version = data.get("format_version")
        if not is_int(version):
            raise UnsupportedFormatVersionError(f"{where}: format_version must be an integer, found {str(version)[:20]!r}")
        if version in RETIRED_FORMAT_VERSIONS:
            raise UnsupportedFormatVersionError(f"{where}: format_version {version}: {RETIRED_FORMAT_VERSIONS[version]}")
        if version not in SUPPORTED_FORMAT_VERSIONS:
            raise UnsupportedFormatVersionError(
                f"{where}: format_version {version if is_int(version) else repr(str(version)[:20])} is not supported by this reader "
                f"(supported: {sorted(SUPPORTED_FORMAT_VERSIONS)}); upgrade lerobot-shards or repack"
            )
        recorded = data.get(CONTENT_DIGEST_FIELD)
        if not is_sha256_hex(recorded):
            raise FormatError(
                f"{where}: field {CONTENT_DIGEST_FIELD!r} must be a sha256 hex digest, found {str(recorded)[:80]!r}"
            )
        if content_sha256(data) != recorded:
            raise IntegrityError(f"{where}: content does not match its {CONTENT_DIGEST_FIELD} (damaged after packing)")
        f = Fields(data, where)
        fps = _fps(f.number("fps", hi=MAX_FPS), int(version), where)
        features = parse_features(f.obj("features").data, where=where)
        video_keys = [check_feature_key(k, what="camera key", where=f"{where}: video_keys") for k in f.list("video_keys")]
        expected_cameras = features.video_keys
        if video_keys != expected_cameras:
            raise FormatError(f"{where}: video_keys {video_keys} must list the video features {expected_cameras} in order")
        shards = [ShardEntry.from_dict(s, where=f"{where}: shards[{i}]") for i, s in enumerate(f.list("shards"))]
        if [s.index for s in shards] != list(range(len(shards))):
            raise FormatError(f"{where}: shard indices must be 0..{len(shards) - 1} in order")
        manifest = cls(
            format=FORMAT_NAME,
            format_version=int(version),
            packer_version=f.str("packer_version"),
            options=_options(f.obj("options")),
            source=_source(f.obj("source")),
            fps=fps,
            features=features,
            video_keys=video_keys,
            windows=_windows(f.obj("windows"), features),
            tolerance_s=f.number("tolerance_s", hi=1.0),
            shards=shards,
            files=_files(f.obj("files")),
            totals=_totals(f.obj("totals"), shards),
            extra=_extra(f.obj("extra")),
        )
        _check_depth(manifest, where)
        members = manifest.totals["episodes"] * len(video_keys)
        if members > MAX_DATASET_MEMBERS:
            raise FormatError(
                f"{where}: {manifest.totals['episodes']} episodes x {len(video_keys)} cameras = {members} members, "
                f"more than the {MAX_DATASET_MEMBERS} a dataset may hold"
            )
        return manifest

    def file(self, rel: str) -> FileEntry:
        """The recorded size and digest of ``rel`` (an ``index/`` or ``meta/`` file).

        Raises:
            FormatError: the manifest records no such file.
        """
        entry = self.files.get(rel)
        if entry is None:
            raise FormatError(f"{MANIFEST_PATH}: records no size and digest for {rel}; the dataset cannot be checked")
        return entry


def content_sha256(data: dict[str, Any]) -> str:
    """SHA-256 of the manifest's canonical JSON without its ``content_sha256`` field."""
    return sha256_hex(canonical_json({k: v for k, v in data.items() if k != CONTENT_DIGEST_FIELD}))


def manifest_sha256(data: bytes) -> str:
    """The pin of a manifest: ``"sha256:<hex>"`` of its bytes as stored."""
    return "sha256:" + sha256_hex(data)


def _check_depth(manifest: Manifest, where: str) -> None:
    """Depth cameras must say how to read them; a format-2 pack re-encoded them as 8-bit colour.

    Raises:
        FormatError: a depth camera's quantization is not one LeRobot reads, or a format-2 pack
            whose depth video may have been re-encoded (its values are lost: repack).
    """
    depth = manifest.features.depth
    lossy = manifest.options.get("video") != "copy" or manifest.extra.get("reencoded_episodes")
    recoded = [k for k in depth if k in manifest.video_keys]
    if manifest.format_version == 2 and recoded and lossy:
        raise FormatError(
            f"{where}: format 2 with depth cameras {recoded} that its packer may have re-encoded as 8-bit "
            "colour (their depth values are not in the pack); re-pack the source with this version: "
            "lerobot-shards pack SRC NEW_DST"
        )


# -- field validators -----------------------------------------------------------------------------
def _options(f: Fields) -> dict[str, Any]:
    f.str("video", choices=VIDEO_MODES)
    if f.has("on_frame_mismatch"):
        f.str("on_frame_mismatch", choices=FRAME_MISMATCH_POLICIES)
    return f.data


def _windows(f: Fields, features: Features) -> dict[str, dict[str, list[float]]]:
    windows: dict[str, dict[str, list[float]]] = {}
    for name, window in f.data.items():
        check_key(name, what="window name", where=f.where)
        w = Fields(window, f"{f.where}[{name!r}]")
        for key in w.data:
            if key not in features:
                raise FormatError(f"{w.where}: key {key[:80]!r} is not a feature of the dataset")
            deltas = w.list(key, max_items=MAX_WINDOW_OFFSETS)
            if not deltas or not all(isinstance(d, (int, float)) and not isinstance(d, bool) for d in deltas):
                raise FormatError(f"{w.where}: {key!r} must be a non-empty list of seconds, found {str(deltas)[:200]}")
        windows[name] = w.data
    pad_columns(windows, where=f.where)
    return windows


def _files(f: Fields) -> dict[str, FileEntry]:
    files: dict[str, FileEntry] = {}
    for rel, value in f.data.items():
        safe_relative_path(rel, where=f.where)
        if not rel.startswith((f"{META_DIR}/", f"{INDEX_DIR}/")):
            raise FormatError(f"{f.where}: {rel[:200]!r} is not under {META_DIR}/ or {INDEX_DIR}/")
        entry = Fields(value, f"{f.where}[{rel!r}]")
        files[rel] = FileEntry(entry.int("bytes", hi=_MAX_SIZE), entry.sha256("sha256"))
    missing = [rel for rel in (EPISODES_INDEX_PATH, SAMPLES_INDEX_PATH, TASKS_PATH) if rel not in files]
    if missing:
        raise FormatError(f"{f.where}: lacks entries for {missing}")
    return files


def _totals(f: Fields, shards: list[ShardEntry]) -> dict[str, int]:
    limits = {"episodes": MAX_DATASET_EPISODES, "frames": MAX_DATASET_FRAMES, "shards": _MAX_SIZE, "bytes": _MAX_SIZE}
    totals = {name: f.int(name, hi=limit) for name, limit in limits.items()}
    expected = {
        "episodes": sum(s.num_episodes for s in shards),
        "frames": sum(s.frames for s in shards),
        "shards": len(shards),
        "bytes": sum(s.tar_bytes + s.parquet_bytes for s in shards),
    }
    wrong = {k: (totals[k], v) for k, v in expected.items() if totals[k] != v}
    if wrong:
        detail = ", ".join(f"{k} {found} (the shards add up to {want})" for k, (found, want) in wrong.items())
        raise FormatError(f"{f.where}: {detail}")
    return totals


def _extra(f: Fields) -> dict[str, Any]:
    for key in ("dropped_episodes", "padded_episodes", "reencoded_episodes", "trimmed_episodes"):
        if f.has(key):
            f.int_list(key)
    if f.has("schema_drift"):  # a corpus report counts these lists (mixture report)
        drift = f.obj("schema_drift")
        for key in ("only_in_info", "only_in_parquet"):
            if drift.has(key) and not all(isinstance(k, str) for k in drift.list(key)):
                raise FormatError(f"{drift.where}: field {key!r} must be a list of feature names")
    return f.data


# What ``source.left_out`` may count: rows no episode lists, files no episode uses.
LEFT_OUT_KINDS = ("rows", "files")


def _source(f: Fields) -> dict[str, Any]:
    """The source record as written; ``left_out``, when present, counts only ``LEFT_OUT_KINDS``,
    each a whole number (a corpus report prints them)."""
    if f.has("left_out"):
        left_out = f.obj("left_out")
        unknown = sorted(k for k in left_out.data if k not in LEFT_OUT_KINDS)
        if unknown:
            raise FormatError(f"{left_out.where}: unknown field {unknown[0][:80]!r} (counts {list(LEFT_OUT_KINDS)})")
        for key in LEFT_OUT_KINDS:
            if left_out.has(key):
                left_out.int(key)
    return f.data


def _fps(value: float, version: int, where: str) -> float:
    """The manifest's ``fps``: positive; an int when whole, a fractional rate only from format 5."""
    if value < 1:
        raise FormatError(f"{where}: field 'fps' must be a number from 1, found {value!r}")
    if float(value).is_integer():
        return int(value)
    if version < FPS_FORMAT_VERSION:
        raise FormatError(f"{where}: fps {value!r} is not a whole number, which only format {FPS_FORMAT_VERSION} carries")
    return value


__all__ = [
    "CONTENT_DIGEST_FIELD",
    "FileEntry",
    "FooterEntry",
    "Manifest",
    "ShardEntry",
    "content_sha256",
    "manifest_sha256",
]
