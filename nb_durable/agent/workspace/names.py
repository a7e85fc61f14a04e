"""File names as the tools show them, and take them back.

File names that are not UTF-8 (the bytes ``caf`` 0xE9 ``.txt`` from a Latin-1 archive) come from
the OS as lone surrogates, which no log line or API request can carry. Tools show each byte that
is not UTF-8 as a backslash escape, ``caf\\xe9.txt`` (``shown_name``, by the rule every shown
text follows: ``display.inert_text.escaped_bytes``), and take that form back as a path: an
escape names the raw byte unless a file with the literal backslash name exists. Control
characters are shown the same way (``a\\x0ab.txt`` for a name with a line break): shown as they
are, a line break split one entry of list_dir into two that do not exist, which the model could
neither tell apart nor open.
A run records its workspace folder in the same form (``folder_of_shown`` takes it back), so a
folder whose name is not UTF-8 can be worked in.

Names and paths past the file system's limits are refused with them (``not_too_long``).

A command a tool suggests (``sed -n '201,400p' NAME``) names the file as one bash word
(``shell_word``): a name is data from the workspace, and ``a;rm -rf .`` pasted as it is would
be two commands.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from ...errors import ToolError
from ..display.inert_text import escaped_bytes

__all__ = ["folder_of_shown", "from_shown", "limit", "not_too_long", "shell_word", "shown_name"]

# Only control characters (no NUL: no name holds one) and bytes >= 0x80 are ever escaped.
_ESCAPED_BYTE = re.compile(r"\\x(0[1-9a-fA-F]|1[0-9a-fA-F]|7[fF]|[89a-fA-F][0-9a-fA-F])")
_CONTROL = re.compile("[\x01-\x1f\x7f]")


def shown_name(name: str | os.PathLike[str]) -> str:
    """A path as tools show it: UTF-8 text, each control character or byte that is not UTF-8 as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", escaped_bytes(os.fspath(name)))


def folder_of_shown(text: str) -> Path:
    """The folder a run recorded as ``shown_name`` of its absolute path (see ``from_shown``)."""
    return Path(from_shown(Path(os.sep), text))


def from_shown(root: Path, path: str) -> str:
    """The OS's name for a path a tool showed (escapes back to raw bytes), if it is not literal."""
    if "\\x" not in path or os.path.lexists(root / path):
        return path
    raw = _ESCAPED_BYTE.sub(_raw, path)
    return os.fsdecode(os.fsencode(raw))


def _raw(m: re.Match[str]) -> str:
    byte = int(m.group(1), 16)
    return chr(0xDC00 + byte) if byte >= 0x80 else chr(byte)  # a byte >= 0x80 in surrogateescape form


def shell_word(name: str | os.PathLike[str]) -> str:
    """A relative path as the OS has it, as one bash word naming it (never an option)."""
    text = os.fspath(name)
    if text.startswith("-"):
        text = os.path.join(os.curdir, text)
    if shown_name(text) == text:
        return shlex.quote(text)
    # Bash's $'...' spells any byte; a name with control characters or bytes that are not UTF-8 needs it.
    return "$'" + "".join(_ansi_c(b) for b in os.fsencode(text)) + "'"


def _ansi_c(b: int) -> str:
    if 0x20 <= b < 0x7F:
        return "\\" + chr(b) if chr(b) in "\\'" else chr(b)
    return f"\\x{b:02x}"


_USUAL = {"PC_NAME_MAX": 255, "PC_PATH_MAX": 4096}


def not_too_long(root: Path, target: Path, path: str) -> None:
    """Refuse ``target`` (``path`` as given) if a name or the whole path is past the file system's limits."""
    name_max = limit(root, "PC_NAME_MAX")
    path_max = limit(root, "PC_PATH_MAX")
    longest = max((len(os.fsencode(part)) for part in target.parts), default=0)
    if longest > name_max or len(os.fsencode(target)) >= path_max:
        shown = shown_name(path)
        raise ToolError(
            f"{shown[:80]!r}{'...' if len(shown) > 80 else ''} is too long a path for this file system (names of at most {name_max} "
            f"bytes, whole paths under {path_max} bytes, the workspace's {len(os.fsencode(root))} included); "
            "use shorter names"
        )


def limit(folder: Path | int, name: str) -> int:
    """The file system's ``PC_NAME_MAX`` or ``PC_PATH_MAX`` at ``folder`` (a path or a handle)."""
    try:
        return os.pathconf(folder, name)
    except (AttributeError, ValueError, OSError):
        return _USUAL[name]  # no pathconf (Windows)
