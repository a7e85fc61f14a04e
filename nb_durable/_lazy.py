"""Names a package exports from its submodules, loaded on first use (PEP 562).

A package writes its public names once, as the re-exports of its ``if TYPE_CHECKING:`` block
(``from .core.log import EventLog as EventLog``), which is what type checkers read.
``exports`` reads the same block from the package's source to learn ``name -> submodule``,
and gives the package the module ``__getattr__`` and ``__dir__`` that import a submodule the
first time one of its names is asked for, so importing the package costs only what is used.
The block is read with string methods alone: no parser is imported to start the package.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["exports", "table_of"]


def table_of(source: str) -> dict[str, str]:
    """``name -> submodule`` (relative to the package) from the ``if TYPE_CHECKING:`` block of ``source``.

    The block holds only ``from .module import (name as name, ...)`` statements, one name a
    line or several on one line, as ruff formats them; anything else in it is a mistake.
    """
    table: dict[str, str] = {}
    lines = source.splitlines()
    start = lines.index("if TYPE_CHECKING:") + 1
    module = ""
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break  # the block ended
        text = line.strip().rstrip(",")
        if not text or text == ")":
            continue
        if text.startswith("from ."):
            module, _, names = text[len("from .") :].partition(" import ")
            text = names.strip("()")
            if not text:
                continue
        for alias in text.split(","):
            name, _, again = alias.strip().partition(" as ")
            if not name:
                continue
            if name != again or not module:
                raise ValueError(f"the TYPE_CHECKING block re-exports each name as itself: {line.strip()!r}")
            table[name] = module
    return table


def exports(package: str) -> tuple[dict[str, str], Callable[[str], Any], Callable[[], list[str]]]:
    """The table of ``package``'s lazily loaded names, its ``__getattr__`` and its ``__dir__``."""
    with open(sys.modules[package].__file__ or "", encoding="utf-8") as f:
        table = table_of(f.read())

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{module}", package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return table, __getattr__, __dir__
