"""One PostgreSQL run open for writing: its appends, under its lease (``holding``).

An append is one statement in autocommit (the events and the run's index row, ``index``):
one transaction, one round trip, committed with ``synchronous_commit`` on when the step asks
for durability and off otherwise (the server has the row when the call returns, so only a
crash of the server itself can lose it). The statement sets that for its own transaction
(``set_config(..., true)``), so steps that alternate, as a model step's unsynced intent and
synced result do, cost no ``SET`` round trips; the session's own setting stays off. The insert
only writes on the backend that took the lock. If the connection drops, an append that finds
the lease gone takes it back on a new session (``holding``: only if nobody took it and the log
still ends where this writer left it) and is then made, exactly once; failing that the writer
raises ``LeaseLostError``, and when the run is reopened the step in flight runs again or is in
doubt by the usual rules. A write the server refuses on a live session for a shortage is tried
again within the same window, then is ``ServerShortError`` (``holding``): a step's result it
refused is kept by its log, as for a full disk. Opening's own statements (the load, a torn tail's
truncation, the index row) take the lease back the same way and are made again: the load
reads afresh, the truncation deletes only what was loaded past what is kept. A transaction cannot half-record an event. Use a
direct connection or session pooling: a transaction-pooling proxy cannot hold a session lock
(the backend check refuses to write).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from ...index.rows import IndexRow, slim_since
from ..base import StoredLog
from . import reconnect
from .holder_rows import lease_lock
from .holding import Holding
from .index import CHANNEL, upsert_params, wakes_workers
from .schema import LINES_SQL

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["PostgresWriter"]

_INSERT_ONE = (
    "INSERT INTO nb_durable_events (run, seq, line) SELECT %s, %s, %s WHERE pg_backend_pid() = %s"
)
_INSERT_MANY = (
    "INSERT INTO nb_durable_events (run, seq, line) "
    "SELECT %s, %s + t.n - 1, t.line FROM unnest(%s::bytea[]) WITH ORDINALITY AS t(line, n) "
    "WHERE pg_backend_pid() = %s"
)

_INSERT_HELD = (
    "INSERT INTO nb_durable_events (run, seq, line) "
    "SELECT %s, %s + t.n - 1, t.line FROM unnest(%s::bytea[]) WITH ORDINALITY AS t(line, n) "
    f"WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE {lease_lock('l', '%s', space='%s')} AND l.pid = %s)"
)


class _NotHeld(Exception):
    """A pair's insert found a lease not held: the transaction is rolled back."""


