"""PostgreSQL URLs and server messages, made fit to show: never the password, and what to do
where a mistake in the store's setup (no such database or role, a wrong password, a connection
pg_hba.conf does not let in), the server's
own settings, or its capacity (SQLSTATE class 53), refused a statement or a connection."""

from __future__ import annotations

import re
import shlex
import urllib.parse
from typing import NamedTuple

import psycopg.errors
from psycopg import conninfo as pg_conninfo

from ....errors import StoreAccessError, StoreError, StoreNameError
from ..userinfo import QUERY_CREDENTIALS, split

__all__ = [
    "CHECK_CONNECTION", "NO_CONNECTION_TO_SPARE", "Mistake", "Shortage", "advice", "out_of_connections", "password_in",
    "refused_setup", "safe_url", "scrub", "short_of",
]


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


CHECK_CONNECTION = (
    ". Check that the server runs and accepts connections there, and the user, password and database "
    "in the URL (or PGPASSWORD / ~/.pgpass)"
)
"""What to do when a connection failed for a reason the server did not name (it may be down: worth a wait)."""

class Mistake(NamedTuple):
    """A store the server refused for a mistake in its setup, which no wait mends: the error that
    says so, and what to do."""

    kind: type[StoreError]
    """``StoreNameError`` (the URL names what is not there) or ``StoreAccessError`` (the user is refused)."""
    then: str
    """What to do, a sentence to follow the server's words (from its ". ")."""


# libpq reports a refusal at connection time with no SQLSTATE (psycopg's OperationalError from
# connect has sqlstate None): only the server's English words say which it was. A server set to
# another language (lc_messages) is not understood here: its refusal is waited out as an outage.
_REFUSALS = (
    (re.compile(r'FATAL:\s+database "(.*)" does not exist'), "database"),
    (re.compile(r'FATAL:\s+role "(.*)" does not exist'), "role"),
    (re.compile(r'FATAL:\s+password authentication failed for user "(.*)"'), "password"),
    (re.compile(r"fe_sendauth: (no password) supplied"), "no password"),  # libpq's: the server asked for one
    # SQLSTATE 28000: no line of pg_hba.conf matches the connection, or the one that does rejects it.
    (re.compile(r'FATAL:\s+(no pg_hba\.conf entry|pg_hba\.conf rejects connection) for host "(.*?)", user "(.*?)", database "(.*?)"'), "pg_hba"),
)


def refused_setup(error: BaseException, url: str) -> Mistake | None:
    """What to do if the server refused the connection for a mistake no wait mends: the database
    ``url`` names does not exist, nor its role, the password is wrong or missing, or pg_hba.conf
    lets no such connection in; else None (a server down, restarting or full is waited for)."""
    if not isinstance(error, psycopg.OperationalError):
        return None
    found, what = next(((m, what) for pattern, what in _REFUSALS if (m := pattern.search(str(error)))), (None, ""))
    if found is None:
        return None
    if what == "pg_hba":
        return _not_let_in(found, unencrypted="no encryption" in str(error) or "SSL off" in str(error))
    params = pg_conninfo.conninfo_to_dict(url)
    name = found.group(1)

    def command(program: str, *flags: tuple[str, str], more: str = "") -> str:
        given = [f"{flag} {shlex.quote(str(params[key]))}" for flag, key in flags if params.get(key)]
        return " ".join([program, *given, *([more] if more else []), shlex.quote(name)])

    user = str(params.get("user") or "the URL's user")
    if what == "database":
        return Mistake(StoreNameError, (
            f". The server has no database {name}, so there is no store to wait for: create it "
            f"({command('createdb', ('-h', 'host'), ('-p', 'port'), ('-U', 'user'))}), or fix the database's name in the URL, then try again"
        ))  # fmt: skip
    if what == "role":
        return Mistake(StoreAccessError, (
            f". The server has no role {name}, so no wait lets it in: create it (as a superuser: "
            f"{command('createuser', ('-h', 'host'), ('-p', 'port'), more='--pwprompt')}, which asks its password), or fix the "
            "user's name in the URL (or PGUSER), then try again"
        ))  # fmt: skip
    if what == "password":
        return Mistake(StoreAccessError, (
            f". The server refused the password given for user {name}, so no wait lets it in: fix it in the URL "
            f"(or PGPASSWORD, or ~/.pgpass), or have it set on the server (ALTER ROLE {name} PASSWORD '...'), then try again"
        ))  # fmt: skip
    return Mistake(StoreAccessError, (
        f". The server asks {user} for a password and none was given: put it in the URL "
        "(postgresql://user:password@host/database), or in PGPASSWORD or ~/.pgpass, then try again"
    ))  # fmt: skip


