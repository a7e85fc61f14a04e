"""What an MCP server prints outside JSON-RPC: its stderr, and stray lines on its stdout.

``StderrTail`` reads a server's stderr from a pipe (nothing touches the disk) a piece at a
time into its last lines, each kept to its first ``_LINE_LIMIT`` characters however long it
is; they explain, redacted, a server that did not start or died. A line a stdio server prints
on stdout that is not JSON-RPC (a library's debug print) is skipped by the SDK, which logs it
with its parser's whole traceback; ``install_noise_filter`` replaces that record by one
warning on the ``nb_durable.mcp`` logger naming the server (the ``Speaker`` its connection's
task entered) and what it printed.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import contextvars
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ...secrets import Redactor

__all__ = ["Speaker", "StderrTail", "Words", "install_noise_filter", "last_words"]

_STDERR_LINES = 40
_LINE_LIMIT = 1000  # characters kept of one stderr line
_NOISE_SHOWN = 3  # lines that are not JSON-RPC said per connection; the rest are counted

log = logging.getLogger("nb_durable.mcp")
_speaker: contextvars.ContextVar[Speaker | None] = contextvars.ContextVar("nb_durable_mcp_speaker", default=None)


@dataclass
class Speaker:
    """The server whose stdout the SDK's reader task reads (a context variable of that task)."""

    name: str
    redactor: Redactor
    noise: int = 0

    def enter(self) -> None:
        """Be the speaker of this task, and of the tasks it starts from now on."""
        _speaker.set(self)


class _NotJsonRpc(logging.Filter):
    """Turns the SDK's "Failed to parse JSONRPC message" record, traceback and all, into one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        speaker = _speaker.get()
        if speaker is None or not str(record.msg).startswith("Failed to parse JSONRPC message"):
            return True
        speaker.noise += 1
        if speaker.noise <= _NOISE_SHOWN:
            line = speaker.redactor.redact(_input_of(record.exc_info[1] if record.exc_info else None))
            shown = repr(line[:200]) + (f" (and {len(line) - 200} more characters)" if len(line) > 200 else "")
            log.warning("MCP server %r printed a line on stdout that is not JSON-RPC (skipped): %s", speaker.name, shown)
        elif speaker.noise == _NOISE_SHOWN + 1:
            log.warning("MCP server %r printed more lines that are not JSON-RPC; they are skipped unseen", speaker.name)
        return False


def _input_of(error: BaseException | None) -> str:
    """The line a pydantic ValidationError was about (its input), as text."""
    try:
        value = error.errors(include_url=False)[0].get("input")  # type: ignore[union-attr]
    except Exception:
        return "(a line the parser did not keep)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


_NOISE_FILTER = _NotJsonRpc()


def install_noise_filter() -> None:
    """Put the filter on the SDK's stdio logger (once)."""
    stdio_log = logging.getLogger("mcp.client.stdio")
    if _NOISE_FILTER not in stdio_log.filters:
        stdio_log.addFilter(_NOISE_FILTER)


class Words(Protocol):
    """What a server said outside MCP that explains a failure: a stdio server's stderr, an HTTP
    server's error status."""

    heading: ClassVar[str]

    def text(self, redactor: Redactor) -> str: ...

    def close(self) -> None: ...


class StderrTail:
    """A server's stderr, read from a pipe into its last lines (nothing touches the disk), a
    piece at a time: a line keeps its first ``_LINE_LIMIT`` characters, however long it is."""

    heading: ClassVar[str] = "its stderr ended with"

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self.lines: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self.count = 0
        self._reader = threading.Thread(target=self._read, args=(read_fd,), name="mcp-stderr", daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        line, dropped = "", 0
        with os.fdopen(fd, "rb", buffering=0) as f:
            while piece := f.read(1 << 16):
                *ended, rest = decoder.decode(piece).split("\n")
                for part in ended:
                    self._add(line + part, dropped + max(0, len(line) + len(part) - _LINE_LIMIT))
                    line, dropped = "", 0
                room = _LINE_LIMIT - len(line)
                line, dropped = line + rest[:room], dropped + max(0, len(rest) - room)
        if line or dropped:
            self._add(line, dropped)

    def _add(self, line: str, dropped: int) -> None:
        self.lines.append(line[:_LINE_LIMIT] + (f" [... {dropped:,} more characters of this line not kept]" if dropped else ""))
        self.count += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self, redactor: Redactor) -> str:
        """The last lines, once the server has stopped writing (a dying server's last words matter most)."""
        deadline = time.monotonic() + 1.0
        seen = -1
        while time.monotonic() < deadline and seen != self.count:
            seen = self.count
            time.sleep(0.1)
        return redactor.redact("\n".join(self.lines)[-2000:])


def last_words(said: Words | None, redactor: Redactor) -> str:
    """How an error about a server ends: what it said (its stderr's last lines), redacted, on lines
    of their own (the server's words as it wrote them, never mid-sentence), or nothing. Waits up to a
    second for a dying server to finish writing: call it off the loop that carries every server's calls."""
    tail = said.text(redactor) if said is not None else ""
    return f"\n{said.heading}:\n{tail.rstrip()}" if said is not None and tail.strip() else ""