class PostgresWriter(Holding):
    """One run's appends, under its lease (an advisory lock of this connection's session: ``Holding``)."""

    def __init__(
        self, store: PostgresStore, run_id: str, conn: psycopg.Connection[Any], key: int, holder: dict[str, Any]
    ) -> None:
        self._next = 0  # the seq of the next line: where the log ends as this writer left it
        self._last: bytes | None = None  # line ``_next - 1`` as this writer last read or wrote it
        super().__init__(store, run_id, conn, key, holder)

    def _use(self, conn: psycopg.Connection[Any], holder: dict[str, Any]) -> None:
        super()._use(conn, holder)
        self._cursor = conn.cursor()
        self._sync = False  # the session's synchronous_commit (writer sessions start with it off)
        self._settings_sent: Any = None  # the settings of the last row an append wrote

    def _left(self, lines: Sequence[bytes] = (), first_seq: int | None = None) -> list[reconnect.Ending]:
        """How the log may end after a drop: where this writer left it, or with ``lines`` from
        ``first_seq`` on (a write in flight whose commit went through)."""
        first = self._next if first_seq is None else first_seq
        last = [(first - 1, None)] if first > 0 else []
        return [last, [*last, *((first + i, line[:-1]) for i, line in enumerate(lines))]]

    def load(self) -> StoredLog:
        self._live()
        deadline = time.monotonic() + reconnect.RECONNECT_SECONDS
        while True:
            try:
                rows = self._live().execute(LINES_SQL, (self._run_id,), binary=True).fetchall()
                break
            except psycopg.Error as e:
                if not self._dropped():
                    raise self._store.error("cannot read", e, self._run_id, on=self._conn) from None
                self._take_back(e, None, deadline)  # nothing read yet: whatever the log holds is read anew
        self._next = len(rows)
        self._last = bytes(rows[-1][0]) if rows else None
        return StoredLog.from_lines([r[0] for r in rows], self._store.location(self._run_id))

    def put_index(self, row: IndexRow) -> None:
        self._live()
        deadline = time.monotonic() + reconnect.RECONNECT_SECONDS

        def attempt() -> None:
            while True:
                try:
                    sql = self._store.index_sql
                    self._live().execute(sql.upsert, upsert_params(self._key, row, apart=sql.apart))
                    return
                except psycopg.Error as e:
                    if not self._dropped():
                        raise self._refused("cannot index", e) from None
                    self._take_back(e, self._left()[:1], deadline)  # an upsert made twice writes the same row

        self._short_waited(attempt, deadline)
        self._settings_sent = row.settings

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: IndexRow | None = None) -> None:
        self._live()
        deadline = time.monotonic() + reconnect.RECONNECT_SECONDS

        def attempt() -> int:
            while True:
                try:
                    return self._append_once(lines, first_seq, sync, index)
                except psycopg.Error as e:
                    if not self._dropped():
                        # One autocommit statement: refused (for a shortage, say), it wrote nothing,
                        # so making it again is exact.
                        raise self._refused("cannot write", e) from None
                    if self._take_back(e, self._left(lines, first_seq), deadline):
                        return len(lines)

        written = self._short_waited(attempt, deadline)
        if written != len(lines):
            # Not the backend that took the lock: a pooling proxy swapped sessions under us.
            self._lost = "the connection is no longer the session that took the lease (a transaction-pooling proxy?)"
            raise self._lost_error(self._lost)
        self._next, self._last = first_seq + len(lines), lines[-1][:-1]
        if index is not None:
            self._settings_sent = index.settings

    def _append_once(self, lines: Sequence[bytes], first_seq: int, sync: bool, index: IndexRow | None) -> int:
        """One try of ``append`` on the current session: how many lines it wrote."""
        cursor = self._cursor
        if index is None and sync is not self._sync:
            cursor.execute("SET synchronous_commit TO on" if sync else "SET synchronous_commit TO off")
            self._sync = sync
        if index is not None:
            sql = self._store.index_sql
            params = upsert_params(self._key, index, settings=not slim_since(index, self._settings_sent), apart=sql.apart)
            params.update(seq=first_seq, backend=self._backend, notify=wakes_workers(index), commit="on" if sync else "off")
            if len(lines) == 1:
                cursor.execute(sql.append_one, {**params, "line": lines[0][:-1]}, prepare=True)
            else:
                cursor.execute(sql.append_many, {**params, "lines": [line[:-1] for line in lines]})
            return int(cursor.fetchone()[0])  # type: ignore[index]
        if len(lines) == 1:
            cursor.execute(_INSERT_ONE, (self._key, first_seq, lines[0][:-1], self._backend), prepare=True)
        else:
            cursor.execute(_INSERT_MANY, (self._key, first_seq, [line[:-1] for line in lines], self._backend))
        return cursor.rowcount

    def append_pair(
        self, lines: Sequence[bytes], first_seq: int, other: PostgresWriter, other_lines: Sequence[bytes], other_first: int, *,
        sync: bool, index: IndexRow | None = None, other_index: IndexRow | None = None,
    ) -> None:  # fmt: skip
        """Append to this run and to ``other`` in one transaction of this connection.

        ``other``'s lease lives in its own session: its rows are written only while that
        session still holds its advisory lock, as ``pg_locks`` says, so the pair is written
        whole under both leases or not at all. Either session found dropped takes its lease
        back (``append``), and the pair is made again, once."""
        self._live()
        other._live()
        deadline = time.monotonic() + reconnect.RECONNECT_SECONDS

        def attempt() -> None:
            while True:
                try:
                    if self._pair_once(lines, first_seq, other, other_lines, other_first, sync, index, other_index):
                        return
                except psycopg.Error as e:
                    if not self._dropped():
                        raise self._refused("cannot write", e) from None  # the transaction, refused, was rolled back whole
                    if self._take_back(e, self._left(lines, first_seq), deadline):
                        return  # committed, and with it ``other``'s lines: one transaction wrote both
                    continue
                if not other._taken_back(other_first, deadline):
                    self._lost = "a lease was not held by the session that took it (a transaction-pooling proxy?)"
                    raise self._lost_error(self._lost)

        self._short_waited(attempt, deadline)
        self._next, other._next = first_seq + len(lines), other_first + len(other_lines)
        self._last, other._last = lines[-1][:-1], other_lines[-1][:-1]

    def _pair_once(
        self, lines: Sequence[bytes], first_seq: int, other: PostgresWriter, other_lines: Sequence[bytes], other_first: int,
        sync: bool, index: IndexRow | None, other_index: IndexRow | None,
    ) -> bool:  # fmt: skip
        """One try of ``append_pair`` on the current sessions: whether both leases were held (else nothing is written)."""
        conn = self._live()
        try:
            with conn.transaction():
                conn.execute("SET LOCAL synchronous_commit TO on" if sync else "SET LOCAL synchronous_commit TO off")
                mine = conn.execute(_INSERT_MANY, (self._key, first_seq, [line[:-1] for line in lines], self._backend))
                theirs = conn.execute(
                    _INSERT_HELD,
                    (other._key, other_first, [line[:-1] for line in other_lines], self._store.lock_space, other._key, other._backend),
                )
                if mine.rowcount != len(lines) or theirs.rowcount != len(other_lines):
                    raise _NotHeld
                for key, row in ((self._key, index), (other._key, other_index)):
                    if row is not None:
                        sql = self._store.index_sql
                        conn.execute(sql.upsert, upsert_params(key, row, apart=sql.apart))
                        if wakes_workers(row):
                            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, row.run_id))
        except _NotHeld:
            return False
        return True

    def _taken_back(self, first_seq: int, deadline: float) -> bool:
        """Whether this writer's session had dropped and its lease is taken back, the log ending
        before ``first_seq`` (a pair refused wrote nothing); False if the session is alive."""
        conn = self._live()
        try:
            conn.execute("SELECT 1")
        except psycopg.Error as e:
            if not self._dropped():
                raise self._store.error("cannot write", e, self._run_id, on=self._conn) from None
            self._take_back(e, self._left((), first_seq)[:1], deadline)
            return True
        return False

    def truncate(self, keep: int) -> None:
        self._live()
        deadline = time.monotonic() + reconnect.RECONNECT_SECONDS

        def attempt() -> None:
            while True:
                try:
                    self._live().execute(
                        "DELETE FROM nb_durable_events WHERE run = %s AND seq >= %s AND pg_backend_pid() = %s",
                        (self._key, keep, self._backend),
                    )
                    return
                except psycopg.Error as e:
                    if not self._dropped():
                        raise self._refused("cannot truncate", e) from None
                    # Done (the log ends before ``keep``) or not (it ends with the very line this
                    # writer read or wrote last): deleting again is then harmless; a log another writer
                    # cut and wrote anew meanwhile is refused, never cut a second time.
                    done: reconnect.Ending = [(keep - 1, None)] if keep > 0 else []
                    undone: reconnect.Ending = [(seq, None) for seq in range(max(keep - 1, 0), self._next - 1)]
                    self._take_back(e, [done, [*undone, (self._next - 1, self._last)]] if self._last is not None else [done], deadline)

        self._short_waited(attempt, deadline)
        if keep < self._next:
            self._next, self._last = keep, None

    def delete(self) -> None:
        # The run's row stays (its key, with no events, lists as no run): a writer racing this
        # delete for the lease then writes under a key that still names the run, never a vanished one.
        try:
            conn = self._live()
            try:
                with conn.transaction():
                    conn.execute("SET LOCAL synchronous_commit TO on")
                    conn.execute(
                        "DELETE FROM nb_durable_events WHERE run = %s AND pg_backend_pid() = %s", (self._key, self._backend)
                    )
                    conn.execute("DELETE FROM nb_durable_index WHERE run = %s", (self._key,))
                    conn.execute(
                        "UPDATE nb_durable_runs SET holder_pid = NULL, holder_host = NULL, holder_since = NULL, "
                        "holder_backend = NULL WHERE id = %s",
                        (self._key,),
                    )
            except psycopg.Error as e:
                raise self._failed("delete", e) from None
        finally:
            self.close()

