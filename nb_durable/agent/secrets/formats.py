"""What a secret looks like in a text: the encoded forms of a known value, and credential formats.

Two sources of regular expressions for ``secrets.Redactor``, each with a bound on the length
of what it can match (a streaming redactor holds back that many characters, so a secret cut
between two pieces of output is still masked whole):

* ``value_forms(value)``: a known value (an environment variable's, a model's key) as a
  command could print it: itself, reversed (``| rev``), spaced out (``sed 's/./& /g'``),
  base64 (standard and URL-safe, at each of the three byte alignments, so the value is found
  inside a larger encoded blob, and ``echo $KEY | base64``'s trailing newline does not hide
  it) and base32 (at each of five), hex (either case, bytes optionally separated by spaces or
  colons, as ``xxd -p`` and ``od`` print them) and URL-encoded (also as ``encodeURIComponent``
  does), escaped as a JSON, Python (``str`` or ``bytes``), Perl or HTML string shows it
  (``\\"``, ``\\\\``, ``\\u00fc``, ``\\xc3\\xbc``, ``\\'``, ``&quot;``, and ``\\/`` as some JSON
  encoders write ``/``), and quoted as a shell prints a word back (``printf %q``, ``${v@Q}``,
  ``set -x``, ``declare -p``, ``shlex.quote``).
  Every form may be broken across lines (``base64`` wraps at 76 columns, ``fold``
  anywhere): a line break is allowed between any two characters.
* ``PATTERNS``: well-known credential formats, masked even when no variable holds them
  (a ``.env`` file, an API error body echoing a key): Anthropic, Stripe, GitHub, AWS, Slack,
  PEM private-key blocks, the password in ``scheme://user:password@host`` or ``?password=``, and
  ``NAME=value`` lines of ``.env`` files and ``env`` output whose upper-case NAME is a secret's.

High precision over recall: each format is anchored on a prefix or a context that ordinary
text does not have. What still gets through is listed in docs/security.md.
"""

from __future__ import annotations

import base64
import html
import json
import re
import urllib.parse
from dataclasses import dataclass

from ...core.stores.userinfo import QUERY_CREDENTIALS, TEXT_LONGEST, password_rule

__all__ = ["PATTERNS", "SECRET_NAME_RULE", "Form", "Pattern", "value_forms"]

_SECRET_WORDS = "KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|COOKIE"


def _name_rule(chars: str, any_case: bool) -> str:
    words, suffix = (f"(?i:{_SECRET_WORDS})", "(?i:_PASS|_PWD)") if any_case else (f"(?:{_SECRET_WORDS})", "(?:_PASS|_PWD)")
    return rf"{chars}{{0,60}}{words}{chars}{{0,60}}|{chars}{{0,60}}{suffix}|{'(?i:PASS)' if any_case else 'PASS'}"


SECRET_NAME_RULE = _name_rule("[A-Za-z0-9_]", any_case=True)
"""The names whose values are secrets (matched whole): any name containing KEY, TOKEN,
SECRET, PASSWORD, PASSWD, PASSPHRASE, CREDENTIAL or COOKIE, and names ending in ``_PASS``
(``DB_PASS``) or ``_PWD`` (``DB_PWD``, not the shell's ``PWD``), in any case."""

_ENV_NAME_RULE = _name_rule("[A-Z0-9_]", any_case=False)
"""The same names in upper case only, as ``.env`` files and ``env`` write them: ``api_key=x``
in a line of code is not a ``NAME=value`` line."""


@dataclass(frozen=True, slots=True)
class Form:
    """One way a known value can appear: a literal text, and its kind."""

    text: str
    kind: str  # "" for the value itself, else how it is written: "base64", "hex", "escaped", ... (value_forms)


@dataclass(frozen=True, slots=True)
class Pattern:
    """A credential format: ``regex`` (its group ``keep``, if any, is left unmasked), a label, a bound.

    ``needles``: lowercase texts one of which every match contains (a fast test first).
    """

    label: str
    regex: str
    longest: int
    needles: tuple[str, ...]


