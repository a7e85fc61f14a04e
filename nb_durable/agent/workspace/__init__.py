"""The workspace a run works in: confined file operations, and commands that end when they do.

``files`` resolves every tool path inside the workspace before anything is touched and holds
the file operations of the built-in tools, used through the folder handles of ``handles``,
with names shown and taken back as ``names`` says; ``bash`` runs commands under ``_supervisor``,
a standard-library program that owns the command's whole process tree and kills it on a
timeout, on an interrupt and when this process dies.
"""

from __future__ import annotations

from .bash import CommandResult, run_command
from .files import list_entries, read_text, resolve_in_workspace, write_text

__all__ = ["CommandResult", "list_entries", "read_text", "resolve_in_workspace", "run_command", "write_text"]
