"""Secrets never leave a tool: credentials are kept out of its environment and masked in its output.

Three defences, applied by the tool registry to every call (docs/security.md says what each misses):

* **The environment.** ``tool_environment`` strips every variable whose name is a secret's
  (``is_secret_name``: ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, and names matched by
  ``formats.SECRET_NAME_RULE``) from what tools and their subprocesses see, unless the
  name is passed through deliberately: ``NB_DURABLE_PASS_ENV="GITHUB_TOKEN NPM_TOKEN"`` (or
  ``*`` for all) in the environment, or ``ToolRegistry(pass_env=...)``. A passed-through
  value is still masked in the output.
* **Known values.** A ``Redactor`` masks each known secret value, as ``[REDACTED:NAME]``, in
  every form ``formats.value_forms`` knows (base64, hex, URL-encoded, reversed, broken
  across lines), and in the rows of a hex dump (``dumps``: ``xxd``, ``hexdump``, ``od``): the values of the environment's secret variables and the passwords of the URLs in any
  of its variables (``environment.secret_variables``), and the credentials a
  model object holds (``hold``: ``AnthropicModel(api_key=...)`` registers its key, so a
  key that lives in no variable is masked too).
* **Known formats.** ``formats.PATTERNS`` masks well-known credential formats (Anthropic,
  Stripe, GitHub, AWS, Slack, PEM private keys, URL passwords, ``NAME=value`` lines) even
  when no variable holds them, as ``[REDACTED:<format>]``, also in a hex dump's bytes (all
  but PEM blocks).

Invariant: redaction is streaming-safe. ``redact`` uses one compiled alternation, longest
values first (a value that contains another is masked whole). ``RedactingStream`` masks a
text that arrives in pieces (a command's output) and never emits a prefix of a secret that
the next piece might complete: it holds back as many characters as the longest possible
match, so capping a stream cannot cut a secret in half and leak the part before the cut.
Values shorter than 8 characters are not masked (masking ``dev`` or ``1`` everywhere would
destroy output and protect nothing), though their variables are still stripped.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from .dumps import dump_spans, span_bound
from .environment import PASS_ENV_VARIABLE, is_secret_name, secret_variables, secrets_in, tool_environment
from .formats import PATTERNS, value_forms

__all__ = [
    "MIN_SECRET_LENGTH",
    "PASS_ENV_VARIABLE",
    "RedactingStream",
    "Redactor",
    "held_secrets",
    "hold",
    "hold_credentials",
    "is_secret_name",
    "redact_known",
    "secret_variables",
    "tool_environment",
]

MIN_SECRET_LENGTH = 8
"""Values shorter than this are never masked (their variables are still stripped)."""

_HELD: dict[str, str] = {}  # value -> name: credentials this process holds outside any variable
_HELD_LOCK = threading.Lock()


def hold(name: str, value: object) -> None:
    """Mask ``value`` (as ``[REDACTED:name]``) in every tool result of this process from now on.

    For credentials that live in no environment variable: a model's ``api_key=``. Anything
    but a string of at least ``MIN_SECRET_LENGTH`` characters is ignored.
    """
    if isinstance(value, str) and len(value.strip()) >= MIN_SECRET_LENGTH:
        with _HELD_LOCK:
            _HELD.setdefault(value, name)


def hold_credentials(options: Mapping[str, Any]) -> None:
    """``hold`` the credentials among a model's options: ``api_key``, ``auth_token``, a ``client``'s."""
    client = options.get("client")
    for name in ("api_key", "auth_token"):
        hold(name, options.get(name))
        hold(name, getattr(client, name, None))


def held_secrets() -> frozenset[tuple[str, str]]:
    """(name, value) of every credential ``hold`` was given (two models' keys share a name)."""
    with _HELD_LOCK:
        return frozenset((name, value) for value, name in _HELD.items())


def redact_known(text: str) -> str:
    """``text`` with the secrets of ``os.environ`` and those held by models masked (an API's
    error message, which may echo a key, before it is recorded or shown)."""
    return Redactor.from_environ().merged(Redactor(held_secrets())).redact(text)


_LINE_BREAKS = re.compile(r"[^\r\n]+")
_HEX_BREAKS = re.compile(r"[^\r\n :]+")
_SEPARATED_HEX = re.compile(r"[0-9A-Fa-f]{2}[ :][0-9A-Fa-f]{2}[ :][0-9A-Fa-f]{2}")
_Format = tuple[str, re.Pattern[str], int, tuple[str, ...]]  # label, regex, longest match, needles
_FORMATS: tuple[_Format, ...] = tuple((p.label, re.compile(p.regex), p.longest, p.needles) for p in PATTERNS)
# The formats searched in a dump's bytes too: all but PEM blocks, whose 12,000 characters would
# make every stream hold back the rows of as many bytes (some 90,000 characters).
_DUMPED_FORMATS = tuple(f for f in _FORMATS if f[2] <= 1000)
_DUMPED_FORMATS_REACH = max(f[2] for f in _DUMPED_FORMATS) + 1  # +1: (?=@) looks one byte past
_Span = tuple[int, int, str]  # start, end (in the text searched), what replaces it
# Forms not searched in a dump's bytes: a dump of hex, base32 or spaced-out text is rare, and
# these forms, up to twice the value's length, would make every stream hold back more rows.
_NOT_DUMPED = frozenset({"hex", "base32", "spaced"})


class _View:
    """A text with some characters dropped (line breaks; for hex also spaces and colons),
    and the way back from a position in the view to one in the text."""

    def __init__(self, text: str, keep: re.Pattern[str]) -> None:
        self._at: list[int] = [0]  # view position where each run starts
        self._from: list[int] = [0]  # text position where each run starts
        if keep.fullmatch(text):  # nothing to drop: the view is the text
            self.text = text
            return
        runs = list(keep.finditer(text))
        self.text = "".join(m.group(0) for m in runs)
        self._at, self._from = [], []
        n = 0
        for m in runs:
            self._at.append(n)
            self._from.append(m.start())
            n += m.end() - m.start()

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The text positions of view positions [start, end)."""
        return self._place(start), self._place(end - 1) + 1

    def _place(self, i: int) -> int:
        k = bisect.bisect_right(self._at, i) - 1
        return self._from[k] + (i - self._at[k])


class _Values:
    """Known values' forms found in a text, across line breaks (hex forms across spaces and colons too)."""

    def __init__(self, plain: dict[str, str], hexes: dict[str, str], stretch: float) -> None:
        self.plain, self.hexes = plain, hexes  # form text -> label
        self._plain = _alternation(plain)
        self._hex = _alternation(hexes)
        self.stretch = stretch  # how many times its length a form may span, with its line breaks
        # The most characters a match can span (0: nothing to find).
        self.reach = math.ceil(stretch * max(map(len, (*plain, *hexes)), default=0))

    def find(self, text: str) -> list[_Span]:
        found: list[_Span] = []
        plain = _View(text, _LINE_BREAKS)
        # Hex printed with separators (xxd -p, od -An) needs a view without them; most text has none.
        hexes = _View(text, _HEX_BREAKS) if _SEPARATED_HEX.search(text) else plain
        for pattern, table, view in ((self._plain, self.plain, plain), (self._hex, self.hexes, hexes)):
            if pattern is None:
                continue
            for m in pattern.finditer(view.text):
                start, end = view.span(m.start(), m.end())
                if end - start <= self.stretch * len(m.group(0)):
                    found.append((start, end, _marker(table[m.group(0)])))
        return found


def _as_bytes(table: dict[str, str]) -> dict[str, str]:
    """The same forms as a dump shows them: their UTF-8 bytes, one character each (Latin-1)."""
    return {text.encode("utf-8", "surrogatepass").decode("latin-1"): label for text, label in table.items()}


class _Scanner:
    """Finds every secret in a text: known values (in their forms, across line breaks, in hex
    dumps) and formats."""

    def __init__(self, values: Mapping[str, str]) -> None:
        plain: dict[str, str] = {}  # form text -> label
        hexes: dict[str, str] = {}
        dumped: dict[str, str] = {}
        for value, name in values.items():
            for form in value_forms(value, MIN_SECRET_LENGTH):
                label = f"{name} as {form.kind}" if form.kind else name
                (hexes if form.kind == "hex" else plain).setdefault(form.text, label)
                if form.kind not in _NOT_DUMPED:
                    dumped.setdefault(form.text, label)
        # A form may be broken by line breaks, tripling its span at most; wider is not a match.
        self._values = _Values(plain, hexes, stretch=3)
        # In a dump's bytes, a break every 4 characters at most (a PEM file's 64, base64's 76):
        # every byte more makes more rows held back. Some forms are left out (_NOT_DUMPED).
        self._dumped = _Values(_as_bytes(dumped), {}, stretch=1.25)
        bounds = [self._values.reach, *(bound for _, _, bound, _ in _FORMATS)]
        bounds.append(span_bound(max(self._dumped.reach, _DUMPED_FORMATS_REACH)))
        self.longest = max(bounds) + 1  # +1: (?=@) looks one past

    def spans(self, text: str, before: str = "") -> list[_Span]:
        """Where the secrets of ``text`` are, merged where they overlap; ``before``: the preceding text."""
        found = self._values.find(text)
        found.extend(dump_spans(text, self._in_dump))
        found.extend(_formats(text, _FORMATS, before))
        found.sort(key=lambda s: (s[0], -s[1]))
        merged: list[_Span] = []
        for span in found:
            if merged and span[0] < merged[-1][1]:
                # Overlapping secrets are masked as one: leaving either's tail would leak it.
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], span[1]), last[2])
            else:
                merged.append(span)
        return merged

    def _in_dump(self, data: str) -> list[_Span]:
        """The secrets in a dump's bytes (one character each): known values, and formats."""
        found = self._dumped.find(data) if self._dumped.reach else []
        found.extend(_formats(data, _DUMPED_FORMATS))
        return found