def _not_let_in(found: re.Match[str], *, unencrypted: bool) -> Mistake:
    """What to do when the server's pg_hba.conf has no line for the connection, or one rejecting it."""
    said, host, user, database = found.groups()
    whom = f"user {user} connecting to database {database} from host {host}"
    if said.startswith("no"):
        why = f"No line of the server's pg_hba.conf lets in {whom}{' without encryption' if unencrypted else ''}"
        mend = "add one for them to the server's pg_hba.conf"
    else:
        why, mend = f"A line of the server's pg_hba.conf rejects {whom}", "change that line (or allow them in a line ahead of it)"
    ssl = " (with ?sslmode=require in the URL if the line for them is hostssl)" if unencrypted else ""
    return Mistake(StoreAccessError, (
        f". {why}, so no wait lets it in: have an administrator of the server {mend} and reload it "
        f"(SELECT pg_reload_conf()), or connect as a user, to a database or from a host it lets in{ssl}, then try again"
    ))  # fmt: skip


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

# As for a refused setup (``refused_setup``): libpq gives no SQLSTATE, only the server's words.
_REFUSED_FOR_CONNECTIONS = ("too many connections for role", "too many clients already", "connection slots are reserved")

_LOCK_TABLE_FULL = (
    "The server's shared lock table is full (its size is {setting} times max_connections, and other "
    "sessions hold many locks at once): have {setting} raised on the server (it takes a restart), or end "
    "the sessions holding the most locks (pg_locks shows them), then try again"
)
"""What to do when the server is out of shared memory for locks (SQLSTATE 53200; its hint names the setting)."""

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
        "A limit of the server's configuration was reached ({setting}): have it raised on the server "
        "(in postgresql.conf, or for this user with ALTER ROLE ... SET where the setting allows), then try again",
    ),
    (
        psycopg.errors.InsufficientResources,  # class 53 as a whole, for a code not named above
        "The database server is short of a resource (disk, memory or connections): free it there, then try again",
    ),
)

# A setting as the server's words name it: "exceeds temp_file_limit", "increase max_locks_per_transaction".
_SETTING = re.compile(r"\b(?:max|temp|work|maintenance)_[a-z_]*[a-z]\b")


class Shortage(NamedTuple):
    """What a server short of capacity lacks, as a wait names it, and what to do about it."""

    lacks: str
    """Said of the server: "has no connection to spare"."""
    then: str
    """What to do, a sentence without its full stop."""


def _said(error: BaseException) -> str:
    """All the server said: its message and its hint (a refused connection has both in its text)."""
    diag = getattr(error, "diag", None)
    hint = diag.message_hint if diag is not None and diag.message_hint else ""
    return f"{error} {hint}"


def _setting(error: BaseException, otherwise: str) -> str:
    """The setting the server's words name, else ``otherwise``."""
    found = _SETTING.search(_said(error))
    return found.group(0) if found else otherwise


def _out_of_shared_memory(error: BaseException) -> bool:
    # At connection time libpq gives no SQLSTATE: only the server's words say it.
    return isinstance(error, psycopg.OperationalError) and "out of shared memory" in str(error)


def short_of(error: BaseException) -> Shortage | None:
    """What the server lacks, and what to do, if it refused a connection or a statement for want
    of connections or of shared memory (its lock table): a shortage other sessions make, so a
    wait for them to end may see it over (``reconnect.ride_out``); else None."""
    if out_of_connections(error):
        return Shortage("has no connection to spare", NO_CONNECTION_TO_SPARE)
    if _out_of_shared_memory(error):
        return Shortage("is out of shared memory", _LOCK_TABLE_FULL.format(setting=_setting(error, "max_locks_per_transaction")))
    return None


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
    short = short_of(error)
    if short is not None:
        return f". {short.then}"
    said = next((said for kind, said in (*_CAPACITY_ADVICE, *_SETTING_ADVICE) if isinstance(error, kind)), None)
    if said is None:
        return ""
    return ". " + said.format(setting=_setting(error, "such as temp_file_limit or max_files_per_process"))
