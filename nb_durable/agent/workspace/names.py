"""File names as the tools show them, and take them back.

File names that are not UTF-8 (the bytes ``caf`` 0xE9 ``.txt`` from a Latin-1 archive) come from
the OS as lone surrogates, which no log line or API request can carry. Tools show each byte that
is not UTF-8 as a backslash escape, ``caf\\xe9.txt`` (``shown_name``: Python's
``backslashreplace``), and take that form back as a path: an escape names the raw byte unless a
file with the literal backslash name exists.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["from_shown", "shown_name"]

_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")  # only bytes >= 0x80 are ever escaped


def shown_name(name: str | os.PathLike[str]) -> str:
    """A path as tools show it: UTF-8 text, each byte that is not UTF-8 as ``\\xNN``."""
    text = os.fspath(name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


def from_shown(root: Path, path: str) -> str:
    """The OS's name for a path a tool showed (escapes back to raw bytes), if it is not literal."""
    if "\\x" not in path or os.path.lexists(root / path):
        return path
    raw = _ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), path)  # surrogateescape form
    return os.fsdecode(os.fsencode(raw))
