"""PostgreSQL URLs and server messages, made fit to show: never the password, and what to do
where the server's own settings, or its capacity (SQLSTATE class 53), refused a statement or a
connection."""

from __future__ import annotations

import urllib.parse

import psycopg.errors

from ..userinfo import QUERY_CREDENTIALS, split

__all__ = ["NO_CONNECTION_TO_SPARE", "advice", "out_of_connections", "password_in", "safe_url", "scrub"]


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


NO_CONNECTION_TO_SPARE = (
    "The server has no connection to spare (its max_connections, or the role's CONNECTION LIMIT, is "
    "reached): run fewer workers, or each with a lower concurrency, or put a pooler such as PgBouncer "
    "in front of the server, or have max_connections (or the role's limit: ALTER ROLE ... CONNECTION "
    "LIMIT) raised, then try again"
)
"""What to do when the server refuses a connection for want of one (SQLSTATE 53300)."""

# libpq reports a refusal at connection time with no SQLSTATE: only the server's words say it.
_REFUSED_FOR_CONNECTIONS = ("too many connections for role", "too many clients already", "connection slots are reserved")

_CAPACITY_ADVICE: tuple[tuple[type[psycopg.errors.Error], str], ...] = (
    (psycopg.errors.TooManyConnections, NO_CONNECTION_TO_SPARE),
    (
        psycopg.errors.DiskFull,
        "The database server's disk is full: free space on it (or give the database a larger volume), then try again",
    ),
    (
        psycopg.errors.OutOfMemory,
        "The database server ran out of memory: run fewer workers, or each with a lower concurrency, or "
        "give the server more memory (or a lower work_mem), then try again",
    ),
    (
        psycopg.errors.ConfigurationLimitExceeded,
        "A limit of the server's configuration was reached (such as max_locks_per_transaction or "
        "max_files_per_process): have it raised, then try again",
    ),
    (
        psycopg.errors.InsufficientResources,  # class 53 as a whole, for a code not named above
        "The database server is short of a resource (disk, memory or connections): free it there, then try again",
    ),
)


def out_of_connections(error: BaseException) -> bool:
    """Whether the server refused a connection (or a session) because it has none to spare:
    max_connections, the slots kept for superusers, or the role's CONNECTION LIMIT."""
    if isinstance(error, psycopg.errors.TooManyConnections):
        return True
    return isinstance(error, psycopg.OperationalError) and any(said in str(error) for said in _REFUSED_FOR_CONNECTIONS)


def advice(error: BaseException) -> str:
    """What to do, as a sentence to follow the server's words, if the server is out of capacity
    (SQLSTATE class 53: connections, disk, memory, a configured limit) or a setting of the server
    refused the statement (else nothing): the server's words say what happened, not what to do."""
    if out_of_connections(error):
        return f". {NO_CONNECTION_TO_SPARE}"
    return next((f". {said}" for kind, said in (*_CAPACITY_ADVICE, *_SETTING_ADVICE) if isinstance(error, kind)), "")
