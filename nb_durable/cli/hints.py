"""The commands a message tells a person to type next, spelt so they work as printed.

A hint names the store the command was given (``--store``), quoted for a shell, so a hint
copied from a command that used another store than the default acts on the same runs. No
message prints a store's password (``shown_store``), so a hint whose store lost its
password says how to give it (``password_left_out``, re-exported here: its wording is the
store's, one for every front end): as printed, its command could not log in.
"""

from __future__ import annotations

import argparse

from ..agent.display.words import in_words_of, store_flag
from ..core.stores import password_left_out

__all__ = ["command_store", "in_cli_words", "password_left_out", "written_store"]


def command_store(store: str | None) -> str:
    """`` --store STORE`` for a hint when a store was given, else '' (the default store); a
    message using it ends with ``password_left_out(store)``."""
    return store_flag(store)


def in_cli_words(message: str, store: str | None, written: str = "--store") -> str:
    """A package message in the terminal's words, its commands about a run (show, resume, fork)
    naming the store the command was given, and saying so if their store lost its password;
    ``written``: how the command names the store it writes (``written_store``)."""
    said = in_words_of("cli", message, store, written)
    # Any command naming that store, the package's own (list_runs(URL) said as nb-durable runs
    # --store URL) too: that one named it without its password, unsaid.
    names_it = said != in_words_of("cli", message, written=written) or (bool(store) and store_flag(store) in said)
    note = password_left_out(store)
    return said + note if names_it and note not in said else said


def written_store(args: argparse.Namespace) -> str:
    """How a command names the store it writes: ``--store``, but copy's destination and fork's ``--to``."""
    if args.command == "copy":
        return "the destination"
    return "--to" if args.command == "fork" and args.to else "--store"
