"""Decode backends, chosen by name from one table (``table.BACKENDS``).

Each backend is one module behind ``base.DecodeBackend`` (probe with ``unavailable``,
``open`` a member, ``decode`` a batch's jobs). ``DecodeStage`` looks backends up in the
table and nowhere else: a new one (DALI, say) is a module and a row of ``BACKENDS``; a CPU
decoder subclasses ``CpuDecoderBackend`` and says how a member's decoder is made
(``tests/exercises/whole_member_decoder.py`` is the template).
"""

from lerobot_shards.core.exports import lazy_exports

_EXPORTS = {
    "lerobot_shards.reader.decode.backends.table": ["AUTO", "BACKENDS", "backend_class", "backend_names"],
    "lerobot_shards.reader.decode.backends.base": ["DecodeBackend", "Job", "Opened", "write_rows"],
    "lerobot_shards.reader.decode.backends.cpu": ["CpuDecoderBackend"],
    "lerobot_shards.reader.decode.backends.nvdec": ["NvdecBackend", "nvdec_unavailable"],
    "lerobot_shards.reader.decode.backends.pyav": ["PyAVBackend", "PyAVDecoder"],
    "lerobot_shards.reader.decode.backends.torchcodec": ["TorchCodecBackend", "TorchCodecDecoder"],
    "lerobot_shards.reader.decode.backends.torchcodec_cuda": ["TorchCodecCudaBackend"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