def value_forms(value: str, min_length: int) -> list[Form]:
    """The forms of ``value`` (line breaks already removed) worth masking, longest first.

    Hex forms are lowercase and uppercase, without separators: the redactor searches them in
    a view of the text without spaces, colons and line breaks. No form is longer than 6
    characters a UTF-8 byte of the value (HTML's ``&quot;``): a streaming redactor holds back
    a multiple of the longest form.
    """
    forms: list[Form] = []

    def add(text: str, kind: str) -> None:
        if len(text) >= min_length:
            forms.append(Form(text, kind))

    add(value, "")
    add(value[::-1], "reversed")
    data = value.encode("utf-8", "surrogatepass")
    for shift in range(3):
        part = data[shift:]
        whole = 4 * (len(part) // 3)  # only full groups: what follows the value cannot change them
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            add(encode(part).decode("ascii")[:whole], "base64")
    for shift in range(5):
        part = data[shift:]
        add(base64.b32encode(part).decode("ascii")[: 8 * (len(part) // 5)], "base32")
    add(data.hex(), "hex")
    add(data.hex().upper(), "hex")
    # "/": what quote() keeps by default; "!'()*": what JavaScript's encodeURIComponent and jq's @uri keep.
    for safe in ("", "/", "!'()*"):
        for quote in (urllib.parse.quote, urllib.parse.quote_plus):
            quoted = quote(value, safe=safe)
            if quoted != value:
                add(quoted, "url-encoded")
                add(re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted), "url-encoded")
    # A tool's dict result is JSON-encoded by the registry itself, and programs print repr()s:
    # a value holding '"', '\\', a tab or a non-ASCII letter shows escaped there.
    for escaped in (json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1], repr(value)[1:-1]):
        if escaped != value:
            add(escaped, "escaped")
            # PHP's json_encode, and some Java and JavaScript encoders, write "/" as "\/".
            add(escaped.replace("/", "\\/"), "escaped")
    single_quoted = value.replace("\\", "\\\\").replace("'", "\\'")  # Perl's Dumper, PHP's var_export, JavaScript
    as_html = html.escape(value)  # a page or a template's output; markupsafe writes &#39; and &#34;
    for escaped in (repr(data)[2:-1], single_quoted, as_html, as_html.replace("&#x27;", "&#39;").replace("&quot;", "&#34;")):
        if escaped != value:
            add(escaped, "escaped")
    # Spaced out (sed 's/./& /g'): no longer than the hex form, so nothing more is held back.
    # Lists of its characters or byte codes (Python's list()) would be: they are left out.
    add(" ".join(value), "spaced")
    for quoted in _shell_quoted(value):
        if quoted != value:
            add(quoted, "shell-quoted")
    unique: dict[str, Form] = {}
    for form in forms:
        unique.setdefault(form.text, form)  # a palindrome is the value, not its reverse
    return sorted(unique.values(), key=lambda f: (-len(f.text), f.text))


_SHELL_SPECIAL = frozenset(" !\"$&'()*,;<>?[\\]^`{|}")  # what bash's printf %q escapes anywhere
_ANSI_C = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r", "\x1b": "\\E", "'": "\\'", "\\": "\\\\"}


def _shell_quoted(value: str) -> list[str]:
    """``value`` as a shell quotes it to print it back as a word (``set -x``, ``declare -p``,
    ``printf %q``, ``${v@Q}``, ``shlex.quote``), without the quotes around it."""
    forms = [
        value.replace("'", "'\\''"),  # inside '...': bash's set -x and ${v@Q}
        value.replace("'", "'\"'\"'"),  # shlex.quote
        re.sub(r'(["$`\\])', r"\\\1", value),  # inside "...": declare -p
    ]
    control = any(c < " " or c == "\x7f" for c in value)
    if control or not value.isascii():
        # $'...': a control character in any locale; a non-ASCII one in the C locale, byte by byte.
        ansi = "".join(_ANSI_C.get(c) or (f"\\{ord(c):03o}" if c < " " or c == "\x7f" else c) for c in value)
        if control:  # in a UTF-8 locale bash writes the other characters as they are
            forms.append(ansi)
        forms.append("".join(c if c.isascii() else "".join(f"\\{b:03o}" for b in c.encode("utf-8", "surrogatepass")) for c in ansi))
    if not control:
        forms.append("".join("\\" + c if _backslashed(value, i) else c for i, c in enumerate(value)))
    return forms


def _backslashed(value: str, i: int) -> bool:
    """Whether ``printf %q`` escapes ``value[i]``: a metacharacter, or one that starts a word
    (``#`` first, ``~`` first or after ``:`` or ``=``, where bash would expand it)."""
    c = value[i]
    return c in _SHELL_SPECIAL or (c in "#~" and i == 0) or (c == "~" and value[i - 1] in ":=")


_BEFORE = r"(?<![A-Za-z0-9])"  # not inside a longer word ("_" may precede: KEY_sk_live_...)
_AFTER = r"(?![A-Za-z0-9])"
_PEM_BREAK = r"(?:\r?\n|\\n)"  # a real line break, or "\n" inside a JSON string
_URL_USER, _URL_PASSWORD = password_rule(in_text=True)

PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "private-key",
        r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        rf"(?:{_PEM_BREAK}(?:[A-Za-z0-9+/=]{{1,100}}|[A-Za-z-]{{1,30}}: [^\r\n\\]{{0,60}})){{0,120}}"
        rf"(?:{_PEM_BREAK}?-----END[A-Z0-9 ]{{0,40}}PRIVATE KEY(?: BLOCK)?-----)?",
        2 * 70 + 120 * 102 + 2,
        ("private key",),
    ),
    Pattern("anthropic-key", rf"{_BEFORE}sk-ant-[A-Za-z0-9_\-]{{16,400}}", 408, ("sk-ant-",)),
    Pattern("stripe-key", rf"{_BEFORE}[sr]k_(?:live|test)_[A-Za-z0-9]{{16,300}}", 309, ("k_live_", "k_test_")),
    Pattern("github-token", rf"{_BEFORE}(?:gh[pousr]_[A-Za-z0-9]{{30,255}}|github_pat_[A-Za-z0-9_]{{20,255}})", 267, ("gh",)),
    Pattern("aws-access-key-id", rf"{_BEFORE}(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{{16}}{_AFTER}", 21, ("akia", "asia", "abia", "acca")),
    Pattern(
        "aws-secret-key",
        r"(?P<keep>(?i:aws_?secret_?(?:access_?)?key)[\"']?[ \t]{0,5}[:=][ \t]{0,5}[\"']?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
        100,
        ("secret",),
    ),
    Pattern("slack-token", rf"{_BEFORE}xox[abposr]-[A-Za-z0-9\-]{{10,250}}", 260, ("xox",)),
    # The password as any consumer may read it (userinfo's rule): one holding #, ?, / or @ whole.
    Pattern("url-password", rf"(?P<keep>://{_URL_USER})(?:{_URL_PASSWORD})", 3 + TEXT_LONGEST, ("://",)),
    # libpq's other spelling: postgresql://host/db?user=u&password=... (and a passfile's path).
    Pattern(
        "url-query-password",
        rf"(?P<keep>[?&](?i:{'|'.join(QUERY_CREDENTIALS)})=)[^&\s#\"']{{1,200}}",
        2 + max(map(len, QUERY_CREDENTIALS)) + 200,
        tuple(f"{name}=" for name in QUERY_CREDENTIALS),
    ),
    Pattern(
        "secret-assignment",
        rf"(?P<keep>(?m:^)[ \t]{{0,8}}(?:export[ \t]+)?(?:{_ENV_NAME_RULE})[ \t]{{0,3}}=[ \t]{{0,3}}[\"']?)"
        r"(?![$({<\[])[^\s\"'`]{8,400}",
        620,
        ("=",),
    ),
)