def _formats(text: str, formats: Iterable[_Format], before: str = "") -> list[_Span]:
    """Where ``formats`` match in ``text``, read after ``before`` (what precedes a match decides some)."""
    found: list[_Span] = []
    shift = len(before)
    context = before + text
    lowered = context.lower()
    for label, regex, _, needles in formats:
        if not any(needle in lowered for needle in needles):
            continue
        for m in regex.finditer(context, shift):
            start = m.end("keep") if "keep" in regex.groupindex else m.start()
            found.append((start - shift, m.end() - shift, _marker(label)))
    return found


def _alternation(texts: Iterable[str]) -> re.Pattern[str] | None:
    ordered = sorted(texts, key=lambda t: (-len(t), t))  # longest first: a value holding another wins
    return re.compile("|".join(map(re.escape, ordered))) if ordered else None


def _marker(label: str) -> str:
    return f"[REDACTED:{label}]"


def _masked(text: str, spans: Iterable[_Span]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, replacement in spans:
        out.append(text[pos:start])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)


class Redactor:
    """Masks known secret values, in any known form, and well-known credential formats.

    A value becomes ``[REDACTED:NAME]`` (``[REDACTED:NAME as base64]`` for an encoded form),
    a format ``[REDACTED:anthropic-key]``; a redactor never shows a value itself. ``longest``
    is the most characters one match can span.
    """

    __slots__ = ("_names", "_scanner", "longest")

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = secrets.items() if isinstance(secrets, Mapping) else secrets
        names: dict[str, str] = {}  # value -> variable name
        # Sorted so that a value shared by two variables is always named after the same one.
        for name, value in sorted(items):
            if not isinstance(value, str):
                continue
            # A value read from a file carries a newline; one read from a PEM file, several.
            bare = value.replace("\r", "").replace("\n", "").strip()
            if len(bare) >= MIN_SECRET_LENGTH and bare not in names:
                names[bare] = name
        self._set(names)

    def _set(self, names: dict[str, str]) -> None:
        self._names = names
        self._scanner = _Scanner(names)
        self.longest = self._scanner.longest

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for the secrets of ``environ`` (``os.environ`` by default)."""
        return cls(secrets_in(environ))

    def merged(self, other: Redactor) -> Redactor:
        """A redactor for the secrets of both (this one's names win for a shared value)."""
        if not other._names:
            return self
        if not self._names:
            return other
        combined = {value: name for value, name in other._names.items()}
        combined.update(self._names)
        out = Redactor.__new__(Redactor)
        out._set(combined)
        return out

    @property
    def names(self) -> list[str]:
        """The variable names whose values are masked, sorted."""
        return sorted(set(self._names.values()))

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by its ``[REDACTED:...]`` marker."""
        if not text:
            return text
        return _masked(text, self._scanner.spans(text))

    def stream(self) -> RedactingStream:
        """A redactor for a text that arrives in pieces."""
        return RedactingStream(self)

    def __bool__(self) -> bool:
        return bool(self._names)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Redactor) and other._names == self._names

    def __hash__(self) -> int:
        return hash(frozenset(self._names.items()))

    def __repr__(self) -> str:
        # Names only: a repr ends up in tracebacks and logs.
        return "Redactor(%s)" % ", ".join(self.names)


class RedactingStream:
    """Redacts a text fed in pieces: ``feed`` returns what is safe so far, ``flush`` the rest.

    A piece's last ``longest - 1`` characters are held back until the next piece shows
    whether they begin a secret; everything returned is final. The last character let
    through is kept as context, so formats anchored on what precedes them (a line start, a
    word boundary) match exactly as they do in the whole text.
    """

    __slots__ = ("_before", "_carry", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._carry = ""
        self._before = ""

    def feed(self, text: str) -> str:
        """Add ``text``; return the redacted text that no later piece can change."""
        r = self._redactor
        buf = self._carry + text
        # A match starting before safe_end has all of its characters in buf already.
        safe_end = len(buf) - (r.longest - 1)
        if safe_end <= 0:
            self._carry = buf
            return ""
        spans = [s for s in r._scanner.spans(buf, self._before) if s[0] < safe_end]
        cut = max(spans[-1][1] if spans else 0, safe_end)
        self._carry = buf[cut:]
        self._before = buf[cut - 1]
        return _masked(buf[:cut], spans)

    def flush(self) -> str:
        """The redacted rest, at the end of the text."""
        rest, self._carry = self._carry, ""
        out = _masked(rest, self._redactor._scanner.spans(rest, self._before))
        self._before = ""
        return out

    @property
    def pending(self) -> int:
        """How many characters are held back, waiting for the next piece."""
        return len(self._carry)
