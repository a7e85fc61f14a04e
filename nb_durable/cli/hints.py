"""The commands a message tells a person to type next, spelt so they work as printed.

A hint names the store the command was given (``--store``), quoted for a shell, so a hint
copied from a command that used another store than the default acts on the same runs.
"""

from __future__ import annotations

import shlex

__all__ = ["command_store"]


def command_store(store: str | None) -> str:
    """`` --store STORE`` for a hint when a store was given, else '' (the default store)."""
    return f" --store {shlex.quote(store)}" if store else ""
