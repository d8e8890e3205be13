"""``PackedLeRobotDataset``: a pack (or a mixture) with ``LeRobotDataset``'s own face.

``ds[i]``, ``len(ds)``, ``ds.__getitems__(indices)``, ``ds.meta``, ``ds.episodes``,
``ds.num_frames``, ``ds.num_episodes`` and ``ds.absolute_to_relative_idx`` mean what they mean on
LeRobot 0.6.1's ``LeRobotDataset``, so any sampler, ``Subset``, ``WeightedRandomSampler`` or
training loop written for it runs unchanged, LeRobot's ``EpisodeAwareSampler`` included. The
samples are the streaming reader's (``PackedDataset``/``MixtureDataset``, checked against
LeRobot's), read by ``reader.runtime.random_access`` with bounded caches.

Positions (``ds[i]``, LeRobot's relative index):

- **a pack**: the rows of the selected episodes in ascending episode and frame order (LeRobot's
  storage order); a sample's ``index`` is its absolute index, and ``absolute_to_relative_idx``
  maps one to the other whenever they differ (an ``episodes=`` selection, or a pack of a subset
  of its source's episodes, which reads as ``LeRobotDataset(source, episodes=packed)``);
- **a mixture**: its datasets end to end in mixture order, each as above (a mixture made with
  ``--where`` runs over its anchors); a sample keeps its dataset's own ``index`` and carries
  ``dataset_index``/``dataset_name``; ``meta.episodes`` ranges are mixture positions (what
  ``EpisodeAwareSampler`` needs), ``episodes`` and ``absolute_to_relative_idx`` are None.
  Weights are a sampler's business here (``sample_weights``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.format import MANIFEST_PATH
from lerobot_shards.core.format.mixture import MIXTURE_FILE
from lerobot_shards.core.option_fields import keyword_signature, merge_options
from lerobot_shards.core.storage import Storage
from lerobot_shards.reader.dataset import PackedDataset
from lerobot_shards.reader.lerobot_meta import PackedMeta
from lerobot_shards.reader.mixture import MixtureDataset
from lerobot_shards.reader.plan.frame_positions import AbsoluteToRelative, EpisodeBounds, FramePositions
from lerobot_shards.reader.read_options import ReadOptions
from lerobot_shards.reader.runtime.random_access import CacheBounds, RandomAccess

_MIXTURE_KEYWORDS = ("names", "key_map", "pad_keys", "allow_remote_paths", "allow_duplicates", "delta_frames")


def _is_mixture(root: str | Sequence[str], options: ReadOptions) -> bool:
    """A list of packs, a ``mixture.json`` (or a folder holding one and no ``manifest.json``),
    rather than a pack."""
    if not isinstance(root, str):
        return True
    if root.rstrip("/").endswith(".json"):
        return True
    folder = Storage(root, options.storage_options, retry=options.retry)
    return not folder.exists(MANIFEST_PATH) and folder.exists(MIXTURE_FILE)


class PackedLeRobotDataset(torch.utils.data.Dataset):
    """Random access over a pack or a mixture, with ``LeRobotDataset``'s interface (see the module).

    Args:
        root: a pack's root, or a mixture (its ``mixture.json``, the folder holding it, or a
            list of pack roots); paths or fsspec URLs (``s3://bucket/packed``).
        episodes: LeRobot's episode selection (a pack only): kept as given in ``ds.episodes``.
        delta_timestamps: LeRobot's windows ``{key: [seconds, ...]}``.
        image_transforms, tolerance_s, return_uint8: as ``LeRobotDataset``'s (fields of
            ``ReadOptions``).
        depth_output_unit: LeRobot's name for ``depth_unit`` (``"mm"`` or ``"m"``).
        options: how to read (``ReadOptions``); ``episode_pool_size`` and ``open_bytes`` bound
            the episodes (and with them the decoders) a process keeps open between batches.
        **reading: fields of ``ReadOptions`` by name; for a mixture also ``MixtureDataset``'s
            ``names``, ``key_map``, ``pad_keys``, ``allow_remote_paths``, ``allow_duplicates``,
            ``delta_frames``.

    Raises:
        FormatError, IntegrityError, MixtureSpecError: as ``PackedDataset``/``MixtureDataset``.
        ArgumentError: an unknown option (names the closest), ``episodes`` of a mixture, unknown
            episodes, or a bad window.
    """

    @keyword_signature(ReadOptions)
    def __init__(
        self,
        root: str | Sequence[str],
        *,
        episodes: Sequence[int] | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        depth_output_unit: str | None = None,
        options: ReadOptions | None = None,
        **reading: Any,
    ):
        mixture_keywords = {k: reading.pop(k) for k in _MIXTURE_KEYWORDS if k in reading}
        if depth_output_unit is not None:
            reading["depth_unit"] = depth_output_unit
        options = merge_options(ReadOptions, options, reading, caller="PackedLeRobotDataset")
        self.is_mixture = _is_mixture(root, options)
        self.root = str(root) if isinstance(root, str) else [str(r) for r in root]
        self.stream = self._open(episodes, delta_timestamps, options, mixture_keywords)
        catalog = self.stream.catalog
        self._positions = FramePositions.from_counts(catalog.anchor_counts)
        self.episodes = self._episodes(episodes)
        self._absolute = self._absolute_map(given=episodes is not None)
        self._meta: PackedMeta | None = None
        self._engine: RandomAccess | None = None

    # -- opening ------------------------------------------------------------------------------
    def _open(
        self, episodes: Sequence[int] | None, delta: dict | None, options: ReadOptions, mixture: dict[str, Any]
    ) -> PackedDataset | MixtureDataset:
        """The stream whose catalog, windows, options and last step random access reads.

        Raises:
            ArgumentError: episodes of a mixture, or a mixture keyword for a pack.
        """
        if self.is_mixture:
            if episodes is not None:
                raise ArgumentError(
                    "episodes= selects episodes of one pack; a mixture's are chosen when it is made "
                    "(`lerobot-shards mixture create --where`), or open one of its packs"
                )
            return MixtureDataset(self.root, delta_timestamps=delta, options=options, **mixture)
        assert isinstance(self.root, str)  # a list of roots is a mixture
        if mixture:
            raise ArgumentError(f"{sorted(mixture)} are options of a mixture; {self.root} is a pack")
        selected = None if episodes is None else sorted({int(e) for e in episodes})
        return PackedDataset(self.root, delta_timestamps=delta, episodes=selected, options=options)

    def _episodes(self, given: Sequence[int] | None) -> list[int] | None:
        """LeRobot's ``episodes``: the selection as given; a pack that holds only some of its
        source's episodes reads as a selection of them; None for all (and for a mixture)."""
        if given is not None:
            return [int(e) for e in given]
        catalog = self.stream.catalog
        if self.is_mixture or self._contiguous():
            return None
        return catalog.episode_index.tolist()

    def _contiguous(self) -> bool:
        """Whether every row of the pack's source is packed, so absolute = relative positions."""
        catalog = self.stream.catalog
        starts = self._positions.starts[:-1]
        return bool(np.array_equal(catalog.from_index, starts) and np.array_equal(catalog.anchor_counts, catalog.length))

    def _absolute_map(self, *, given: bool) -> AbsoluteToRelative | None:
        if self.is_mixture or (not given and self.episodes is None):
            return None
        catalog = self.stream.catalog
        return AbsoluteToRelative(catalog.from_index, catalog.length, self._positions.starts[:-1])

    # -- LeRobotDataset's face -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._positions)

    @property
    def num_frames(self) -> int:
        """Frames of the selected episodes (``len(ds)``)."""
        return len(self._positions)

    @property
    def num_episodes(self) -> int:
        """``len(episodes)`` when a selection is given (as LeRobot counts it), else every episode."""
        return len(self.episodes) if self.episodes is not None else self.stream.catalog.num_episodes

    @property
    def absolute_to_relative_idx(self):
        """LeRobot's map from a sample's absolute ``index`` to its position, or None where they
        are equal (a mapping computed on lookup, not a dict of every frame)."""
        return self._absolute

    @property
    def meta(self) -> PackedMeta:
        """``PackedDataset.meta`` (``LeRobotDatasetMetadata``'s attributes) with ``episodes``:
        each episode index's ``[dataset_from_index, dataset_to_index)``, what LeRobot's sampler
        reads (mixture positions for a mixture)."""
        if self._meta is None:
            meta = self.stream.meta
            catalog = self.stream.catalog
            if self.is_mixture:
                starts = self._positions.starts
                count = len(starts) - 1
                meta.episodes = EpisodeBounds(np.arange(count), starts[:-1], starts[1:], np.diff(starts))
            else:
                meta.episodes = EpisodeBounds.dense(catalog.episode_index, catalog.from_index, catalog.length)
            self._meta = meta
        return self._meta

    @property
    def camera_keys(self) -> list[str]:
        """Camera keys (videos and pictures) of the pack, or every camera of a mixture: the
        frames ``BatchLoader`` copies into its ring."""
        stream = self.stream
        return list(stream.camera_keys) if isinstance(stream, PackedDataset) else list(stream.cameras)

    @property
    def fps(self) -> float | None:
        return self.meta.fps

    @property
    def features(self) -> dict[str, dict]:
        return self.meta.features

    @property
    def repo_id(self) -> str:
        return self.meta.repo_id

    @property
    def delta_timestamps(self) -> dict | None:
        return self.stream.delta_timestamps if isinstance(self.stream, PackedDataset) else None

    @property
    def image_transforms(self) -> Callable | None:
        return self.stream.options.image_transforms

    @property
    def tolerance_s(self) -> float | None:
        return self.stream.tolerance_s

    def set_image_transforms(self, image_transforms: Callable | None) -> None:
        """Replace the transforms applied to each camera (None: none), as LeRobot's reader does.

        Raises:
            TypeError: not callable.
        """
        if image_transforms is not None and not callable(image_transforms):
            raise TypeError(f"image_transforms must be callable, got {type(image_transforms).__name__}")
        self.stream.options = replace(self.stream.options, image_transforms=image_transforms)
        self._engine = None  # its builders took the old transforms

    def clear_image_transforms(self) -> None:
        self.set_image_transforms(None)

    def __getitem__(self, index: int | slice) -> Any:
        """The sample at position ``index`` (negative from the end; a slice gives a list), exactly
        ``LeRobotDataset(...)[index]``'s.

        Raises:
            IndexError: outside ``[-len, len)``.
            IntegrityError, EpisodeDataError, StorageError, DecodeError: damage or a failed read,
                naming the file, shard and episode.
        """
        if isinstance(index, slice):
            return self.__getitems__(list(range(*index.indices(len(self)))))
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict]:
        """The samples at ``indices``, in their order (what a DataLoader asks for a batch): each
        episode touched read once (one request for its rows' span, one for its members), its
        frames decoded in order, at most the cache's bounds held at once."""
        positions = self._positions.normalized(indices)
        episode, offset = self._positions.locate(positions)
        catalog = self.stream.catalog
        frames = np.array([catalog.anchor_frames(int(e), np.array([o]))[0] for e, o in zip(episode, offset)], np.int64)
        return self._random_access().samples(episode, frames)

    def sample_weights(self, dataset_weights: Sequence[float]) -> torch.Tensor:
        """A weight per position for ``torch.utils.data.WeightedRandomSampler``: each dataset of a
        mixture drawn in proportion to ``dataset_weights`` (one per dataset), its frames equally.

        Raises:
            ArgumentError: not one non-negative weight per dataset, or none positive.
        """
        catalog = self.stream.catalog
        weights = np.asarray(dataset_weights, dtype=np.float64)
        if weights.shape != (len(catalog.datasets),) or (weights < 0).any() or not weights.sum() > 0:
            raise ArgumentError(
                f"need one weight >= 0 per dataset ({len(catalog.datasets)}), some positive; got {dataset_weights}"
            )
        frames = np.array([catalog.anchor_counts[a:b].sum() for a, b in map(catalog.episode_range, range(len(catalog.datasets)))])
        per_frame = np.divide(weights, frames, out=np.zeros_like(weights), where=frames > 0)
        dataset_of_episode = catalog.dataset.astype(np.int64)
        return torch.from_numpy(np.repeat(per_frame[dataset_of_episode], catalog.anchor_counts))

    # -- the engine ----------------------------------------------------------------------------
    def _random_access(self) -> RandomAccess:
        """This process's engine (made on first use, and anew in a forked worker)."""
        stream = self.stream
        self._engine = RandomAccess.owned(
            self._engine,
            lambda: RandomAccess(
                stream._view(),
                bounds=CacheBounds(stream.options.episode_pool_size, stream.options.open_bytes),
                finish=stream._finish,
                stats=stream._stats,
            ),
        )
        return self._engine

    def stats(self) -> dict[str, int | float | str]:
        """Reader counters, as ``PackedDataset.stats()`` (summed over DataLoader workers started
        from this process; ``max_open_*`` are the random-access cache's peaks)."""
        return self.stream.stats()

    def __getstate__(self) -> dict:
        # Nothing open crosses to another process: the engine (episodes, decoders, threads) is made
        # again there on first use.
        state = dict(self.__dict__)
        state["_engine"] = None
        return state

    def __repr__(self) -> str:
        catalog = self.stream.catalog
        what = f"mixture of {len(catalog.datasets)} datasets" if self.is_mixture else "pack"
        return (
            f"PackedLeRobotDataset({self.root}: {what}, {self.num_episodes} episodes, {self.num_frames} frames, "
            f"cameras {sorted({k for d in catalog.datasets for k in d.video_keys})})"
        )


__all__ = ["PackedLeRobotDataset"]
