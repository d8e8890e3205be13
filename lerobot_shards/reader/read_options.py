"""``ReadOptions``: how a ``PackedDataset`` or ``MixtureDataset`` reads, as one value.

Both datasets take it whole (``options=ReadOptions(...)``) or its fields as keywords
(``PackedDataset(root, seed=3)``); it travels unchanged from the call to the consumer that
uses it, and ``lerobot-shards train``'s ``--shards.*`` flags are its fields. Each option's
name, type, default and help is written once, below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.core.format.fields import check_pin
from lerobot_shards.core.option_fields import check_values, describe_options, option
from lerobot_shards.core.storage import RetryPolicy

DepthUnit = Literal["mm", "m"]


def decoder_names() -> tuple[str, ...]:
    """The ``decoder`` choices: ``"auto"`` and the CPU rows of the decode backends table (read
    when asked: the table imports torch, which ``ReadOptions`` itself does not need)."""
    from lerobot_shards.reader.decode.frames import cpu_decoder_names

    return cpu_decoder_names()


@describe_options
@dataclass(frozen=True)
class ReadOptions:
    """How a packed dataset or a mixture reads: order, pool, frames, fetch, storage, pin.

    Raises (from the constructor):
        ArgumentError: a value out of range, or options that do not go together (names them).
    """

    # -- order and split
    shuffle: bool = option(
        True,
        help=(
            "Shuffle episodes per epoch and draw anchors at random from the pool. False: each consumer yields its "
            "contiguous block of anchors in index order (consumers are ranks x workers, rank-major)."
        ),
    )
    seed: int = option(0, help="Base seed: the order is a pure function of (seed, epoch, world size, workers).")
    episode_pool_size: int = option(
        16,
        minimum=1,
        help="Whole episodes each consumer keeps open and draws from (random access: the most recently used it keeps).",
    )
    rank: int | None = option(None, flag=False, help="This rank (default: torch.distributed, else RANK, else 0).")
    world_size: int | None = option(None, flag=False, help="Ranks (default: torch.distributed, else WORLD_SIZE, else 1).")
    # -- frames
    return_uint8: bool = option(False, help="Frames as uint8 (C, H, W) instead of float32 in [0, 1].")
    image_transforms: Callable | None = option(None, flag=False, help="Applied to each camera tensor, as LeRobot does.")
    tolerance_s: float | None = option(None, minimum=0, help="Window tolerance in seconds (default: each pack's own).")
    decoder: str = option(
        "auto",
        choices=decoder_names,
        help=("CPU decoder, a CPU row of the decode backends table: auto (torchcodec, else PyAV), torchcodec or pyav."),
    )
    depth_unit: DepthUnit = option(
        "mm",
        help=(
            "Unit of depth maps (cameras whose feature says is_depth_map): mm or m, as LeRobotDataset's "
            "depth_output_unit. Depth is float32 whatever return_uint8 says, as LeRobot returns it."
        ),
    )
    decode_threads: int | None = option(
        None,
        minimum=1,
        help=(
            "Threads decoding at once, per consumer: a sample's cameras side by side, and with threads left over "
            "(fewer cameras than threads) the next samples beside it, handed on in draw order. None: the cores this "
            "process may use divided among the DataLoader workers and the node's ranks (LOCAL_WORLD_SIZE), at least 1. "
            "Same samples either way."
        ),
    )
    decode_device: str | None = option(
        None,
        help=(
            "None decodes in the workers. cuda/cpu: workers ship compressed members and frame indices, which "
            "BatchLoader decodes with DecodeStage(device) (its own, or decode_stage=): NVDEC for hevc/h264 packs."
        ),
    )
    # -- fetch
    prefetch_episodes: int = option(4, minimum=0, help="Episodes fetched ahead of need per consumer (background threads).")
    prefetch_bytes: int | None = option(
        256 * 1024 * 1024, minimum=0, help=("Cap on fetched-but-not-yet-used video bytes per consumer (None: no cap).")
    )
    fetch_threads: int = option(
        2,
        minimum=1,
        help=(
            "Episodes fetched at once per consumer. 2 keeps a local disk or a nearby bucket busy; raise it for a "
            "distant bucket when episodes rotate faster than they arrive."
        ),
    )
    open_bytes: int = option(
        512 * 1024 * 1024,
        minimum=0,
        help=(
            "Random access (ds[i], a sampler's batches): bytes of the episodes a process keeps open between batches "
            "(their members and rows, least recently used dropped first; their decoders go with them), beside at most "
            "episode_pool_size episodes. A batch touching more is read in runs that fit."
        ),
    )
    cache_dir: str | None = option(None, help="Local disk cache of fetched episode bytes, shared by workers (None: none).")
    cache_limit_gb: float | None = option(None, minimum=0, help="The disk cache's cap, LRU-evicted (None: 50 GB).")
    # -- storage and pin
    storage_options: dict | None = option(None, help='fsspec options for bucket roots (JSON), e.g. {"endpoint_url": ...}.')
    retry: RetryPolicy = option(RetryPolicy(), flag=False, help="How long a storage read may take before it raises.")
    manifest_sha256: str | None = option(
        None,
        help=(
            "Pin what is read: sha256:<hex> of the pack's manifest.json (or of mixture.json), as `lerobot-shards info` "
            "prints it. Every other byte is checked against digests it records, so every sample is the packed one "
            "or an error."
        ),
    )

    def __post_init__(self) -> None:
        check_values(self)  # choices, ranges and types, as each field declares them
        if self.manifest_sha256 is not None:
            object.__setattr__(self, "manifest_sha256", check_pin(self.manifest_sha256))
        if self.decode_device is not None and (not isinstance(self.decode_device, str) or not self.decode_device.strip()):
            raise ArgumentError(
                f"decode_device must be None (decode in the workers) or a device such as 'cuda', got {self.decode_device!r}"
            )
        if self.decode_device is not None and self.image_transforms is not None:
            raise ArgumentError("image_transforms run on decoded frames: apply them after DecodeStage when decode_device is set")

    @property
    def cache_limit_bytes(self) -> int:
        """The disk cache's cap in bytes (50 GB unless ``cache_limit_gb`` says otherwise)."""
        return int((self.cache_limit_gb if self.cache_limit_gb is not None else 50) * 1e9)

    @property
    def encoded_video(self) -> bool:
        """Whether workers ship compressed members for a ``DecodeStage`` (``decode_device`` set)."""
        return self.decode_device is not None


__all__ = ["DepthUnit", "ReadOptions", "decoder_names"]
