"""Public faces that import lazily (PEP 562): ``from lerobot_shards import PackedDataset`` loads only
what that name needs, so ``import lerobot_shards.core.format`` (or ``lerobot_shards.packer``) never pulls in torch."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, modules: dict[str, list[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose public names live in other modules:
    ``modules`` maps each module to the names it provides."""
    exports = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__
