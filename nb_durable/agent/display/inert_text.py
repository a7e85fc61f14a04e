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

__all__ = ["direction_controls", "html_text", "terminal_text"]

_DIRECTION = "\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_DIRECTION}]")
_DIRECTIONS = re.compile(f"[{_DIRECTION}]")
_SURROGATE = re.compile("[\udc80-\udcff]")  # surrogateescape's form of the bytes 0x80 to 0xFF


def terminal_text(text: str) -> str:
    """``text`` without the control characters a terminal or a renderer would obey (module docstring)."""
    return _SURROGATE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", _CONTROL.sub("", text))


def direction_controls(text: str) -> list[str]:
    """The direction overrides and isolates ``text`` holds, as ``U+202E`` (sorted, each once)."""
    return [f"U+{ord(c):04X}" for c in sorted(set(_DIRECTIONS.findall(text)))]


def html_text(text: str) -> str:
    """``text`` escaped for HTML, without the control characters ``terminal_text`` removes."""
    return html.escape(terminal_text(text))
