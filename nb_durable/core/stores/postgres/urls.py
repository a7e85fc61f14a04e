"""PostgreSQL URLs and server messages, made fit to show: never the password, and what to do
where the server's own settings refused a statement."""

from __future__ import annotations

import urllib.parse

import psycopg.errors

from ..userinfo import QUERY_CREDENTIALS, split

__all__ = ["advice", "password_in", "safe_url", "scrub"]


def safe_url(url: str) -> str:
    """The URL with any password taken out, fit for messages and logs."""
    parts = split(url)
    if parts is None:
        return "postgresql://(unparsable URL)"
    start, userinfo, rest = parts
    user = userinfo.partition(":")[0]
    base, _, query = rest.partition("?")
    kept = "&".join(
        p for p in query.split("&") if p and p.split("=", 1)[0].lower() not in QUERY_CREDENTIALS
    )
    return start + (f"{user}@" if userinfo else "") + base + (f"?{kept}" if kept else "")


def scrub(error: BaseException | str, secret: str | None) -> str:
    """An error's message on one line and without its last full stop (a message goes on after it),
    without the password, and without the server's LINE 1: echo of the SQL."""
    diag = getattr(error, "diag", None)
    said = diag.message_primary if diag is not None and diag.message_primary else str(error)
    text = "; ".join(" ".join(line.split()) for line in said.splitlines() if line.strip())
    text = text.rstrip(".?")  # libpq ends a refused connection with "Is the server running ...?"
    return text.replace(secret, "***") if secret else text


def password_in(url: str) -> str | None:
    """The password in ``url``'s user info, read as ``userinfo.split`` reads it, or None."""
    parts = split(url)
    if parts is None or ":" not in parts[1]:
        return None
    return urllib.parse.unquote(parts[1].partition(":")[2]) or None


_SETTING_ADVICE: tuple[tuple[type[psycopg.errors.Error], str], ...] = (
    (
        psycopg.errors.ReadOnlySqlTransaction,
        "The server takes no writes on this connection (a standby, or default_transaction_read_only "
        "set for this user or database): point the URL at the primary (with several hosts, add "
        "?target_session_attrs=read-write), or have the setting turned off for this user, then try again",
    ),
    (
        psycopg.errors.QueryCanceled,
        "The server cancelled the statement (its statement_timeout, or an administrator): raise the "
        "timeout for this user (ALTER ROLE ... SET statement_timeout) or in the URL "
        "(?options=-cstatement_timeout%3D0), then try again",
    ),
    (
        psycopg.errors.LockNotAvailable,
        "The server's lock_timeout ended the wait for a lock: raise it for this user (ALTER ROLE ... SET "
        "lock_timeout) or in the URL (?options=-clock_timeout%3D0), then try again",
    ),
)


def advice(error: BaseException) -> str:
    """What to do, as a sentence to follow the server's words, if a setting of the server refused
    the statement (else nothing): the server's words say what happened, not which setting did it."""
    return next((f". {said}" for kind, said in _SETTING_ADVICE if isinstance(error, kind)), "")
