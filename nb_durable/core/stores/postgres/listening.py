"""A worker's LISTEN on its store's reading session, so an idle worker holds one session, not two.

A worker looks (claims) on the store's reading connection, and its wake-ups
(``core.index.claim.Wakeups``) wait for NOTIFY on a listening session. Given a session of their
own, the two made every idle worker hold two connections: a fleet of three workers took six,
all a small server had, and no run could be opened. ``Listening`` listens on the reading
connection instead. psycopg keeps a notification that arrives during another thread's query in
the connection's backlog, and ``Connection.notifies()`` yields it; but ``notifies()`` holds the
connection's lock while it waits, which would hold every claim (and every run's read, when
the worker's runs share the store) for as long. So the wait is on the socket, without the lock,
in short naps; the lock is taken only to read what came (``notifies(timeout=0)``).

A reading connection the store replaced (a drop ridden out by a read: ``reconnect``) listens to
nothing: ``notifies()`` then raises, and the wake-ups listen again on the new one.
"""

from __future__ import annotations

import select
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg

from . import index
from .holder_rows import lease_lock
from .reconnect import dropped

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["NAP", "Listening", "listen"]

NAP = 0.05
"""Seconds between looks at the backlog: a notification read by another thread's query waits at most this."""

_LEASES_HELD_SQL = f"SELECT l.objid FROM pg_locks l WHERE {lease_lock('l')}"


class Listening:
    """The reading connection of ``store`` while it listens on ``index.CHANNEL``."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any]) -> None:
        self._store = store
        self._conn = conn

    def _live(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is not self._store.reading or dropped(conn):
            raise psycopg.OperationalError("the store's reading session was replaced or lost: listen again")
        return conn

    def notifies(self, *, timeout: float, stop_after: int | None = None) -> Iterator[psycopg.Notify]:
        """The notifications that come within ``timeout`` seconds (at most ``stop_after`` of them, roughly)."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for notify in self._live().notifies(timeout=0):
                yield notify
                seen += 1
            left = deadline - time.monotonic()
            if (stop_after is not None and seen >= stop_after) or left <= 0:
                return
            # Readable: a notification, or another thread's query's answer (read by that thread).
            select.select([self._live().fileno()], [], [], min(left, NAP))

    def leases_held(self) -> frozenset[int]:
        """The keys of the runs of its store whose leases are held now."""
        return frozenset(int(row[0]) for row in self._live().execute(_LEASES_HELD_SQL, {"space": self._store.lock_space}))

    @property
    def info(self) -> psycopg.ConnectionInfo:
        """The listening session's (its backend pid, for one)."""
        return self._conn.info

    def close(self) -> None:
        """Stop waiting here; the reading connection stays the store's (closed with it)."""
        self._conn = None  # type: ignore[assignment]


def listen(store: PostgresStore) -> Listening:
    """LISTEN on ``store``'s reading connection (opened again first if it was lost)."""
    conn = store.reading_session()
    try:
        conn.execute(f"LISTEN {index.CHANNEL}")
    except psycopg.Error as e:
        if dropped(conn):
            conn.close()  # the next read or listen connects again
        raise store.error("cannot listen for new runs on", e) from None
    return Listening(store, conn)
