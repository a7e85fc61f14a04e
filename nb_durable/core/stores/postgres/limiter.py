"""Shared rate limits in a PostgreSQL store: a row per endpoint, and call slots as advisory locks.

A key's circuit breaker is a row of ``nb_durable_breakers`` (its JSON state), read ``FOR
UPDATE``, changed by ``core.limiter.Breaker``'s rule and written back in one transaction.

The same ``core.limiter.Limiter`` the file stores implement, with the database's own primitives.
A key's pause and token window are one row of ``nb_durable_limits``, changed by one upsert
(``INSERT ... ON CONFLICT DO UPDATE ... RETURNING``): the row lock the server takes for that
statement is the whole critical section, so every process on every machine that reaches the
database sees one window and one pause. The window's rule is ``core.limiter``' ``_window``,
stated in SQL; the store contract holds both to it.

A call slot is a session advisory lock in the two-int form (the limits table's oid, a 32-bit
hash of the key and the slot's number), held by this limiter's own connection: the server
drops it the moment that connection ends, so a killed process frees its slots at once and a
vanished machine within the session's TCP keepalive (about 30 s). Two slots whose hashes
collide are one lock: fewer calls in flight, never more. A session's advisory locks stack (it
takes a lock it holds again), so the threads of one process are kept apart by the set of slots
this limiter holds. If the connection drops, its slots are gone with it (the limits loosen
until they are taken again); the next use connects anew.

Times are the database server's clock (``clock_timestamp()``, read inside each statement),
not the callers', so machines whose clocks disagree share one pause and one window; a ``now``
given by the caller replaces it (tests of the rule). A window that starts in the future (the
server's clock stepped back) is taken to start now, as ``core.limits``' rule says.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from ...limiter import WINDOW, Slot

T = TypeVar("T")

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["PostgresLimiter"]

_NOW = "coalesce(%(now)s::double precision, extract(epoch FROM clock_timestamp())::double precision)"
_PAUSE_SQL = (
    "INSERT INTO nb_durable_limits AS l (key, pause_until) VALUES (%(key)s, " + _NOW + " + %(seconds)s) "
    "ON CONFLICT (key) DO UPDATE SET pause_until = greatest(l.pause_until, excluded.pause_until)"
)
_PAUSED_SQL = "SELECT greatest(0, pause_until - " + _NOW + ") FROM nb_durable_limits WHERE key = %(key)s"
# The inserted row's window_start is the statement's now (``excluded.window_start``); the
# current window starts at the earlier of its start and now. A new window when that one is
# over; then the tokens go in if the window is empty or they fit; otherwise nothing changes but
# last_wait, the seconds until the window ends.
_TAKE_SQL = (
    "INSERT INTO nb_durable_limits AS l (key, window_start, tokens, last_wait) "
    "VALUES (%(key)s, " + _NOW + ", %(tokens)s, 0) "
    """ON CONFLICT (key) DO UPDATE SET
    window_start = CASE WHEN excluded.window_start >= least(l.window_start, excluded.window_start) + %(window)s
        THEN excluded.window_start ELSE least(l.window_start, excluded.window_start) END,
    tokens = CASE
        WHEN excluded.window_start >= least(l.window_start, excluded.window_start) + %(window)s THEN %(tokens)s
        WHEN l.tokens = 0 OR l.tokens + %(tokens)s <= %(per_minute)s THEN l.tokens + %(tokens)s
        ELSE l.tokens END,
    last_wait = CASE
        WHEN excluded.window_start >= least(l.window_start, excluded.window_start) + %(window)s
            OR l.tokens = 0 OR l.tokens + %(tokens)s <= %(per_minute)s THEN 0
        ELSE least(l.window_start, excluded.window_start) + %(window)s - excluded.window_start END
