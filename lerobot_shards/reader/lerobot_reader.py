"""The reader LeRobot's ``storage_format`` registry loads for packs.

On LeRobot main (not in a release yet: 0.6.1 has no registry), ``LeRobotDataset(repo_id,
root=PACK)`` reads ``PACK/meta/info.json``, finds ``"storage_format": "lerobot_shards"`` (every
pack written since 2026-12-06 says it) and asks its registry for that format's module: this one,
found through the entry point ``lerobot.dataset_readers`` this package declares (LeRobot PR
#4576), or registered by hand with ``register()`` (``register_dataset_reader``, PR #4541). The
module exposes what the registry contract asks for (PRs #4363, #4541, #4576, #4549):

- ``DATASET_READER``: built with the keywords ``meta, root, episodes, delta_timestamps,
  image_transforms, tolerance_s, revision, return_uint8, depth_output_unit, token``; it has
  ``episodes``, ``num_frames``, ``num_episodes``, ``absolute_to_relative_idx``, ``get_item(idx)``
  and ``get_items(indices)`` (``LeRobotDataset.__getitems__``), returns fully assembled items
  (windows, ``*_is_pad``, decoded frames, ``task``) for relative indices, and pickles into
  DataLoader workers with nothing open;
- ``localize_root(repo_id, root, revision, token=..., force_cache_sync=...)``: for a pack in a
  bucket (or on the Hub as a URL), the local folder holding its ``meta/`` (LeRobot reads its
  metadata there); ``FileNotFoundError`` where the root holds no pack, so LeRobot asks the next
  format.

Items are ``PackedLeRobotDataset``'s, the same as ``LeRobotDataset``'s on the source. The reader
uses the pack's own verified index, not the ``meta`` LeRobot built (which it keeps, for callers).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lerobot_shards.core.errors import LeRobotShardsError, NotAPackError, ObjectNotFoundError
from lerobot_shards.core.format import INFO_PATH, STORAGE_FORMAT, Manifest
from lerobot_shards.core.format.lerobot_info import is_lerobot_view, lerobot_view, parse_lerobot_info
from lerobot_shards.core.pack.packed_index import read_manifest, verified_read
from lerobot_shards.core.storage import Storage
from lerobot_shards.reader.map_dataset import PackedLeRobotDataset


def _lerobot_base() -> type:
    """LeRobot's ``BaseDatasetReader`` where the installed LeRobot has the registry, so
    ``isinstance`` checks hold; a plain base otherwise (this module never needs LeRobot)."""
    try:
        from lerobot.datasets.dataset_reader import (  # pyright: ignore[reportMissingImports]  # LeRobot is optional
            BaseDatasetReader,
        )
    except ImportError:
        return object
    return BaseDatasetReader


class ShardsDatasetReader(_lerobot_base()):  # pyright: ignore[reportGeneralTypeIssues]  # the base is LeRobot's when present
    """LeRobot's dataset reader over a pack (see the module docstring).

    Args:
        meta: the ``LeRobotDatasetMetadata`` LeRobot built from the pack's ``meta/`` (kept as
            ``self.meta``; items come from the pack's own checked index).
        root: the pack's root: a path, or a URL (``s3://``, ``hf://``); None for a Hub repo
            id, read as ``hf://datasets/<meta.repo_id>`` at ``revision``.
        episodes, delta_timestamps, image_transforms, tolerance_s, return_uint8,
            depth_output_unit: as ``LeRobotDataset``'s.
        revision: the Hub revision (branch, tag or commit) when ``root`` is None.
        token: the Hub token, for ``hf://`` roots.
        **options: ``ReadOptions`` fields (``storage_options``, ``episode_pool_size``, ...);
            keywords a later LeRobot passes that this reader does not use
            (``video_decoder_cache_size``: the cache here is bounded by ``episode_pool_size``
            and ``open_bytes``) are accepted and ignored.
    """

    def __init__(
        self,
        meta: Any = None,
        root: str | os.PathLike | None = None,
        episodes: Sequence[int] | None = None,
        delta_timestamps: dict[str, list[float]] | None = None,
        image_transforms: Callable | None = None,
        tolerance_s: float | None = None,
        revision: str | None = None,
        return_uint8: bool = False,
        depth_output_unit: str = "mm",
        token: str | bool | None = None,
        video_decoder_cache_size: int | None = None,
        **options: Any,
    ):
        del video_decoder_cache_size  # bounded by episode_pool_size and open_bytes instead
        self.meta = meta
        self.root = _data_root(root, meta, revision)
        storage_options = dict(options.pop("storage_options", None) or {})
        if token not in (None, False) and self.root.startswith("hf://"):
            storage_options.setdefault("token", token)
        self._dataset = PackedLeRobotDataset(
            self.root,
            episodes=episodes,
            delta_timestamps=delta_timestamps,
            image_transforms=image_transforms,
            tolerance_s=tolerance_s,
            return_uint8=return_uint8,
            depth_output_unit=depth_output_unit,
            storage_options=storage_options or None,
            **options,
        )
        self.episodes = self._dataset.episodes
        # LeRobot's own reader keeps it under this name (its tokenizer script reads it).
        self._absolute_to_relative_idx = self._dataset.absolute_to_relative_idx

    @property
    def dataset(self) -> PackedLeRobotDataset:
        """The map-style dataset this reader serves."""
        return self._dataset

    @property
    def num_frames(self) -> int:
        return self._dataset.num_frames

    @property
    def num_episodes(self) -> int:
        return self._dataset.num_episodes

    @property
    def absolute_to_relative_idx(self):
        return self._dataset.absolute_to_relative_idx

    def __len__(self) -> int:
        return self._dataset.num_frames

    def get_item(self, idx: int) -> dict:
        """The item at relative index ``idx``, as ``LeRobotDataset.__getitem__`` gives it."""
        return self._dataset[idx]

    def get_items(self, indices: list[int]) -> list[dict]:
        """The items at ``indices``, in order (``LeRobotDataset.__getitems__``): each episode
        touched is read once and its frames decoded in order."""
        return self._dataset.__getitems__(indices)

    def set_image_transforms(self, image_transforms: Callable | None) -> None:
        """Raises: TypeError: not callable."""
        self._dataset.set_image_transforms(image_transforms)

    def clear_image_transforms(self) -> None:
        self._dataset.clear_image_transforms()


DATASET_READER = ShardsDatasetReader


def _data_root(root: str | os.PathLike | None, meta: Any, revision: str | None) -> str:
    if root is not None:
        return str(root)
    repo_id = getattr(meta, "repo_id", None)
    if not repo_id:
        raise NotAPackError("the pack's root is unknown: give LeRobotDataset a root (a folder or URL) or a repo_id")
    return f"hf://datasets/{repo_id}" + (f"@{revision}" if revision else "")


def localize_root(
    repo_id: str | None,
    root: str | os.PathLike,
    revision: str | None = None,
    token: str | bool | None = None,
    force_cache_sync: bool = False,
) -> Path:
    """The local folder holding the ``meta/`` of the pack at ``root`` (a URL), as LeRobot's
    registry asks of a format before it reads a dataset's metadata: the pack's ``meta/`` files,
    each checked against its manifest's digest, copied once into the cache
    (``~/.cache/lerobot-shards/lerobot-meta/<digest>``, under ``LEROBOT_SHARDS_CACHE`` if set) and
    kept while the manifest is the same. A pack made before packs said their storage format
    gets an ``info.json`` that says it (and its features as packed), so LeRobot routes here.

    Raises:
        FileNotFoundError: no pack at ``root`` (LeRobot then asks its other formats).
    """
    del repo_id  # the pack names itself
    url = str(root) + (f"@{revision}" if revision and str(root).startswith("hf://") and "@" not in str(root) else "")
    options = {"token": token} if token not in (None, False) and url.startswith("hf://") else None
    storage = Storage(url, options)
    try:
        manifest, pin = read_manifest(storage)
    except (ObjectNotFoundError, NotAPackError) as err:
        raise FileNotFoundError(f"{url}: not a lerobot-shards pack ({err})") from None
    folder = _cache_dir() / pin.removeprefix("sha256:")
    if force_cache_sync and folder.exists():
        shutil.rmtree(folder)
    if not (folder / INFO_PATH).is_file():
        _write_meta(storage, manifest, folder)
    return folder


def _cache_dir() -> Path:
    base = os.environ.get("LEROBOT_SHARDS_CACHE") or str(Path.home() / ".cache" / "lerobot-shards")
    return Path(base) / "lerobot-meta"


def _write_meta(storage: Storage, manifest: Manifest, folder: Path) -> None:
    """Copy the pack's ``meta/`` files (digest-checked) into ``folder``, whole or not at all
    (written beside it, then renamed)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=folder.parent))
    try:
        for rel in sorted(r for r in manifest.files if r.startswith("meta/")):
            data = verified_read(storage, manifest, rel)
            if rel == INFO_PATH:
                data = _said_storage_format(data, manifest, where=storage.describe(rel))
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            staging.rename(folder)
        except OSError:  # another process localized it first: theirs is the same bytes
            if not (folder / INFO_PATH).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _said_storage_format(data: bytes, manifest: Manifest, *, where: str) -> bytes:
    """``info.json`` as a pack writes it today: packs before 2026-12-06 copied their source's."""
    info = parse_lerobot_info(data, where=where)
    return data if is_lerobot_view(info.raw) else lerobot_view(info.raw, manifest.features.to_json())


def register() -> bool:
    """Register this module with an installed LeRobot's reader registry
    (``register_dataset_reader("lerobot_shards", ...)``), for a LeRobot that has the registry but
    does not read entry points. Returns whether it had a registry to register with.

    Raises:
        LeRobotShardsError: another module is registered under ``lerobot_shards``.
    """
    try:
        from lerobot.datasets import register_dataset_reader  # pyright: ignore[reportMissingImports]  # LeRobot is optional
    except ImportError:
        return False
    try:
        register_dataset_reader(STORAGE_FORMAT, __name__)
    except ValueError as err:
        raise LeRobotShardsError(f"LeRobot's reader registry: {err}") from None
    return True


__all__ = ["DATASET_READER", "STORAGE_FORMAT", "ShardsDatasetReader", "localize_root", "register"]
