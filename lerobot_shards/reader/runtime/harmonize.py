"""Heterogeneous features of a mixture: the rules that make samples of different datasets batch together.

Pure: no I/O, and torch only inside ``FeatureHarmonizer.apply``. ``docs/FORMAT.md``
("Mixtures") is the prose twin of these rules; the mixture file itself is
``lerobot_shards.core.format.mixture``.

``FeatureHarmonizer`` makes samples of different datasets batch together:

* ``key_map`` renames per dataset (``{"ds_a": {"observation.images.wrist_left":
  "observation.images.wrist"}}``); mapping a key to ``None`` drops it (select).
* Vector features in ``pad_keys`` (``observation.state``, ``action``) are zero-padded at the
  end to the widest dataset, with ``<key>_mask`` (bool, padded width; True = real value). A
  dataset without the key gets zeros and an all-False mask.
* Cameras (video and image features): the union over datasets; all datasets must agree on a
  camera's (H, W, C). A camera a dataset lacks is filled with zeros of the common shape
  (float32, or uint8 with ``return_uint8``; depth cameras float32 always), with
  ``<camera>_mask = False`` (0-d bool; True where present) and, if windowed,
  ``<camera>_is_pad`` all True.
* ``delta_timestamps`` are in seconds and keyed by mixture names; each dataset resolves them
  at its own fps (``lerobot_shards.core.windows.resolve_delta_timestamps``), so 0.1 s is 3 frames at
  30 fps and 1 frame at 10 fps. ``delta_frames`` (instead) are frame offsets taken at each
  dataset's own rate, so ``[0, 1, 2]`` spans 0.067 s at 30 fps and 0.2 s at 10 fps: a policy's
  delta indices (steps) on datasets recorded at different rates.
* Other keys are kept when every dataset has them, with equal shapes; dtypes that differ are
  promoted (``numpy.result_type``). A numeric key only some datasets have (a ``reward``
  added to one with LeRobot's ``modify_features``) is kept the same way, filled with zeros
  where it is missing and marked by ``<key>_mask`` (0-d bool), as a camera is. A key that can
  be neither (strings, language columns, shapes that differ, only in some datasets) is left
  out and named in ``dropped`` (``MixtureDataset`` warns with it; ``mixture create`` reports it).
* Every sample gets ``dataset_index`` (int64) and ``dataset_name`` (str).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lerobot_shards.core.errors import ArgumentError, HarmonizeError
from lerobot_shards.core.format.features import FeatureSpec, parse_features
from lerobot_shards.core.format.mixture import (
    DEFAULT_PAD_KEYS,
    MASK_SUFFIX,
    PAD_SUFFIX,
    SAMPLE_ADDED_KEYS,
    MixtureSpec,
    partial_features,
    sample_shape,
)
from lerobot_shards.core.windows import (
    DEFAULT_TOLERANCE_S,
    WindowError,
    resolve_delta_timestamps,
)


@dataclass(frozen=True)
class DatasetFeatures:
    """What the harmonizer needs of one dataset: its name, fps and features."""

    name: str
    fps: float
    features: Mapping[str, FeatureSpec]

    @classmethod
    def from_manifest_features(cls, name: str, fps: float, features: Mapping[str, Any]) -> DatasetFeatures:
        """From a ``features`` JSON object (``{key: {dtype, shape, ...}}``), parsed (``parse_features``).

        Raises:
            FormatError: a feature ``parse_feature`` refuses.
        """
        return cls(name, int(fps), parse_features(features, where=name))


@dataclass(frozen=True, eq=False)
class FeatureHarmonizer:
    """The common sample layout of a mixture, and how each dataset's samples map onto it.

    Build with ``FeatureHarmonizer.build`` (or ``from_spec``). Attributes are read-only.

    Attributes:
        names: dataset names, in mixture order.
        fps: per dataset.
        key_maps: per dataset ``{source key: mixture key or None (dropped)}``, every source
            feature listed.
        keys: mixture keys every harmonized sample carries (plus ``_mask``, ``_is_pad``,
            ``task``, ``dataset_index`` and ``dataset_name``).
        cameras: ``{camera: (C, H, W)}``, the union over datasets.
        depth_cameras: the cameras that are float32 whatever ``return_uint8`` says: depth maps
            and image features (LeRobot's pictures); their fill is float32, and a dataset that
            holds one as video gives it as float32 too (one dtype per batch).
        filled: ``{key: (sample shape, dtype)}`` of numeric keys some datasets lack (zeros of the
            dtype the reader yields for them, and a mask, there).
        dropped: ``{key: [dataset names that have it]}``: keys only some datasets have that
            cannot be filled, left out of every sample.
        pad_widths: ``{vector key: padded width}``.
        widths: per dataset ``{vector key: its own width}`` (absent: the dataset lacks it).
        present: per dataset, the mixture keys it provides.
        dtypes: ``{key: numpy dtype name}`` for non-video keys whose dtype differs across
            datasets (cast to it).
        delta_timestamps: ``{mixture key: [seconds]}``.
        offsets: per dataset ``{mixture key: frame offsets at that dataset's fps}``.
        return_uint8: missing cameras are uint8 zeros instead of float32.
    """

    names: tuple[str, ...]
    fps: tuple[float, ...]
    key_maps: tuple[Mapping[str, str | None], ...]
    keys: tuple[str, ...]
    cameras: Mapping[str, tuple[int, int, int]]
    depth_cameras: frozenset[str]
    filled: Mapping[str, tuple[tuple[int, ...], str]]
    dropped: Mapping[str, tuple[str, ...]]
    pad_widths: Mapping[str, int]
    widths: tuple[Mapping[str, int], ...]
    present: tuple[frozenset[str], ...]
    dtypes: Mapping[str, str]
    delta_timestamps: Mapping[str, tuple[float, ...]]
    offsets: tuple[Mapping[str, np.ndarray], ...]
    return_uint8: bool = False
    windows_in_frames: bool = False  # delta_timestamps holds frame offsets at each dataset's rate

    @classmethod
    def build(
        cls,
        datasets: Sequence[DatasetFeatures],
        *,
        key_map: Mapping[str, Mapping[str, str | None]] | None = None,
        pad_keys: Sequence[str] = DEFAULT_PAD_KEYS,
        delta_timestamps: Mapping[str, Sequence[float]] | None = None,
        tolerance_s: float = DEFAULT_TOLERANCE_S,
        return_uint8: bool = False,
        delta_frames: Mapping[str, Sequence[int]] | None = None,
    ) -> FeatureHarmonizer:
        """Derive the common layout.

        Args:
            datasets: per dataset name, fps and features, in mixture order.
            key_map: ``{dataset name: {source key: mixture key, or None to drop it}}``.
            pad_keys: 1-D features padded to the widest dataset with ``<key>_mask``.
            delta_timestamps: windows in seconds keyed by mixture names.
            tolerance_s: window tolerance (``resolve_delta_timestamps``).
            return_uint8: the samples' frames are uint8 (missing cameras match).
            delta_frames: windows as frame offsets taken at each dataset's own fps, keyed by
                mixture names (instead of ``delta_timestamps``).

        Raises:
            HarmonizeError: a key map for an unknown dataset or feature, or two source keys
                mapped onto one; a camera with different shapes across datasets; a pad key
                that is not 1-D; a kept key with different shapes; a window key no dataset
                has, or one that is not a multiple of a dataset's frame period. The message
                names the datasets, keys and shapes.
            ArgumentError: both ``delta_timestamps`` and ``delta_frames``, or a frame offset
                that is not an integer.
        """
        if delta_timestamps and delta_frames:
            raise ArgumentError("give windows in seconds (delta_timestamps) or in frames (delta_frames), not both")
        if not datasets:
            raise HarmonizeError("a mixture needs at least one dataset")
        names = tuple(d.name for d in datasets)
        key_maps, mapped = _mapped_features(datasets, key_map or {})
        cameras, depth_cameras = _common_cameras(names, mapped)
        pad_widths, widths = _pad_widths(names, mapped, tuple(pad_keys))
        present = tuple(frozenset(f) for f in mapped)
        common = frozenset.intersection(*present) - set(cameras) - set(pad_widths)
        # Keys only some datasets have: numeric ones of one shape are filled where missing (with a
        # mask), the rest are named and left out, never dropped in silence.
        filled, dropped = partial_features(list(zip(names, mapped)), exclude=set(cameras) | set(pad_widths))
        _check_common_shapes(names, mapped, common)
        dtypes = _promoted_dtypes(mapped, common | set(pad_widths) | set(filled))
        order = [k for feats in mapped for k in feats]
        keys = tuple(dict.fromkeys(k for k in order if k in common or k in cameras or k in pad_widths or k in filled))
        in_frames = bool(delta_frames)
        windows = (
            _frame_windows(delta_frames)
            if delta_frames
            else {k: tuple(float(s) for s in v) for k, v in (delta_timestamps or {}).items()}
        )
        _check_window_keys(windows, present, keys)
        _check_no_shadowed_keys(names, mapped, keys, cameras, pad_widths, filled, windows)
        _check_batchable_windows(windows, keys)
        return cls(
            names=names,
            fps=tuple(d.fps for d in datasets),
            key_maps=key_maps,
            keys=keys,
            cameras=cameras,
            depth_cameras=depth_cameras,
            filled=filled,
            dropped=dropped,
            pad_widths=pad_widths,
            widths=widths,
            present=present,
            dtypes=dtypes,
            delta_timestamps=windows,
            offsets=_window_offsets(datasets, mapped, windows, tolerance_s, in_frames=in_frames),
            return_uint8=return_uint8,
            windows_in_frames=in_frames,
        )

    @classmethod
    def from_spec(cls, spec: MixtureSpec, **options: Any) -> FeatureHarmonizer:
        """``build`` from a ``MixtureSpec``'s recorded features (no manifest reads)."""
        return cls.build([DatasetFeatures(d.name, d.fps, d.features) for d in spec.datasets], **options)

    def source_delta_timestamps(self, index: int) -> dict[str, list[float]]:
        """Dataset ``index``'s windows keyed by its own feature names (for ``PackedDataset``).

        Only keys the dataset has; a missing camera or vector is filled by ``apply``.
        """
        inverse = {v: k for k, v in self.key_maps[index].items() if v is not None}
        period = 1.0 / self.fps[index] if self.windows_in_frames else 1.0
        return {inverse[k]: [s * period for s in v] for k, v in self.delta_timestamps.items() if k in inverse}

    def output_keys(self) -> list[str]:
        """Every key of a harmonized sample, in order (``task`` and the dataset keys last)."""
        out = list(self.keys)
        out += [k + MASK_SUFFIX for k in self.keys if k in self.cameras or k in self.pad_widths or k in self.filled]
        out += [k + PAD_SUFFIX for k in self.delta_timestamps]
        return out + ["task", "dataset_index", "dataset_name"]

    def apply(self, index: int, sample: Mapping[str, Any]) -> dict[str, Any]:
        """Harmonize one sample of dataset ``index`` (a dict of torch tensors, as a reader yields).

        Returns:
            A new dict with exactly ``output_keys()`` (plus the encoded-video entry of a
            ``decode_device`` reader, renamed).

        Raises:
            HarmonizeError: a vector wider than the mixture's width for it, or a sample
                without a key its dataset declares.
        """
        import torch

        from lerobot_shards.reader.decode.wire import ENCODED_KEY

        name = self.names[index]
        renamed = self._renamed(index, sample)
        encoded = renamed.get(ENCODED_KEY, {})
        declared = self.present[index]
        lacking = [k for k in self.keys if k in declared and k not in renamed and k not in encoded]
        if lacking:
            raise HarmonizeError(f"dataset {name!r}: the sample lacks {lacking}, which its features declare")
        out: dict[str, Any] = {}
        for key in self.keys:
            window = self.delta_timestamps.get(key)
            steps = len(window) if window else None
            if key in self.cameras:
                self._camera(out, key, renamed, encoded, steps)
            elif key in self.filled:
                self._filled(out, key, renamed, steps)
            elif key in self.pad_widths:
                self._padded(out, key, renamed, steps, name)
            else:
                out[key] = renamed[key]
            if key in self.dtypes and isinstance(out.get(key), torch.Tensor):
                out[key] = out[key].to(_torch_dtype(self.dtypes[key]))
        for key, window in self.delta_timestamps.items():
            flag = renamed.get(key + PAD_SUFFIX)
            out[key + PAD_SUFFIX] = flag if flag is not None else torch.ones(len(window), dtype=torch.bool)
        out["task"] = renamed.get("task", "")
        out["dataset_index"] = torch.tensor(index, dtype=torch.int64)
        out["dataset_name"] = name
        if ENCODED_KEY in renamed:
            out[ENCODED_KEY] = encoded
        return out

    def _renamed(self, index: int, sample: Mapping[str, Any]) -> dict[str, Any]:
        """The sample under the mixture's names (a key mapped to None left out; ``<key>_is_pad``
        and the encoded-video entry's cameras follow their key)."""
        from lerobot_shards.reader.decode.wire import ENCODED_KEY

        mapping = self.key_maps[index]
        renamed: dict[str, Any] = {}
        for key, value in sample.items():
            if key == ENCODED_KEY:
                renamed[key] = {mapping.get(k, k): v for k, v in value.items() if mapping.get(k, k) is not None}
                continue
            base = key[: -len(PAD_SUFFIX)] if key.endswith(PAD_SUFFIX) and key[: -len(PAD_SUFFIX)] in mapping else None
            target = mapping.get(base, base) if base is not None else mapping.get(key, key)
            if target is None:
                continue
            renamed[target + PAD_SUFFIX if base is not None else target] = value
        return renamed

    def _camera(self, out: dict, key: str, renamed: dict, encoded: dict, steps: int | None) -> None:
        """A camera: its frames, or zeros of its shape where the dataset lacks it; its mask."""
        import torch

        have = key in renamed or key in encoded
        if key in renamed:
            value = renamed[key]
            if key in self.depth_cameras and value.dtype == torch.uint8:
                from lerobot_shards.reader.decode.unit_float import to_unit_float

                value = to_unit_float(value)  # a video in this dataset, pictures in another: one dtype
            out[key] = value
        elif not have:
            channels, height, width = self.cameras[key]
            shape = (channels, height, width) if steps in (None, 1) else (steps, channels, height, width)
            colour_uint8 = self.return_uint8 and key not in self.depth_cameras
            out[key] = torch.zeros(shape, dtype=torch.uint8 if colour_uint8 else torch.float32)
        out[key + MASK_SUFFIX] = torch.tensor(have)

    def _filled(self, out: dict, key: str, renamed: dict, steps: int | None) -> None:
        """A numeric key only some datasets have: its value, or zeros of its shape; its mask."""
        import torch

        have = key in renamed
        if have:
            out[key] = renamed[key]
        else:
            shape, kind = self.filled[key]
            shape = shape if steps is None else (steps, *shape)
            out[key] = torch.zeros(shape, dtype=_torch_dtype(self.dtypes.get(key, kind)))
        out[key + MASK_SUFFIX] = torch.tensor(have)

    def _padded(self, out: dict, key: str, renamed: dict, steps: int | None, name: str) -> None:
        """A padded vector: zero-padded at the end to the mixture's width (zeros where the
        dataset lacks it); its mask True on real values."""
        import torch

        width = self.pad_widths[key]
        mask = torch.zeros(width, dtype=torch.bool)
        if key in renamed:
            value = torch.as_tensor(renamed[key])
            own = value.shape[-1]
            if own > width:
                raise HarmonizeError(f"dataset {name!r}: {key!r} has width {own}, more than the mixture's {width}")
            out[key] = torch.nn.functional.pad(value, (0, width - own)) if own < width else value
            mask[:own] = True
        else:
            shape = (width,) if steps is None else (steps, width)
            out[key] = torch.zeros(shape, dtype=_torch_dtype(self.dtypes.get(key, "float32")))
        out[key + MASK_SUFFIX] = mask


# -- the steps of FeatureHarmonizer.build --------------------------------------------------------
def _mapped_features(
    datasets: Sequence[DatasetFeatures], key_map: Mapping[str, Mapping[str, str | None]]
) -> tuple[tuple[dict[str, str | None], ...], list[dict[str, FeatureSpec]]]:
    """Each dataset's ``{source key: mixture key or None}`` (every feature) and its features
    under their mixture keys.

    Raises:
        HarmonizeError: a key map of a dataset the mixture lacks, of a feature its dataset
            lacks, or mapping two source keys onto one.
    """
    names = [d.name for d in datasets]
    unknown = sorted(set(key_map) - set(names))
    if unknown:
        raise HarmonizeError(f"key_map names datasets {unknown} that are not in the mixture {names}")
    key_maps, mapped = [], []
    for d in datasets:
        mapping = dict(key_map.get(d.name, {}))
        missing = sorted(set(mapping) - set(d.features))
        if missing:
            raise HarmonizeError(
                f"key_map[{d.name!r}] renames {missing}, which dataset {d.name!r} lacks; it has {sorted(d.features)}"
            )
        full = {k: mapping.get(k, k) for k in d.features}
        targets = [v for v in full.values() if v is not None]
        clashes = sorted({t for t in targets if targets.count(t) > 1})
        if clashes:
            raise HarmonizeError(f"dataset {d.name!r}: several source keys map to {clashes}; each mixture key needs one source")
        key_maps.append(full)
        mapped.append({target: f for k, f in d.features.items() if (target := full[k]) is not None})
    return tuple(key_maps), mapped


def _common_cameras(
    names: Sequence[str], mapped: Sequence[Mapping[str, FeatureSpec]]
) -> tuple[dict[str, tuple[int, int, int]], frozenset[str]]:
    """Every camera's (C, H, W), one per mixture key, and which cameras are float32 whatever
    ``return_uint8`` says (depth maps, and image features: LeRobot's pictures are float32).

    Raises:
        HarmonizeError: a camera with different sizes in two datasets (names both).
    """
    cameras: dict[str, tuple[int, int, int]] = {}
    owner: dict[str, str] = {}
    depth: set[str] = set()
    for name, feats in zip(names, mapped):
        for key, feature in feats.items():
            camera = feature.camera
            if camera is None:
                continue
            if feature.depth or feature.kind == "image":
                depth.add(key)  # float32 whatever return_uint8 says (LeRobot's depth maps and pictures)
            chw = (camera.channels, camera.height, camera.width)
            if key in cameras and cameras[key] != chw:
                raise HarmonizeError(
                    f"camera {key!r} is (H, W, C) {_hwc(cameras[key])} in {owner[key]!r} and "
                    f"{_hwc(chw)} in {name!r}; repack one with `--video hevc --resize KEY=HxW` to a common size, or map one "
                    "to another key"
                )
            cameras[key], owner[key] = chw, name
    return cameras, frozenset(depth)


def _pad_widths(
    names: Sequence[str], mapped: Sequence[Mapping[str, FeatureSpec]], pad_keys: tuple[str, ...]
) -> tuple[dict[str, int], tuple[dict[str, int], ...]]:
    """The widest width of each pad key, and each dataset's own widths.

    Raises:
        HarmonizeError: a pad key that is not a 1-D vector in some dataset.
    """
    pad_widths: dict[str, int] = {}
    widths: list[dict[str, int]] = []
    for name, feats in zip(names, mapped):
        own = {}
        for key in pad_keys:
            if key in feats:
                feature = feats[key]
                if feature.camera is not None or len(feature.shape) != 1 or feature.shape[0] is None:
                    raise HarmonizeError(
                        f"dataset {name!r}: pad key {key!r} has shape {feature.shape}; only 1-D vectors are padded"
                    )
                own[key] = feature.shape[0]
                pad_widths[key] = max(pad_widths.get(key, 0), own[key])
        widths.append(own)
    return pad_widths, tuple(widths)


def _check_common_shapes(names: Sequence[str], mapped: Sequence[Mapping[str, FeatureSpec]], common: frozenset[str]) -> None:
    """A key every dataset keeps has one sample shape.

    Raises:
        HarmonizeError: names the key and each dataset's shape.
    """
    for key in sorted(common):
        if len({sample_shape(f[key].shape) for f in mapped}) > 1:
            seen = ", ".join(f"{n!r} {f[key].shape}" for n, f in zip(names, mapped))
            raise HarmonizeError(
                f"feature {key!r} has different shapes across datasets ({seen}); add it to pad_keys if it is a "
                f"vector, or drop it with key_map {{name: {{{key!r}: None}}}}"
            )


def _promoted_dtypes(mapped: Sequence[Mapping[str, FeatureSpec]], keys: set[str] | frozenset[str]) -> dict[str, str]:
    """The common numeric dtype of each key whose datasets disagree on its dtype.

    Raises:
        HarmonizeError: dtypes with no common numeric type.
    """
    dtypes: dict[str, str] = {}
    for key in sorted(keys):
        kinds = {f[key].dtype for f in mapped if key in f}
        if len(kinds) > 1:
            try:
                promoted = np.result_type(*sorted(kinds))
            except TypeError:
                promoted = None
            if promoted is None or promoted.kind not in "biuf":
                raise HarmonizeError(
                    f"feature {key!r} has dtypes {sorted(kinds)} across datasets, which have no common numeric type; "
                    f"drop it with key_map"
                )
            dtypes[key] = str(promoted)
    return dtypes


def _frame_windows(delta_frames: Mapping[str, Sequence[int]]) -> dict[str, tuple[float, ...]]:
    """``delta_frames`` checked: integer offsets (kept as floats, the windows' one type).

    Raises:
        ArgumentError: an offset that is not an integer.
    """
    windows = {}
    for key, offsets in delta_frames.items():
        bad = [o for o in offsets if isinstance(o, bool) or not isinstance(o, (int, np.integer))]
        if bad:
            raise ArgumentError(
                f"delta_frames[{key!r}] holds {bad[:3]}: frame offsets are integers (seconds go in delta_timestamps)"
            )
        windows[key] = tuple(float(o) for o in offsets)
    return windows


def _check_window_keys(
    windows: Mapping[str, tuple[float, ...]], present: Sequence[frozenset[str]], keys: tuple[str, ...]
) -> None:
    """Each window key is a key of some dataset.

    Raises:
        HarmonizeError: a key no dataset has.
    """
    orphans = sorted(k for k in windows if not any(k in p for p in present))
    if orphans:
        raise HarmonizeError(
            f"delta_timestamps keys {orphans} are in no dataset (after key_map); mixture keys: {sorted(set(keys))}"
        )


def _check_batchable_windows(windows: Mapping[str, tuple[float, ...]], keys: tuple[str, ...]) -> None:
    """Each window key is a key every sample has.

    Raises:
        HarmonizeError: a key only some datasets have that cannot be filled where missing.
    """
    unbatchable = sorted(k for k in windows if k not in keys)
    if unbatchable:
        raise HarmonizeError(
            f"delta_timestamps keys {unbatchable} are not in every dataset and cannot be filled where missing "
            f"(not numeric, or shapes differ), so samples would not batch; "
            f"map them with key_map or add vector keys to pad_keys"
        )


def _window_offsets(
    datasets: Sequence[DatasetFeatures],
    mapped: Sequence[Mapping[str, FeatureSpec]],
    windows: Mapping[str, tuple[float, ...]],
    tolerance_s: float,
    *,
    in_frames: bool = False,
) -> tuple[dict[str, np.ndarray], ...]:
    """Each dataset's windows (those of its keys) as frame offsets at its own fps (windows in
    frames are those offsets already).

    Raises:
        HarmonizeError: a window that is not a multiple of a dataset's frame period.
    """
    offsets = []
    for d, feats in zip(datasets, mapped):
        try:
            offsets.append(
                resolve_delta_timestamps(
                    {k: v for k, v in windows.items() if k in feats}, 1.0 if in_frames else d.fps, tolerance_s=tolerance_s
                )
            )
        except WindowError as err:
            raise HarmonizeError(f"dataset {d.name!r} (fps {d.fps}): {err}") from None
    return tuple(offsets)


def _check_no_shadowed_keys(
    names: Sequence[str],
    mapped_features: Sequence[Mapping[str, FeatureSpec]],
    keys: Sequence[str],
    cameras: Mapping[str, Any],
    pad_widths: Mapping[str, int],
    filled: Mapping[str, Any],
    windows: Mapping[str, Any],
) -> None:
    """No feature (after key maps) takes a name the harmonized sample sets itself: ``task``,
    ``dataset_index``, ``dataset_name``, the shipped members' key, or a generated ``_mask`` /
    ``_is_pad``; it would be overwritten, its values gone without a word.

    Raises:
        HarmonizeError: names the dataset, the feature and the name it would lose to.
    """
    generated = {k + MASK_SUFFIX for k in keys if k in cameras or k in pad_widths or k in filled}
    generated |= {k + PAD_SUFFIX for k in windows}
    for name, features in zip(names, mapped_features):
        for key in features:
            if key in SAMPLE_ADDED_KEYS or key in generated:
                raise HarmonizeError(
                    f"dataset {name!r}: feature {key!r} (after key maps) is a key the mixture sample sets itself, so its "
                    f"values would be overwritten; rename it with key_map {{{name!r}: {{{key!r}: 'NEW_NAME'}}}}"
                )


def _hwc(chw: tuple[int, int, int]) -> tuple[int, int, int]:
    return (chw[1], chw[2], chw[0])


def _torch_dtype(name: str):
    import torch

    return getattr(torch, "bool" if name == "bool" else name)