RETURNING last_wait
"""
)


_BREAKER_ROW_SQL = "INSERT INTO nb_durable_breakers (key) VALUES (%(key)s) ON CONFLICT (key) DO NOTHING"
_BREAKER_READ_SQL = "SELECT state, " + _NOW + " FROM nb_durable_breakers WHERE key = %(key)s FOR UPDATE"
_BREAKER_WRITE_SQL = "UPDATE nb_durable_breakers SET state = %(state)s WHERE key = %(key)s"


def _lock_key(key: str, slot: int) -> int:
    """Slot ``slot`` of ``key`` as the second int4 of its advisory lock."""
    return int.from_bytes(hashlib.sha256(f"{key}/{slot}".encode()).digest()[:4], "big", signed=True)


class _PostgresSlot:
    def __init__(self, limiter: PostgresLimiter, name: tuple[str, int], conn: psycopg.Connection[Any]) -> None:
        self._limiter = limiter
        self._name: tuple[str, int] | None = name
        self._conn = conn

    def release(self) -> None:
        name, self._name = self._name, None
        if name is not None:
            self._limiter._release(name, self._conn)


class PostgresLimiter:
    """One store's shared limits: rows of ``nb_durable_limits`` and advisory locks of one session."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._space = 0  # the limits table's oid as an int4: the slots' first lock key
        self._held: set[tuple[str, int]] = set()

    def _connection(self) -> psycopg.Connection[Any]:
        """This limiter's session (under ``_lock``), connecting if there is none or it dropped."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            conn = self._store.session()
            try:
                oid = int(conn.execute("SELECT 'nb_durable_limits'::regclass::oid").fetchone()[0])  # type: ignore[index]
            except psycopg.Error as e:
                conn.close()
                raise self._store.error("cannot read the shared limits table of", e) from None
            self._conn, self._space = conn, oid - 2**32 if oid >= 2**31 else oid
        return self._conn

    def _run(self, doing: str, sql: str, params: Any) -> list[tuple[Any, ...]]:
        """One statement on this limiter's session (the caller holds ``_lock``), connecting
        again once if the server dropped it."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                cursor = conn.execute(sql, params)
                return cursor.fetchall() if cursor.description else []
            except psycopg.OperationalError as e:
                if attempt == 2 or not (conn.broken or conn.closed):
                    raise self._store.error(f"cannot {doing} in", e) from None
                conn.close()
            except psycopg.Error as e:
                raise self._store.error(f"cannot {doing} in", e) from None
        raise AssertionError("unreachable")

    def try_slot(self, key: str, slot: int) -> Slot | None:
        name = (key, slot)
        with self._lock:
            if name in self._held:
                return None  # held by another thread of this process (the session would stack it)
            self._connection()  # the table's oid, the lock's first key
            taken = self._run("take a shared call slot", "SELECT pg_try_advisory_lock(%s, %s)", (self._space, _lock_key(*name)))
            if not taken[0][0]:
                return None
            self._held.add(name)
            assert self._conn is not None
            return _PostgresSlot(self, name, self._conn)

    def _release(self, name: tuple[str, int], conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            self._held.discard(name)
            if conn is not self._conn or conn.closed or conn.broken:
                return  # that session ended, and its locks with it
            with contextlib.suppress(psycopg.Error):  # if it dropped just now, so did the lock
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", (self._space, _lock_key(*name)))

    def pause(self, key: str, seconds: float, now: float | None = None) -> None:
        with self._lock:
            self._run("publish a pause", _PAUSE_SQL, {"key": key, "seconds": seconds, "now": now})

    def paused_for(self, key: str, now: float | None = None) -> float:
        with self._lock:
            rows = self._run("read the shared pause", _PAUSED_SQL, {"key": key, "now": now})
        return float(rows[0][0]) if rows else 0.0

    def take_tokens(self, key: str, tokens: int, per_minute: int, now: float | None = None) -> float:
        params = {"key": key, "tokens": tokens, "per_minute": per_minute, "now": now, "window": WINDOW}
        with self._lock:
            return float(self._run("spend tokens of the shared window", _TAKE_SQL, params)[0][0])

    def breaker_state(self, key: str, change: Callable[[dict[str, Any], float], T], now: float | None = None) -> T:
        # The row lock of SELECT ... FOR UPDATE is the critical section: one transaction.
        with self._lock:
            conn = self._connection()
            try:
                with conn.transaction():
                    conn.execute(_BREAKER_ROW_SQL, {"key": key})
                    row = conn.execute(_BREAKER_READ_SQL, {"key": key, "now": now}).fetchone()
                    assert row is not None
                    try:
                        state = json.loads(row[0]) or {}
                    except ValueError:
                        state = {}
                    before = dict(state)
                    result = change(state, float(row[1]))
                    if state != before:
                        conn.execute(_BREAKER_WRITE_SQL, {"key": key, "state": json.dumps(state)})
                    return result
            except psycopg.Error as e:
                raise self._store.error("cannot change the circuit breaker in", e) from None

    def close(self) -> None:
        """End this limiter's session: every slot it holds is freed."""
        with self._lock:
            conn, self._conn = self._conn, None
            self._held.clear()
        if conn is not None:
            conn.close()
