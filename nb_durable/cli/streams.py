"""Output whose reader went away (``nb-durable run ... 2>&1 | head``): written nowhere, not raised.

A command's output is for a person; the run it reports is recorded either way. Were a broken
pipe raised, it would surface inside a step's display and stop the run there, and the command
would still exit 0. So once a stream's reader is gone, the rest of its output goes to
``/dev/null`` and the command ends as it would have, with its run's exit code.
"""

from __future__ import annotations

import os
from typing import Any, TextIO

__all__ = ["ReaderGoneProof"]


class ReaderGoneProof:
    """A text stream that, once its reader has gone, writes nowhere instead of raising."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())
        finally:
            os.close(null)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
