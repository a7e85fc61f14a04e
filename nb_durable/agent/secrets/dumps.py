"""Hex dumps: the rows of ``xxd``, ``hexdump -C`` and ``od``, read back as the bytes they show.

A dump cuts a secret into rows of 16 bytes, each shown twice (two hex digits, and a
character of the ASCII column) between offsets, so no form of the value is in the text.
``dump_spans`` finds the lines shaped as a dump's rows, joins consecutive ones into the
bytes they show, has a finder search those bytes, and masks every row carrying a byte of a
match, both columns, keeping the row's offset and the rest of the dump::

    00000000: 6865 6c6c 6f20 776f 726c 642c 206d 7920  hello world, my
    00000010: [REDACTED:MY_TOKEN]
    00000020: [REDACTED:MY_TOKEN]

Rows recognised (offsets of 6 to 16 hex digits, or none where ``od -An`` drops them):
``xxd`` (any ``-g``, ``-u``), ``hexdump -C`` and ``od -t x1z`` (the ASCII column between
``|`` or ``>``/``<``), ``od -t x1`` and ``od -c``, and two-byte words in the machine's byte
order, so each pair of bytes shows swapped: hex (``hexdump`` with no options, ``hexdump -x``,
``od -x``, ``od -t x2``) and octal (``od`` with no options, ``od -o``, ``hexdump -o``); the
trailing odd byte such a dump shows as a word with a zero high byte is read with that zero.
From ``MIN_ROW_BYTES`` to ``MAX_ROW_BYTES`` bytes a row (``-c``, ``-w``); a row of a wider
line than its dialect prints is not read, but for a dump's only row, which ``xxd`` and
``hexdump`` pad to the width of the rows it does not have. An ASCII column must show exactly
its row's bytes; the other dialects have none, so ordinary text can be read as their rows (a
column of indented numbers), and that can only make more of a dump masked, never less: a
finder has to find a secret in what the rows show. Decimal numbers read as hex bytes spell
only digits, ``A``-``I``, ``P``-``Y`` and their lower case: of the credential formats only an
AWS key id (``ASIA`` and 16 more) could come out of twenty numbers in that exact order, but a
known value of digits does out of the codes of its digits in order (``31 32 ... 38`` in a
table of ``seq 10 99`` is ``12345678``).
Shorter rows are left out: each byte of a 1-byte row takes some 30 characters, and the held
back span grows with it. A ``*`` line (rows repeating the one above) is read through: the
last repeat is the row above it.

Finding the rows is one search for the lines any dialect may read (a search for each dialect
took three times as long on ordinary output, which has none); each such line is then read by
the first dialect that reads it.

Streaming: a match is masked as one span from its first row's start to its last row's end,
and ``span_bound`` bounds its length, so a redactor holding back that many characters never
lets out a row whose secret the next piece would complete.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["MAX_ROW_BYTES", "MIN_ROW_BYTES", "dump_spans", "span_bound"]

MIN_ROW_BYTES = 4
"""The fewest bytes a row of a dump must show for its rows to be read together."""
MAX_ROW_BYTES = 256
"""The most bytes a row may show (xxd's widest, ``-c 256``)."""

# The widest line a row of W bytes takes in any dialect (xxd -g1 with 16-digit offsets: 19 + 4W).
_ROW_OVERHEAD, _CHARS_PER_BYTE = 24, 4
_SEPARATORS = ("\n", "\n*\n")  # between two rows of one dump: a line break, or a repeat marker
_HEX = "[0-9A-Fa-f]"
_OFFSET = rf"{_HEX}{{6,16}}"
# The body of a row of each dialect, after (?m)^, its offset in the group "pre", its bytes in
# the group the dialect's reader reads.
_XXD = rf"(?P<pre>{_OFFSET}: )(?P<hex>(?:{_HEX}{{2}})+(?: (?:{_HEX}{{2}})+)*)(?P<rest> {{2,}}[ -~]*)$"
_BOXED = rf"(?P<pre>(?:{_OFFSET})? +)(?P<hex>{_HEX}{{2}}(?: {{1,2}}{_HEX}{{2}})*) +(?P<box>\|[ -~]*\||>[ -~]*<)$"
_OD_HEX = rf"(?P<pre>(?:{_OFFSET})?)(?P<hex>(?: {_HEX}{{2}})+)$"
_OD_CHARS = rf"(?P<pre>(?:{_OFFSET})?)(?P<cells>(?: {{3}}[!-~]| {{4}}|  \\[0abfnrtv]| [0-3][0-7]{{2}})+)$"
# Two-byte words in the machine's byte order (hexdump, hexdump -x, od -x; od, od -o, hexdump -o),
# the last row padded with spaces to the width of the others. An octal word is at most 177777.
_WORDS_HEX = rf"(?P<pre>(?:{_OFFSET})?)(?P<words>(?: +{_HEX}{{4}})+) *$"
_WORDS_OCTAL = rf"(?P<pre>(?:{_OFFSET})?)(?P<words>(?: +[01][0-7]{{5}})+) *$"
_ESCAPES = {"0": 0, "a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}

Finder = Callable[[str], Iterable[tuple[int, int, str]]]
"""Finds secrets in a text; yields (start, end, marker). Here the text is a dump's bytes, one
character each (Latin-1)."""


@dataclass(frozen=True, slots=True)
class _Row:
    kind: str  # the dump it belongs to, and whether it has offsets: rows of two kinds never join
    start: int  # where its line starts in the text
    body: int  # where its bytes start (after the offset)
    end: int  # where its line ends (before the line break)
    data: bytes


def _widest_line(width: int) -> int:
    return _ROW_OVERHEAD + _CHARS_PER_BYTE * width


def span_bound(match_bytes: int) -> int:
    """The most characters the rows carrying ``match_bytes`` consecutive bytes of a dump span."""
    separator = max(map(len, _SEPARATORS))
    # A match may start at a row's last byte, so it touches up to two rows more than it fills.
    return max(
        ((max(match_bytes, 1) - 1) // width + 2) * (_widest_line(width) + separator)
        for width in range(MIN_ROW_BYTES, MAX_ROW_BYTES + 1)
    )


def _shown(byte: int) -> str:
    """The character an ASCII column shows for a byte."""
    return chr(byte) if 0x20 <= byte < 0x7F else "."


def _hex_bytes(digits: str) -> bytes:
    return bytes.fromhex(digits.replace(" ", ""))


def _xxd(m: re.Match[str]) -> tuple[str, bytes] | None:
    data, rest = _hex_bytes(m.group("hex")), m.group("rest")
    column = rest[len(rest) - len(data) :]
    if len(rest) >= len(data) + 2 and not rest[: len(rest) - len(data)].strip(" ") and column == "".join(map(_shown, data)):
        return "xxd", data
    return None


def _boxed(m: re.Match[str]) -> tuple[str, bytes] | None:
    data = _hex_bytes(m.group("hex"))
    return ("boxed" + m.group("box")[0], data) if m.group("box")[1:-1] == "".join(map(_shown, data)) else None


def _od_hex(m: re.Match[str]) -> tuple[str, bytes] | None:
    return "od-hex", _hex_bytes(m.group("hex"))


def _od_chars(m: re.Match[str]) -> tuple[str, bytes] | None:
    cells = m.group("cells")
    return "od-chars", bytes(_cell(cells[i : i + 4]) for i in range(0, len(cells), 4))


def _words(base: int) -> Callable[[re.Match[str]], tuple[str, bytes] | None]:
    def read(m: re.Match[str]) -> tuple[str, bytes] | None:
        return f"words-{base}", b"".join(int(w, base).to_bytes(2, sys.byteorder) for w in m.group("words").split())

    return read


# In this order: where two dialects read one line, the first listed wins.
_READERS = tuple(
    (re.compile(rf"(?m)^{body}"), read)
    for body, read in (
        (_XXD, _xxd),
        (_BOXED, _boxed),
        (_OD_HEX, _od_hex),
        (_OD_CHARS, _od_chars),
        (_WORDS_HEX, _words(16)),
        (_WORDS_OCTAL, _words(8)),
    )
)
# The lines any dialect may read, each after a line break: a search for a literal first
# character runs about three times as fast as one trying ^ at every position.
_ANY_ROW = re.compile("(?m)\n(?:%s)" % "|".join(re.sub(r"\(\?P<\w+>", "(?:", r.pattern[len("(?m)^") :]) for r, _ in _READERS))


def _rows(text: str) -> list[_Row]:
    rows: list[_Row] = []
    for line in _ANY_ROW.finditer("\n" + text):  # its positions are one past the text's
        for regex, read in _READERS:
            m = regex.match(text, line.start(), line.end() - 1)
            read_as = read(m) if m else None
            if m and read_as and 0 < len(read_as[1]) <= MAX_ROW_BYTES:
                kind, data = read_as
                rows.append(_Row(f"{kind}{'+' if m.group('pre').strip() else ''}", m.start(), m.end("pre"), m.end(), data))
                break
    return rows


def _cell(cell: str) -> int:
    """The byte of one 4-character cell of ``od -c``: a character, an escape, or octal digits."""
    if cell[2] == "\\":
        return _ESCAPES[cell[3]]
    return int(cell[1:], 8) if cell[1] != " " else ord(cell[3])


def _dumps(text: str) -> list[list[_Row]]:
    """The rows of ``text`` grouped into dumps: consecutive rows of one kind, all but the last
    as wide as the first, which shows at least ``MIN_ROW_BYTES`` bytes; a line wider than a
    row of its dump's width prints is none of its rows, and no row joins one that wide."""
    dumps: list[list[_Row]] = []
    for row in _rows(text):
        if dumps:
            first, last = dumps[-1][0], dumps[-1][-1]
            width = len(first.data)
            if (
                row.kind == last.kind
                and text[last.end : row.start] in _SEPARATORS
                and width >= MIN_ROW_BYTES
                and first.end - first.start <= _widest_line(width)
                and len(last.data) == width
                and len(row.data) <= width
                and row.end - row.start <= _widest_line(width)
            ):
                dumps[-1].append(row)
                continue
        # A dump of one row may be padded to the width of rows it does not have (xxd, hexdump).
        if row.end - row.start <= _widest_line(MAX_ROW_BYTES):
            dumps.append([row])
    return dumps


def dump_spans(text: str, find: Finder) -> list[tuple[int, int, str]]:
    """Where the rows of ``text``'s dumps carry what ``find`` finds in their bytes: (start, end,
    replacement), one span for each run of such rows, each row's offset kept before its marker."""
    spans: list[tuple[int, int, str]] = []
    for rows in _dumps(text):
        firsts: list[int] = []  # the position in the dump's bytes where each row starts
        at = 0
        for row in rows:
            firsts.append(at)
            at += len(row.data)
        marks: dict[int, str] = {}  # row index -> the marker of the first match it carries
        for start, end, marker in find(b"".join(r.data for r in rows).decode("latin-1")):
            first = _row_of(firsts, start)
            for i in range(first, _row_of(firsts, end - 1) + 1):
                marks.setdefault(i, marker)
        run: list[int] = []
        for i in sorted(marks):
            if run and i != run[-1] + 1:
                spans.append(_masked_rows(text, rows, run, marks))
                run = []
            run.append(i)
        if run:
            spans.append(_masked_rows(text, rows, run, marks))
    return spans


def _row_of(firsts: list[int], position: int) -> int:
    return bisect.bisect_right(firsts, position) - 1


def _masked_rows(text: str, rows: list[_Row], run: list[int], marks: dict[int, str]) -> tuple[int, int, str]:
    parts: list[str] = []
    for i in run:
        row = rows[i]
        if parts:
            parts.append(text[rows[i - 1].end : row.start])  # the line break (and a "*" line) between
        offset = text[row.start : row.body].strip()
        parts.append(f"{offset} {marks[i]}" if offset else marks[i])
    return rows[run[0]].start, rows[run[-1]].end, "".join(parts)
