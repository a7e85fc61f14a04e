"""Where a URL's user info ends, and so its password: the one rule of every place that hides one
(a PostgreSQL store's URL in messages, a URL in what a tool prints).

Consumers read a password differently, and a password is hidden whole only if what any of them
may take for it is: libpq takes ``#`` and ``?`` as the password's and ends the user info at the
first ``@``; ``urllib.parse`` at the last ``@`` before the first ``/``; SQLAlchemy's
``make_url`` reads a password holding ``/`` up to the next ``@``. So the user info ends at the
last ``@`` before the first ``/`` (libpq's ``@`` or a later one); or, after ``user:`` with no
``@`` before the first ``/``, at the last ``@`` before the next ``/`` (a password holding
``/``), unless ``user:`` is a host and a port (``https://example.com:8080/users/@alice``):
after up to five digits and a ``/``, the password is read across it only if the rest, to the
``@``, is one path segment, not empty and with no query or fragment (``user:12/abc@host``, as
SQLAlchemy reads it; not ``:443/@types/node`` nor ``:5432/db?user=a@b``).
A user never starts with ``[`` (an IPv6 host, ``http://[::1]:8080/@x``).
"""

from __future__ import annotations

import re
import urllib.parse

__all__ = ["QUERY_CREDENTIALS", "TEXT_LONGEST", "password_rule", "passwords", "split"]

QUERY_CREDENTIALS = ("password", "passfile", "sslpassword")
"""libpq's query parameters that hold a credential, or say where one is (any case in a text):
hidden wherever the user info's password is. ``sslpassword`` unlocks an encrypted client key."""

_USER, _PASSWORD, _HOST = 100, 200, 255  # the most characters of each in a text
TEXT_LONGEST = _USER + 1 + _PASSWORD + 1 + _HOST + 1
"""The most characters ``password_rule(in_text=True)`` reads (its look past the ``@`` included)."""


def password_rule(*, in_text: bool) -> tuple[str, str]:
    """Regex sources reading a user info that holds a password, from just after a URL's ``://``:
    (its user and ``:``, its password). The password ends where the user info does, before the ``@``.

    ``in_text``: the URL is somewhere in a text (a tool's output), so whitespace ends it and each
    part is bounded (a streaming redactor holds back the longest match); else it is a whole string."""
    end, char = (r"\s", r"\S") if in_text else ("", r"[\s\S]")
    user_chars, password_chars = (f"{{0,{_USER}}}", f"{{1,{_PASSWORD}}}?") if in_text else ("*", "+?")
    last_at = _last_at(in_text)
    user = rf"[^:/@{end}\[]{user_chars}:"
    before_slash = rf"[^/{end}]{password_chars}{last_at}"
    across_slash = rf"(?!\d{{1,5}}[,/?#]){char}{password_chars}{last_at}"  # not a port, then a path
    segment = f"{{1,{_PASSWORD - 6}}}?" if in_text else "+?"
    after_digits = rf"\d{{1,5}}/[^/?#{end}]{segment}{last_at}"
    return user, f"(?:{before_slash}|{across_slash}|{after_digits})"


def _last_at(in_text: bool) -> str:
    """A lookahead: here is the last ``@`` before the next ``/`` (or the URL's end)."""
    end, host = (r"\s", f"{{0,{_HOST}}}") if in_text else ("", "*")
    return rf"(?=@[^@/{end}]{host}(?![^/{end}]))"


_WITH_PASSWORD = re.compile("".join(password_rule(in_text=False)))
_QUERY_CREDENTIAL = re.compile(rf"[?&](?i:{'|'.join(QUERY_CREDENTIALS)})=([^&#]+)")
_WITHOUT = re.compile(rf"[^/]*?{_last_at(in_text=False)}")  # no password: to the last @ before the first /


def split(url: str) -> tuple[str, str, str] | None:
    """``url`` as (scheme and ``://``, the user info, what follows its ``@``), or None if it has no ``://``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    found = _WITH_PASSWORD.match(rest) or _WITHOUT.match(rest)
    if found is None:
        return scheme + sep, "", rest
    return scheme + sep, found.group(0), rest[found.end() + 1 :]


def passwords(url: str) -> list[str]:
    """The credentials ``url`` carries: its user info's password and its credential query values,
    each as written and, where it differs, percent-decoded (as a client reads it)."""
    found = [m.group(1) for m in _QUERY_CREDENTIAL.finditer(url)]
    parts = split(url)
    if parts is not None and ":" in parts[1]:
        found.append(parts[1].partition(":")[2])
    decoded = [urllib.parse.unquote(p) for p in found]
    return list(dict.fromkeys(p for p in [*found, *decoded] if p))
