"""A stdio MCP server's stdout with every JSON string cut at ``STRING_LIMIT`` bytes as it is read.

A server may answer with a 50 MB text. The SDK reads a whole line, parses it and holds the
result several times over before the tool output limit cuts it to what is recorded, so
the run's process would peak at many times the answer's size. ``_keeper.py`` (the process
between the run and a stdio server) passes the server's stdout through ``JsonLineCapper``
instead, a piece at a time: the structure of each line is kept, so it is still the JSON-RPC
message it was, but every string value longer than the limit keeps its first bytes and ends
in ``[... N more bytes of this text were cut as it was read from the MCP server]``. Only the
bytes of one piece are held at once, whatever the size of the line. ``cut_note`` finds that
ending again, so the tool's result can say at its head how much was cut.

Standard library only: the keeper runs isolated (``python -I -S``) and imports this by path.
"""

from __future__ import annotations

import re

__all__ = ["STRING_LIMIT", "JsonLineCapper", "cut_note"]

STRING_LIMIT = 1 << 20
"""Bytes of one JSON string an MCP message keeps (a result's text, a resource's contents)."""

_MARK = "[... {} more bytes of this text were cut as it was read from the MCP server]"
_MARKED = re.compile(r"\[\.\.\. (\d+) more bytes of this text were cut as it was read from the MCP server\]\Z")
_OUTSIDE = re.compile(rb'["\n]')
_INSIDE = re.compile(rb'["\\\n]')


def cut_note(text: str) -> tuple[str, int]:
    """(the text without a cut's ending, the bytes that were cut: 0 if none)."""
    found = _MARKED.search(text)
    if found is None:
        return text, 0
    return text[: found.start()], int(found.group(1))


class JsonLineCapper:
    """Cuts long JSON strings out of a stream of newline-delimited JSON, a piece at a time.

    A raw newline ends a line wherever it falls (JSON strings cannot hold one), so a line that
    is not JSON at all passes unchanged and cannot leave the capper inside a string. A cut
    never splits a UTF-8 character, an escape (``\\n``, ``\\u00e9``) or a surrogate pair.
    """

    def __init__(self, limit: int = STRING_LIMIT) -> None:
        self.limit = limit
        self._in_string = False
        self._escape = bytearray()  # an escape read in part (it began with a backslash)
        self._held = b""  # a high surrogate's escape, kept back until its pair is seen
        self._partial = b""  # the first bytes of a UTF-8 character whose rest is in the next piece
        self._kept = 0  # bytes of the current string written
        self._cut = 0  # bytes of the current string left out

    def feed(self, data: bytes) -> bytes:
        """The output for the next piece of input."""
        out = bytearray()
        i, n = 0, len(data)
        while i < n:
            if self._in_string:
                i = self._string(data, i, out)
                continue
            found = _OUTSIDE.search(data, i)
            if found is None:
                out += data[i:]
                break
            out += data[i : found.end()]
            i = found.end()
            if data[found.start()] == 0x22:  # '"'
                self._in_string, self._kept, self._cut = True, 0, 0
        return bytes(out)

    def _string(self, data: bytes, i: int, out: bytearray) -> int:
        """Go on through the current string from ``data[i]``; the index after what was used."""
        if self._escape:
            want = 6 if self._escape[1:2] == b"u" or (len(self._escape) == 1 and data[i : i + 1] == b"u") else 2
            take = max(0, min(want - len(self._escape), len(data) - i))
            self._escape += data[i : i + take]
            if len(self._escape) >= 2 and self._escape[1:2] == b"u" and len(self._escape) < 6:
                return i + take
            unit, self._escape = bytes(self._escape), bytearray()
            self._unit(unit, out)
            return i + take
        found = _INSIDE.search(data, i)
        stop = len(data) if found is None else found.start()
        plain, self._partial = self._partial + data[i:stop], b""
        if found is None:  # the piece ends in the text: a character cut in two waits for its rest
            plain, self._partial = _whole_characters(plain)
        if plain:
            self._release(out)
            self._whole(plain, out, plain=True)
        if found is None:
            return stop
        byte = data[stop]
        if byte == 0x5C:  # a backslash: an escape begins
            self._escape = bytearray(b"\\")
            return stop + 1
        self._release(out)
        if byte == 0x22 and self._cut:  # the string's end: say what was cut
            out += _MARK.format(self._cut).encode()
        out += data[stop : stop + 1]  # the closing quote, or a raw newline (not JSON: the line ends)
        self._in_string = False
        return stop + 1

    def _unit(self, escape: bytes, out: bytearray) -> None:
        """One whole escape; a surrogate pair goes out (or is cut) as one."""
        high = _surrogate(escape, 0xD800)
        if self._held and _surrogate(escape, 0xDC00):
            escape, self._held = self._held + escape, b""
        else:
            self._release(out)
            if high:
                self._held = escape
                return
        self._whole(escape, out, plain=False)

    def _release(self, out: bytearray) -> None:
        held, self._held = self._held, b""
        if held:
            self._whole(held, out, plain=False)

    def _whole(self, piece: bytes, out: bytearray, *, plain: bool) -> None:
        """Keep ``piece`` while the string has room; a plain run may be kept in part."""
        room = self.limit - self._kept
        if not self._cut and len(piece) <= room:
            out += piece
            self._kept += len(piece)
            return
        keep = room if plain and not self._cut else 0
        while keep > 0 and (piece[keep] & 0xC0) == 0x80:
            keep -= 1  # never half of a UTF-8 character
        out += piece[:keep]
        self._kept += keep
        self._cut += len(piece) - keep


def _whole_characters(data: bytes) -> tuple[bytes, bytes]:
    """(``data`` up to its last whole UTF-8 character, the bytes of an unfinished one after it)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # the last character's first byte
            size = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if 0xE0 <= byte < 0xF0 else 4 if byte >= 0xF0 else 1
            return (data[:-back], data[-back:]) if size > back else (data, b"")
    return data, b""


def _surrogate(escape: bytes, base: int) -> bool:
    """Whether ``escape`` is ``\\uXXXX`` in the surrogate range from ``base`` (0xD800 high, 0xDC00 low)."""
    if len(escape) != 6 or escape[1:2] != b"u":
        return False
    try:
        return base <= int(escape[2:], 16) < base + 0x400
    except ValueError:
        return False
