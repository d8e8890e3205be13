"""lerobot-shards reader: stream packed LeRobot datasets into PyTorch.

Never imports ``packer``; the packed format is defined in ``reader.format``.
"""

from reader.dataset import PackedDataset
from reader.mixture import MixtureDataset
from reader.format import FORMAT_VERSION, FormatError, Manifest, UnsupportedFormatVersionError
from reader.storage import ObjectNotFoundError, RetryPolicy, StorageError

__all__ = [
    "FORMAT_VERSION",
    "FormatError",
    "Manifest",
    "MixtureDataset",
    "ObjectNotFoundError",
    "PackedDataset",
    "RetryPolicy",
    "StorageError",
    "UnsupportedFormatVersionError",
]
