"""A model's Markdown, made safe to show: as HTML from a small allow-list, or inert in a Markdown cell.

Model text is untrusted: a prompt-injected page can make a model write ``<script>`` or an
``onerror`` attribute, and a notebook front end (ipywidgets' HTML widget, a Markdown cell,
nbconvert) inserts HTML as it comes. Two rules, one per destination:

* ``to_html`` (a timeline's final answer): everything is escaped first; then only this
  allow-list becomes markup: paragraphs, ``**bold**``, ``*italic*``, `` `code` ``, fenced code
  blocks, ``-``/``*``/``1.`` lists, ``#`` headings (as bold paragraphs), and links whose target
  is ``http://`` or ``https://`` (with ``rel="noopener noreferrer"``). Nothing else can become
  a tag or an attribute: the escaped text has no ``<``, ``>``, ``"`` or ``'`` of its own.
* ``inert`` (a Markdown cell of an exported notebook): the text stays Markdown, but every ``<``
  is escaped, so no renderer sees a tag or an autolink, and a link or image whose target is
  not http(s) is broken (a backslash before its ``(``, or the ``:`` of a reference definition),
  so no ``javascript:`` URL becomes an href. Only a fenced code block that every renderer
  agrees is one is left as it is (it shows its text literally): a closed backtick fence, after a
  blank line, indented by at most three spaces. Everywhere else, inline code too, a ``<``
  shows as ``&lt;`` rather than trust a guess at where a renderer's code ends: Markdown's
  rules for that (backslashes, backtick runs, spans across lines, no-break spaces, tabs) are
  where escaping and renderer disagreed, and the disagreement was live HTML.

Both first remove the control characters ``inert_text`` names: escape codes, and the direction
overrides that would make a line of the answer read otherwise than it was written.
"""

from __future__ import annotations

import re
from html import escape

from .inert_text import terminal_text

__all__ = ["inert", "to_html"]

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})\s*([\w+.#-]*)\s*$")
_BULLET = re.compile(r"^\s{0,3}[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s{0,3}\d{1,9}[.)]\s+(.*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s()<>\"']+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])|(?<![\w])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w])")


def _inline(text: str) -> str:
    """One block's inline Markdown as HTML: code spans kept literal, the rest escaped then marked up."""
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(text):
        out.append(_marked(text[pos : m.start()]))
        out.append(f"<code>{escape(m.group(2).strip())}</code>")
        pos = m.end()
    out.append(_marked(text[pos:]))
    return "".join(out)


def _marked(text: str) -> str:
    # Links are found on the raw text (their URL must be http(s), with no quote or bracket),
    # then every piece is escaped; bold and italic apply to escaped text, which has no tags.
    out: list[str] = []
    pos = 0
    for m in _LINK.finditer(text):
        out.append(_emphasis(escape(text[pos : m.start()])))
        label, url = _emphasis(escape(m.group(1))), escape(m.group(2))
        out.append(f'<a href="{url}" rel="noopener noreferrer" target="_blank">{label}</a>')
        pos = m.end()
    out.append(_emphasis(escape(text[pos:])))
    return "".join(out)


def _emphasis(escaped: str) -> str:
    escaped = _BOLD.sub(lambda m: f"<strong>{m.group(1) or m.group(2)}</strong>", escaped)
    return _ITALIC.sub(lambda m: f"<em>{m.group(1) or m.group(2)}</em>", escaped)


def to_html(text: str) -> str:
    """``text`` (Markdown from a model) as HTML of the allow-list in the module docstring."""
    lines = terminal_text(text.replace("\r\n", "\n")).split("\n")
    blocks: list[str] = []
    paragraph: list[str] = []

    def end_paragraph() -> None:
        if paragraph:
            blocks.append(f"<p>{'<br>'.join(_inline(line.strip()) for line in paragraph)}</p>")
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            end_paragraph()
            marker = fence.group(1)
            code: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                code.append(lines[i])
                i += 1
            blocks.append(f"<pre><code>{escape(chr(10).join(code))}</code></pre>")
            i += 1
            continue
        item = _BULLET.match(line) or _NUMBERED.match(line)
        if item:
            end_paragraph()
            kind = "ul" if _BULLET.match(line) else "ol"
            items: list[str] = []
            while i < len(lines):
                match = (_BULLET if kind == "ul" else _NUMBERED).match(lines[i])
                if match:
                    items.append(match.group(1))
                elif lines[i].strip() and items and lines[i].startswith((" ", "\t")):
                    items[-1] += " " + lines[i].strip()  # a continuation line of the item
                else:
                    break
                i += 1
            blocks.append(f"<{kind}>{''.join(f'<li>{_inline(it)}</li>' for it in items)}</{kind}>")
            continue
        heading = _HEADING.match(line)
        if heading:
            end_paragraph()
            blocks.append(f"<p><strong>{_inline(heading.group(1))}</strong></p>")
        elif line.strip():
            paragraph.append(line)
        else:
            end_paragraph()
        i += 1
    end_paragraph()
    return "".join(blocks)


def inert(text: str) -> str:
    """``text`` still as Markdown, with no HTML a renderer would make and no unsafe link (module docstring)."""
    lines = terminal_text(text.replace("\r\n", "\n")).split("\n")
    out: list[str] = []
    i, after_blank = 0, True
    while i < len(lines):
        close = _fence_end(lines, i) if after_blank else None
        if close is not None:
            out.extend(lines[i : close + 1])
            i, after_blank = close + 1, False
            continue
        line = lines[i]
        line = _REFERENCE.sub(r"\1\\:", line)  # "[d]: javascript:..." stops being a definition
        out.append(_UNSAFE_TARGET.sub(r"]\\(", line.replace("<", "&lt;")))
        after_blank = not line.strip(" \t")
        i += 1
    return "\n".join(out)


_OPEN_FENCE = re.compile(r"^ {0,3}(`{3,})[ \t]*[\w+.#-]*[ \t]*$")
_REFERENCE = re.compile(r"^( {0,3}\[[^\]]*\]):(?!\s*https?://)")
_UNSAFE_TARGET = re.compile(r"\]\((?!\s*https?://)")


def _fence_end(lines: list[str], start: int) -> int | None:
    """The line that closes a backtick fence opened at ``start``, or None if none does."""
    opened = _OPEN_FENCE.match(lines[start])
    if opened is None:
        return None
    closing = re.compile(rf"^ {{0,3}}`{{{len(opened.group(1))},}}[ \t]*$")
    return next((j for j in range(start + 1, len(lines)) if closing.match(lines[j])), None)
