"""Secrets never leave a tool: every value that looks like a credential is masked in its output.

A ``Redactor`` is built from an environment: the values of ``ANTHROPIC_API_KEY``,
``ANTHROPIC_AUTH_TOKEN`` and of every variable whose *name* contains KEY, TOKEN, SECRET or
PASSWORD (any case). Each occurrence of such a value in a text becomes ``[REDACTED:NAME]``.
The tool registry applies it to the content of every tool result (error messages included)
before the result is returned, so a secret reaches neither the model nor the log.

Invariant: redaction is exact and streaming-safe. ``redact`` uses one compiled alternation,
longest values first (a value that contains another is masked whole). ``RedactingStream``
masks a text that arrives in pieces (a command's output) and never emits a prefix of a
secret that the next piece might complete, so capping a stream cannot cut a secret in half
and leak the part before the cut. Values shorter than 8 characters are ignored: masking
``dev`` or ``1`` everywhere would destroy output and protect nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["MIN_SECRET_LENGTH", "RedactingStream", "Redactor", "is_secret_name"]

MIN_SECRET_LENGTH = 8
"""Values shorter than this are never treated as secrets."""

_ALWAYS = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"})
_SECRET_NAME = re.compile("KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    return name in _ALWAYS or _SECRET_NAME.search(name) is not None


class Redactor:
    """Masks known secret values in text as ``[REDACTED:NAME]``; never shows a value itself.

    ``longest`` is the length of the longest value (0 when there is none).
    """

    __slots__ = ("_names", "_pattern", "longest")

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        items = secrets.items() if isinstance(secrets, Mapping) else secrets
        names: dict[str, str] = {}  # value -> variable name
        # Sorted so that a value shared by two variables is always named after the same one.
        for name, value in sorted(items):
            if not isinstance(value, str):
                continue
            # A value read from a file often carries a newline; the bare token leaks too.
            for candidate in dict.fromkeys((value, value.strip())):
                if len(candidate) >= MIN_SECRET_LENGTH and candidate not in names:
                    names[candidate] = name
        self._names = names
        ordered = sorted(names, key=lambda v: (-len(v), v))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        self.longest = len(ordered[0]) if ordered else 0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Redactor:
        """A redactor for the secrets of ``environ`` (``os.environ`` by default)."""
        env = os.environ if environ is None else environ
        return cls((name, value) for name, value in env.items() if is_secret_name(name))

    def merged(self, other: Redactor) -> Redactor:
        """A redactor for the secrets of both (this one's names win for a shared value)."""
        if not other._names:
            return self
        if not self._names:
            return other
        combined = {value: name for value, name in other._names.items()}
        combined.update(self._names)
        out = Redactor()
        out._names = combined
        ordered = sorted(combined, key=lambda v: (-len(v), v))
        out._pattern = re.compile("|".join(map(re.escape, ordered)))
        out.longest = len(ordered[0])
        return out

    @property
    def names(self) -> list[str]:
        """The variable names whose values are masked, sorted."""
        return sorted(set(self._names.values()))

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``[REDACTED:NAME]``."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(self._marker, text)

    def stream(self) -> RedactingStream:
        """A redactor for a text that arrives in pieces."""
        return RedactingStream(self)

    def _marker(self, match: re.Match[str]) -> str:
        return "[REDACTED:%s]" % self._names[match.group(0)]

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
    whether they begin a secret; everything returned is final.
    """

    __slots__ = ("_carry", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._carry = ""

    def feed(self, text: str) -> str:
        """Add ``text``; return the redacted text that no later piece can change."""
        r = self._redactor
        if r._pattern is None:
            return text
        buf = self._carry + text
        # A match starting before safe_end has all of its characters in buf already.
        safe_end = len(buf) - (r.longest - 1)
        if safe_end <= 0:
            self._carry = buf
            return ""
        out: list[str] = []
        pos = 0
        for m in r._pattern.finditer(buf):
            if m.start() >= safe_end:
                break
            out.append(buf[pos : m.start()])
            out.append(r._marker(m))
            pos = m.end()
        cut = max(pos, safe_end)
        out.append(buf[pos:cut])
        self._carry = buf[cut:]
        return "".join(out)

    def flush(self) -> str:
        """The redacted rest, at the end of the text."""
        rest, self._carry = self._carry, ""
        return self._redactor.redact(rest)

    @property
    def pending(self) -> int:
        """How many characters are held back, waiting for the next piece."""
        return len(self._carry)
