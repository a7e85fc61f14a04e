"""Text from outside a run's code (a model, a tool, a server, a task) made inert where it is shown.

A terminal obeys escape sequences, and every renderer obeys Unicode's direction overrides and
isolates, which make a line read otherwise than it runs (a command shown reversed, a file's
extension moved). Both are removed from whatever nb_durable prints or draws; tabs and line
breaks stay. HTML is escaped after, so no text becomes markup. A byte that is not UTF-8 in a
file name (a lone surrogate, as Python holds it) is shown as ``\\xNN``, as the tools show it,
not as ``\\udcNN``.
"""

from __future__ import annotations

import html
import re

__all__ = ["direction_controls", "escaped_bytes", "html_text", "terminal_text"]

_DIRECTION = "\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_DIRECTION}]")
_DIRECTIONS = re.compile(f"[{_DIRECTION}]")
_LONE = re.compile("[\ud800-\udfff]")  # no UTF-8 holds one; 0xDC80-0xDCFF are surrogateescape's bytes


def escaped_bytes(text: str) -> str:
    """``text`` with each byte that is not UTF-8 (a lone surrogate, as Python holds it) as ``\\xNN``,
    as the tools show a file name (``workspace.names``); any other lone surrogate as ``\\udNNN``."""
    return _LONE.sub(_escaped, text)


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """``text`` without the control characters a terminal or a renderer would obey (module docstring)."""
    return escaped_bytes(_CONTROL.sub("", text))


def direction_controls(text: str) -> list[str]:
    """The direction overrides and isolates ``text`` holds, as ``U+202E`` (sorted, each once)."""
    return [f"U+{ord(c):04X}" for c in sorted(set(_DIRECTIONS.findall(text)))]


def html_text(text: str) -> str:
    """``text`` escaped for HTML, without the control characters ``terminal_text`` removes."""
    return html.escape(terminal_text(text))
