"""lerobot-shards: pack LeRobot v3 datasets into episode-aligned shards and stream them into
PyTorch. The one name to import::

    from lerobot_shards import PackedDataset, MixtureDataset, BatchLoader, DecodeStage, pack_dataset

Everything public of the two layers, by name: the reader (``reader``: datasets, loader, decode
stage, errors) and the packer (``packer``: packing, verify, inspect, mixtures, synthetic data).
The layers stay separate packages (the reader never imports the packer, and installs that only
read need nothing of the packer's dependencies); this package only names their public faces.
Lazy (PEP 562): importing it costs nothing until a name is used.
"""

import packer as _packer
import reader as _reader
from reader.exports import lazy_exports

_EXPORTS = {**_reader._EXPORTS, **_packer._EXPORTS}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
