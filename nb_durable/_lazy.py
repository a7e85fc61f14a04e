"""Names a package exports from its submodules, loaded on first use (PEP 562).

A package lists ``name -> submodule`` once; ``exports`` gives it the module ``__getattr__``
and ``__dir__`` that import a submodule the first time one of its names is asked for, so
importing the package costs only what is used.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, for the names in ``table``."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
