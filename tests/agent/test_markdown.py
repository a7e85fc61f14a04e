"""The model's Markdown as safe HTML (``to_html``) and as an inert Markdown cell (``inert``)."""

from __future__ import annotations

import random
import re

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


def test_inert_keeps_markdown_and_code_but_escapes_html_and_breaks_unsafe_links() -> None:
    text = "**b** <script>x</script> `<b>` [ok](https://e.org) [no](javascript:alert(1))\n```\n<i>code</i>\n```"
    assert inert(text) == (
        "**b** &lt;script&gt;x&lt;/script&gt; `<b>` [ok](https://e.org) [no]\\(javascript:alert(1))\n```\n<i>code</i>\n```"
    )
