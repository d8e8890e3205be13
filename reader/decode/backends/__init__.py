"""Decode backends, chosen by name from one table (``table.BACKENDS``).

Each backend is one module behind ``base.DecodeBackend`` (probe with ``unavailable``,
``open`` a member, ``decode`` a batch's jobs). ``DecodeStage`` looks backends up in the
table and nowhere else: a new one (DALI, say) is a module and a row of ``BACKENDS``.
"""

from reader.exports import lazy_exports

_EXPORTS = {
    "reader.decode.backends.table": ["AUTO", "BACKENDS", "backend_class", "backend_names"],
    "reader.decode.backends.base": ["DecodeBackend", "Job", "Opened", "write_rows"],
    "reader.decode.backends.nvdec": ["NvdecBackend", "nvdec_unavailable"],
    "reader.decode.backends.pyav": ["PyAVBackend"],
    "reader.decode.backends.torchcodec": ["TorchCodecBackend"],
    "reader.decode.backends.torchcodec_cuda": ["TorchCodecCudaBackend"],
}
__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
