"""The model's Markdown as safe HTML (``to_html``) and as an inert Markdown cell (``inert``)."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from nb_durable.agent.display.markdown import inert, to_html

ALLOWED_TAGS = {"p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "a"}
PIECES = [
    "**", "*", "_", "`", "```", "\n", "\n\n", "- ", "1. ", "# ", "[", "]", "(", ")", "<", ">", "\"", "'", "&",
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "javascript:alert(1)", "https://example.org/a",
    "[x](javascript:alert(1))", "[y](https://e.org/\" onclick=\"alert(1))", "text", " ", "onmouseover=alert(1)",
]  # fmt: skip


def test_markdown_constructs_become_their_tags() -> None:
    html = to_html("# Report\n\n**bold** and *it* and `x<y`\n\n- one\n- two\n\n1. first\n\n```py\nif a < b:\n```\n[docs](https://e.org/?a=1&b=2)")
    assert html == (
        "<p><strong>Report</strong></p><p><strong>bold</strong> and <em>it</em> and <code>x&lt;y</code></p>"
        "<ul><li>one</li><li>two</li></ul><ol><li>first</li></ol><pre><code>if a &lt; b:</code></pre>"
        '<p><a href="https://e.org/?a=1&amp;b=2" rel="noopener noreferrer" target="_blank">docs</a></p>'
    )


@pytest.mark.parametrize(
    "text",
    ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[x](javascript:alert(1))", '[q](https://e.org/" onclick="alert(1))'],
)
def test_hostile_html_stays_text(text: str) -> None:
    html = to_html(text)
    assert not re.search(r"<(?!/?(p|br|strong|em|code|pre|ul|ol|li|a)\b)", html), html
    assert not re.search(r"<[^>]*\son\w+\s*=", html), "an event-handler attribute inside a tag"
    assert "javascript:" not in "".join(re.findall(r'href="[^"]*"', html))


@pytest.mark.parametrize("seed", range(30))
def test_only_allow_listed_tags_and_attributes_come_out(seed: int) -> None:
    rng = random.Random(seed)
    html = to_html("".join(rng.choice(PIECES) for _ in range(80)))
    tags = re.findall(r"<\s*/?\s*([A-Za-z][\w-]*)([^>]*)>", html)
    assert {name for name, _ in tags} <= ALLOWED_TAGS, html
    for name, attributes in tags:
        if name != "a" or attributes.startswith("/"):
            assert attributes.strip() in ("", "/"), (name, attributes)
        else:
            assert re.fullmatch(r' href="https?://[^"<>]*" rel="noopener noreferrer" target="_blank"', attributes), attributes


def test_inert_keeps_markdown_and_fenced_code_but_makes_no_html_and_breaks_unsafe_links() -> None:
    text = (
        "**b** <script>x</script> `<b>` [ok](https://e.org) [no](javascript:alert(1))\n[d]: javascript:alert(2)\n\n"
        "```py\n<i>code</i>\n```"
    )
    assert inert(text) == (
        "**b** &lt;script>x&lt;/script> `&lt;b>` [ok](https://e.org) [no]\\(javascript:alert(1))\n[d]\\: javascript:alert(2)\n\n"
        "```py\n<i>code</i>\n```"
    )


BYPASSES = [
    "Note: \\`<img src=x onerror=alert(1)>`",  # an escaped backtick opens no code span
    "Intro\n\u00a0```\n<img src=x onerror=alert(2)>\n<script>alert(3)</script>",  # a no-break space is no indent
    "Intro\n\t```\n<img src=x onerror=alert(4)>",  # nor is a tab, inside a paragraph
    "[x][d]\n\n[d]: javascript:alert(5)\n\n![i][e]\n\n[e]: javascript:alert(6)",  # reference links and images
    "a ` b\n`<img src=x onerror=alert(7)>` c",  # a code span's backticks paired across lines
    "`<img src=x onerror=alert(8)>``",  # runs of different lengths do not pair
]


def active_html(html: str) -> list[str]:
    """What in rendered HTML could run: a script, an on* attribute, a URL that is not http(s)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Scan(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in ("script", "iframe", "object", "embed", "style", "svg", "math", "form"):
                found.append(tag)
            for name, value in attrs:
                if name.startswith("on") or (name in ("href", "src") and not re.match(r"https?://", value or "")):
                    found.append(f"{tag} {name}={value}")

    Scan().feed(html)
    return found


def renderers() -> list[Any]:
    """nbconvert's Markdown renderer (mistune) and a CommonMark one (markdown-it, as JupyterLab's follows)."""
    import mistune
    from markdown_it import MarkdownIt

    return [mistune.html, MarkdownIt("commonmark").render]


@pytest.mark.parametrize("text", BYPASSES)
def test_markdown_that_fooled_the_escaping_renders_no_active_html(text: str) -> None:
    assert any(active_html(render(text)) for render in renderers()), f"live in no renderer without inert: {text!r}"
    for render in renderers():
        assert active_html(render(inert(text))) == [], (render, text, inert(text))


@pytest.mark.parametrize("seed", range(40))
def test_inert_markdown_renders_no_active_html_whatever_the_pieces(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [*PIECES, "\\", "``", "\t", "\u00a0", "    ", "[r]: javascript:alert(1)", "[r]", "![i](data:x)", "~~~"]
    text = "".join(rng.choice(pieces) for _ in range(120))
    for render in renderers():
        assert active_html(render(inert(text))) == [], (render, text)


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_direction_overrides_and_escape_codes_are_shown_by_neither_form() -> None:
    # "\u202e" would show "run gpj.exe" as "run exe.jpg": a line must read as it was written.
    text = "run \u202egpj.exe\u202c now, \u2067x\u2069 and \x1b]0;title\x07 **done**"
    for shown in (to_html(text), inert(text)):
        assert not set(BIDI + "\x1b\x07") & set(shown), repr(shown)
        assert "gpj.exe" in shown and "done" in shown
