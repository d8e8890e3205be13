"""The decode backends table: which backend decodes on which device, and what ``auto`` picks.

| name | device | module |
|---|---|---|
| ``nvdec`` | CUDA | ``nvdec``: PyNvVideoCodec's core decoder fed an elementary stream (the default on CUDA) |
| ``torchcodec`` | CUDA | ``torchcodec_cuda``: a CUDA build of torchcodec |
| ``torchcodec`` | CPU | ``torchcodec``: LeRobot's decoder (the default on the CPU) |
| ``pyav`` | CPU | ``pyav``: FFmpeg through PyAV, bit-identical to torchcodec |
"""

from __future__ import annotations

from lerobot_shards.core.errors import ArgumentError
from lerobot_shards.reader.decode.backends.base import DecodeBackend
from lerobot_shards.reader.decode.backends.nvdec import NvdecBackend
from lerobot_shards.reader.decode.backends.pyav import PyAVBackend
from lerobot_shards.reader.decode.backends.torchcodec import TorchCodecBackend
from lerobot_shards.reader.decode.backends.torchcodec_cuda import TorchCodecCudaBackend

BACKENDS: dict[tuple[str, str], type[DecodeBackend]] = {
    ("nvdec", "cuda"): NvdecBackend,
    ("torchcodec", "cuda"): TorchCodecCudaBackend,
    ("torchcodec", "cpu"): TorchCodecBackend,
    ("pyav", "cpu"): PyAVBackend,
}
# What "auto" tries, in order, per device type: the first that can run here.
AUTO: dict[str, tuple[str, ...]] = {"cuda": ("nvdec",), "cpu": ("torchcodec", "pyav")}


def backend_names() -> tuple[str, ...]:
    """Every name a backend may be asked by: ``"auto"`` and the table's names (read from the
    table each time, so a row added to it is a name at once)."""
    return ("auto", *sorted({name for name, _ in BACKENDS}))


def _on(device_type: str) -> str:
    return "a CUDA device" if device_type == "cuda" else "the CPU"


def backend_class(name: str, device_type: str) -> type[DecodeBackend]:
    """The backend class ``name`` names for ``device_type`` (``"cpu"`` or ``"cuda"``); for
    ``"auto"`` the first of ``AUTO[device_type]`` that can run here, else the last of them
    (whose ``unavailable()`` then says why).

    Raises:
        ValueError: a name not in the table (the allowed names listed), or one that decodes on
            another kind of device (which ones it does, and what decodes on this one).
    """
    names = backend_names()
    if name not in names:
        raise ArgumentError(f"backend {name!r} is not one of {', '.join(repr(n) for n in names)}")
    if device_type not in AUTO:
        raise ArgumentError(f"device type {device_type!r}: decode backends run on {', '.join(sorted(AUTO))}")
    if name == "auto":
        candidates = [BACKENDS[(n, device_type)] for n in AUTO[device_type]]
        return next((c for c in candidates if c.unavailable() is None), candidates[-1])
    found = BACKENDS.get((name, device_type))
    if found is None:
        where = sorted(d for n, d in BACKENDS if n == name)
        here = sorted(n for n, d in BACKENDS if d == device_type)
        raise ArgumentError(
            f"backend {name!r} decodes on {' or '.join(_on(d) for d in where)}, not {_on(device_type)}; "
            f"on {_on(device_type)} use {' or '.join(repr(n) for n in here)}"
            + (f", or device='cpu' for {name!r}" if "cpu" in where else "")
        )
    return found


__all__ = ["AUTO", "BACKENDS", "backend_class", "backend_names"]
