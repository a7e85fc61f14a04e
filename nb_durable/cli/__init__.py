"""``nb-durable``, the command line: ``commands`` parses and runs them, ``inspecting`` reads runs, ``demos`` the offline demos.

Like the notebook, it makes one call into the agent per command, and maps every error to
its exit code from the error itself (``NbDurableError.exit_code``).
"""

from __future__ import annotations

from .commands import build_parser, main

__all__ = ["build_parser", "main"]
