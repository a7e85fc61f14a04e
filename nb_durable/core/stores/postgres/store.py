"""The PostgreSQL store: its connections, and the lease each writer holds in its own session.

The lease is a session-level advisory lock held by the writer's own connection, keyed in the
two-int form (the runs table's oid, the run's integer key). Within a database that pair is
unique to one run (two schemas have two tables, so two oids; advisory locks are per database),
so two runs never share a lock, unlike a hash of the run id. The server drops the lock the
moment the connection ends, so a crashed kernel's lease vanishes with it. After taking the lock
the writer records (pid, host, since, its backend pid) in the run's row; readers believe that
row only while pg_locks shows that very backend holding the lock, so a stale row never names a
dead holder (nor what a dead holder asked a person: ``holder_asking``, ``core.holders``).
Closing a writer unlocks before anything else (a closed connection's lock is freed
only when its backend exits, a moment later) and keeps the session as one of the store's spares,
so reopening a run, as a notebook cell run twice does, needs no new connection. The store's
shared rate limits (``limiter()``) hold their call slots in one more session of their own.
Taking the lease is ``opening``'s; a dropped connection, on any path, is ridden out by ``reconnect``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import psycopg
import psycopg.errors
from psycopg import conninfo as pg_conninfo

from ....errors import StoreError, StoreNameError
from ...holders import holder_is_alive, this_holder
from ...index.rows import CLAIM_SECONDS, IndexRow, RunFilter
from ..base import ClosingStore, StoredLog, check_run_id, not_found
from . import index, listening, opening
from .holder_rows import HELD_SQL, HOLDER_SQL, LEFT_SQL, holder_of
from .limiter import PostgresLimiter
from .listening import Listening
from .reconnect import Dropped, Gone, Refused, dropped, ride_out
from .schema import LINES_SQL, RUN_IDS_SQL, VERSION_SQL, creation_refused, migrate
from .urls import CHECK_CONNECTION, advice, password_in, refused_setup, safe_url, scrub, short_of
from .writer import PostgresWriter

__all__ = ["PostgresStore"]

_CONNECT_TIMEOUT = "10"  # libpq waits for an unreachable host for minutes by default
_ANSWERED: set[str] = set()  # the URLs whose server answered this process: a refusal then is a restart

# A writer's session: the server drops the lock when it sees the connection end, but a
# kernel's machine that vanishes sends no goodbye, so the server probes an idle connection
# (noticing in about 30 s instead of the OS default of hours; TCP only). Commits are
# asynchronous unless an append asks to be synced (the lease row needs no fsync: a server
# crash ends every lease anyway). The session idles through every step (a model call, a long
# tool), so a server's idle_session_timeout (PostgreSQL 14+) would end it, and the lease with it,
# mid-step: it is off for these sessions, where the server knows it.
_SESSION_SETUP = (
    "SET tcp_keepalives_idle = 15; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3; "
    "SET synchronous_commit TO off; SELECT set_config('idle_session_timeout', '0', false) "
    "WHERE current_setting('idle_session_timeout', true) IS NOT NULL"
)
# Releasing a lease also turns synchronous commits off again, so the next writer of the
# session writes its lease row without waiting for a flush: one round trip for both.


_CHECK_IT_RUNS = " Check that the server runs, then try again."

class PostgresStore(ClosingStore):
    """Runs as rows of a PostgreSQL database; the lease is an advisory lock of the writer's session."""

    shared_by_threads = True
    """Whether threads may share one open store: its reads go through psycopg's locked connection,
    each writer has a session of its own (``agent.fleet.thread_stores``)."""

    def __init__(self, url: str, *, existing: bool = False) -> None:
        self.url = safe_url(url)
        self._existing = existing  # a reader's: tables not there yet are not made (``open_store``)
        try:
            params = pg_conninfo.conninfo_to_dict(url)
        except psycopg.Error as e:
            raise StoreNameError(
                f"{self.url} is not a PostgreSQL URL psycopg accepts: {scrub(e, password_in(url))}. "
                "Write postgresql://user:password@host:5432/database (optionally ?options=-csearch_path%3Dschema)."
            ) from None
        self._conninfo = url
        password = params.get("password")
        self._password = str(password) if password else None
        host = params.get("host") or os.environ.get("PGHOST") or "localhost"
        port = params.get("port") or os.environ.get("PGPORT") or "5432"
        self.where = f"host {host}, port {port}, database {params.get('dbname') or params.get('user') or '(default)'}"
        """Where the server is (host, port, database), as messages name it: never the password."""
        self._extra: dict[str, Any] = {}
        if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in os.environ:
            self._extra["connect_timeout"] = _CONNECT_TIMEOUT
        if "application_name" not in params and "PGAPPNAME" not in os.environ:
            self._extra["application_name"] = "nb_durable"
        # Sessions closed writers left, for the next writers. A new session is made only when none
        # is kept, so open writers and kept sessions never outnumber the most writers open at once
        # (a worker's --concurrency): one kept session for two run threads made one anew per run.
        self._spares: list[psycopg.Connection[Any]] = []
        self._spare_lock = threading.Lock()
        self._reading_lock = threading.Lock()
        self._limiter: PostgresLimiter | None = None
        self._closed = False
        self._conn, oid = self._first_connection()
        version = self.schema_version
        self.keeps_index = version >= 3
        """Whether the database has the run index (a store opened with an older schema list has not)."""
        self.marks_asking = version >= 5
        """Whether the runs table has ``holder_asking`` (an older schema list's has not: runs read as running)."""
        self.names_program = version >= 6
        """Whether the runs table has ``holder_program`` (an older schema list's has not: no advice by program)."""
        self.index_sql = index.layout(version)  # the index's statements for its table's layout (settings apart from schema 7)
        columns = {
            "asking": "r.holder_asking" if self.marks_asking else "NULL",
            "program": "r.holder_program" if self.names_program else "NULL",
        }
        self._holder_sql, self._held_sql = HOLDER_SQL.format(**columns), HELD_SQL.format(**columns)
        self.lock_space = oid - 2**32 if oid >= 2**31 else oid
        """The first int4 of every advisory lock key of this store (its runs table's oid)."""
        info = self._conn.info
        self.key = f"postgresql://{info.host}:{info.port}/{info.dbname}#{oid}"

    # -- connections -----------------------------------------------------------------------

    def _connect(self, run_id: str | None = None, *, riding_out: bool = False) -> psycopg.Connection[Any]:
        """A new connection; ``run_id``: the run it is for, which a failure names. ``riding_out``:
        a failure is ``Dropped`` with the driver's words alone, since the wait names the store."""
        try:
            return psycopg.connect(self._conninfo, autocommit=True, **self._extra)
        except psycopg.Error as e:
            mistake = refused_setup(e, self._conninfo)  # no such database or role, a wrong password: no wait mends it
            if mistake is not None:
                raise mistake.kind(f"cannot connect to {self.named()}: {scrub(e, self._password)}{mistake.then}.") from None
            if riding_out:
                shortage = short_of(e)
                raise (Dropped(self.scrubbed(e)) if shortage is None else Refused(self.scrubbed(e), shortage)) from None
            for_run = f" to open run {run_id!r}" if run_id else ""
            said = advice(e) or CHECK_CONNECTION  # a server short of connections or memory answered: it runs, the URL is right
            raise StoreError(f"cannot connect to {self.named()}{for_run}: {scrub(e, self._password)}{said}.") from None

    def _first_connection(self) -> tuple[psycopg.Connection[Any], int]:
        """The reading connection, the tables migrated, and the runs table's oid. A server that
        answered this process before is waited for (a restart, ridden out: ``reconnect``); one
        that never did fails at once, most often a wrong URL that waiting would not mend."""

        def attempt() -> tuple[psycopg.Connection[Any], int]:
            # A server that answered this process before is restarting: ride it out.
            conn = self._connect(riding_out=self._conninfo in _ANSWERED)
            try:
                migrate(conn, self.url, existing=self._existing)
                oid = int(conn.execute("SELECT 'nb_durable_runs'::regclass::oid").fetchone()[0])  # type: ignore[index]
            except psycopg.Error as e:
                lost = dropped(conn)  # asked before closing it: a closed connection always looks dropped
                failed = None if lost else self.error("cannot prepare the tables of", e, on=conn)  # made here: tables, never a schema
                conn.close()
                raise (Dropped(self.scrubbed(e)) if failed is None else failed) from None  # a migration's transaction left nothing half done
            except StoreError:  # refused as it is (another program's tables, a newer schema): not kept open
                conn.close()
                raise
            _ANSWERED.add(self._conninfo)
            return conn, oid

        try:
            return ride_out("reach it", attempt, store=self)
        except Gone as why:
            dropped_first = "" if why.refused else "the connection dropped, and "  # a new store's first connection
            raise StoreError(
                f"cannot connect to {self.named()}, which answered this process "
                f"before: {dropped_first}{why}.{why.then or _CHECK_IT_RUNS}"
            ) from None

    def named(self, run_id: str | None = None) -> str:
        """The store (or a run in it) as every message names it: the URL without its password,
        and where that is."""
        run = f"run {run_id!r} in " if run_id else ""
        return f"{run}the PostgreSQL store {self.url} ({self.where})"

    def scrubbed(self, e: BaseException) -> str:
        """A driver's error in words, with the store's password taken out."""
        return scrub(e, self._password)

    def error(self, doing: str, e: BaseException, run_id: str | None = None, *, on: psycopg.Connection[Any] | None = None) -> StoreError:
        """The ``StoreError`` for a failure while ``doing`` something, naming the server, never the password, with
        what to do where its settings refused it (``urls.advice``), or where the user lacks rights, as the session
        ``on`` (not dropped) tells: a ``StoreAccessError`` naming the GRANT (``schema.creation_refused``)."""
        said = f"{doing} {self.named(run_id)}: {self.scrubbed(e)}"
        refused = creation_refused(on, e) if on is not None and isinstance(e, psycopg.Error) else None
        return StoreError(f"{said}{advice(e)}") if refused is None else refused.kind(f"{said}{refused.then}.")

    def _read(self, sql: str, params: Any, run_id: str | None = None) -> list[tuple[Any, ...]]:
        """A query on the reading connection; one the server dropped is asked again on a new one
        (``reconnect.ride_out``): every query here may be (a read, a claim that lapses, a release)."""

        def attempt() -> list[tuple[Any, ...]]:
            conn = self.reading_session(riding_out=True)  # this store's server answered before: a restart
            try:
                return conn.execute(sql, params, binary=True).fetchall()
            except psycopg.Error as e:
                if not dropped(conn):
                    raise self.error("cannot read", e, run_id, on=conn) from None
                conn.close()
                raise Dropped(self.scrubbed(e)) from None

        try:
            return ride_out("read it", attempt, store=self, run_id=run_id)
        except Gone as why:
            raise StoreError(f"cannot read {self.named(run_id)}: the connection dropped, and {why}.{why.then or _CHECK_IT_RUNS}") from None

    @property
    def reading(self) -> psycopg.Connection[Any]:
        """The reading connection now (the worker's threads share it: psycopg's lock orders their queries)."""
        return self._conn

    def reading_session(self, *, riding_out: bool = False) -> psycopg.Connection[Any]:
        """The reading connection, connected again first if it was lost (``_connect``'s ``riding_out``)."""
        with self._reading_lock:  # two threads finding it closed open one connection, not two
            if self._conn.closed:
                self._conn = self._connect(riding_out=riding_out)
            return self._conn

    def close(self) -> None:
        """Close the reading connection, the spare ones and the limiter's (open writers keep their own)."""
        with self._spare_lock:
            self._closed = True
            spares, self._spares = self._spares, []
            limiter, self._limiter = self._limiter, None
        for spare in spares:
            spare.close()
        if limiter is not None:
            limiter.close()
        self._conn.close()

    def __del__(self) -> None:
        # A store dropped without close() (read_run(url) opens one per call) ends its sessions.
        with contextlib.suppress(Exception):
            self.close()

    # -- the Store protocol ----------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """The schema version the database is at."""
        return int(self._read(VERSION_SQL, ())[0][0])

    def location(self, run_id: str) -> str:
        return f"{self.url} run {run_id}"

    def run_ids(self) -> list[str]:
        return [r[0] for r in self._read(RUN_IDS_SQL, ())]

    def load(self, run_id: str) -> StoredLog:
        check_run_id(run_id)
        lines = [r[0] for r in self._read(LINES_SQL, (run_id,), run_id)]
        if not lines:
            raise not_found(run_id, f"the PostgreSQL store {self.url}", self.run_ids(), self.url)
        return StoredLog.from_lines(lines, self.location(run_id))

    def holder(self, run_id: str) -> dict[str, Any] | None:
        check_run_id(run_id)
        state, holder, _, _ = self.lock_state(None, run_id)
        if state == "unrecorded":
            time.sleep(0.05)  # the new holder is between taking the lock and naming itself
            state, holder, _, _ = self.lock_state(None, run_id)
        if state == "unrecorded":
            return {}  # held by a writer that has not named itself: running, holder unknown
        return holder if state == "held" else None

    def lock_state(self, conn: psycopg.Connection[Any] | None, run_id: str) -> tuple[str, dict[str, Any] | None, int | None, tuple[Any, ...]]:
        """free, held (by the recorded holder), dying (its holder is a dead local process whose
        backend has not exited yet) or unrecorded (held by a backend that has not named itself);
        the holder; the backend holding the lock; and what the runs table names (holder_backend,
        pid, host, since). Read on ``conn`` (a writer's session, whose errors are its own), else
        on the reading connection."""
        params = {"space": self.lock_space, "run_id": run_id}
        rows = conn.execute(self._holder_sql, params).fetchall() if conn else self._read(self._holder_sql, params, run_id)
        if not rows or rows[0][6] is None:
            return "free", None, None, ()
        pid, host, since, backend, asking, program, locker = rows[0]
        named = (backend, pid, host, since)
        if backend != locker:
            return "unrecorded", None, locker, named
        holder = holder_of(pid, host, since, asking, program)
        return ("held" if holder_is_alive(holder) else "dying"), holder, locker, named

    def open_writer(self, run_id: str) -> PostgresWriter:
        check_run_id(run_id)
        return opening.open_writer(self, run_id)

    def name_holder(self, conn: psycopg.Connection[Any], key: int, me: dict[str, Any] | None = None) -> dict[str, Any]:
        """Record this process (``me``) and ``conn``'s session as the holder of run ``key``'s lease, just taken."""
        me = me or this_holder()
        conn.execute(
            "UPDATE nb_durable_runs SET holder_pid = %s, holder_host = %s, holder_since = %s, "
            "holder_backend = pg_backend_pid()" + (", holder_asking = NULL" if self.marks_asking else "")
            + (", holder_program = %s" if self.names_program else "") + " WHERE id = %s",
            (me["pid"], me["host"], me["since"], *([me.get("program")] if self.names_program else []), key),
        )
        return me

    def spare(self) -> psycopg.Connection[Any] | None:
        """A session a closed writer left (``give_back``), if one is kept: taken, no longer kept."""
        while True:
            with self._spare_lock:
                if not self._spares:
                    return None
                spare = self._spares.pop()
            if not (spare.closed or spare.broken):
                return spare
            spare.close()

    def session(self, run_id: str | None = None, *, riding_out: bool = False) -> psycopg.Connection[Any]:
        """A new connection whose session holds locks: a writer's lease (of ``run_id``), a limiter's
        slots. ``riding_out``: a failure is ``Dropped`` with the driver's words alone (``_connect``)."""
        conn = self._connect(run_id, riding_out=riding_out)
        try:
            conn.execute(_SESSION_SETUP)
        except psycopg.Error as e:
            conn.close()
            if riding_out:
                raise Dropped(self.scrubbed(e)) from None
            raise self.error("cannot set up a session of", e, run_id) from None
        return conn

    def held(self) -> dict[str, dict[str, Any]]:
        """Every run whose lease is held now, with its holder: one query over pg_locks."""
        found = self._read(self._held_sql, {"space": self.lock_space})
        out: dict[str, dict[str, Any]] = {}
        for run_id, pid, host, since, backend, asking, program, locker in found:
            holder = holder_of(pid, host, since, asking, program)
            if backend != locker:
                out[run_id] = {}  # held by a writer that has not named itself yet
            elif holder_is_alive(holder):
                out[run_id] = holder
        return out

    def left_by(self, run_id: str) -> dict[str, Any] | None:
        """The writer whose session ended holding run ``run_id``'s lease, unfinished, with ``restarted``:
        whether the server started since it took the lease (``LEFT_SQL``); else None."""
        found = self._read(LEFT_SQL, {"space": self.lock_space, "run_id": run_id}, run_id) if self.keeps_index else []
        if not found:
            return None
        pid, host, since, restarted = found[0]
        return {**holder_of(pid, host, since, None, None), "restarted": bool(restarted)}

    def index_rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The run index's rows (of ``run_ids``)."""
        return [IndexRow.from_json(r[0]) for r in self._read(*index.rows_sql(self.index_sql, run_ids))]

    def list_rows(self, wanted: RunFilter, held: Mapping[str, str]) -> list[IndexRow]:
        """The rows a listing wants, newest first, one page (``held``: the runs being written, each
        running or waiting)."""
        return [IndexRow.from_json(r[0]) for r in self._read(*index.list_sql(self.index_sql, wanted, held))]

    def column_drift(self) -> dict[str, dict[str, tuple[Any, Any]]]:
        """The runs whose filter columns say other than their rows (``index.column_drift``)."""
        return index.column_drift(self._read(index.drift_sql(self.index_sql), ()))

    def claim(
        self, limit: int, *, exclude: Sequence[str] = (), tags: Sequence[str] = (), idle_before: float = float("inf"), hold: float = CLAIM_SECONDS, stop: Callable[[], bool] = lambda: False
    ) -> list[IndexRow]:
        """A worker's next runs, claimed for a moment with one ``FOR UPDATE SKIP LOCKED`` query (``index``), which skips a row another session locks, never waits for it: ``stop`` is never asked."""
        sql, params = index.claim_sql(self.index_sql, self.lock_space, limit, exclude=exclude, tags=tags, idle_before=idle_before, hold=hold)
        found = self._read(sql, params)
        found.sort(key=lambda r: (-r[0], r[1] or 0.0))  # RETURNING keeps no order
        return [IndexRow.from_json(r[2]) for r in found]

    def release(self, run_ids: Sequence[str]) -> None:
        """Give claimed runs back to other workers' claims."""
        self._read("UPDATE nb_durable_index SET claimed_until = 0 WHERE run_id = ANY(%s) RETURNING run", (list(run_ids),))

    def leases_held(self, on: Listening) -> frozenset[int]:
        """The keys of the runs whose leases are held now, read on ``on`` (``listen()``'s)."""
        return on.leases_held()

    def listen(self) -> Listening:
        """The reading connection, listening on the channel ``index.CHANNEL`` (for a worker to wait on: ``listening``)."""
        return listening.listen(self)

    def limiter(self) -> PostgresLimiter:
        """Rate limits shared by every process using this database (``core.limiter``): one per
        store, its session opened at first use and closed with the store."""
        with self._spare_lock:
            if self._limiter is None:
                self._limiter = PostgresLimiter(self)
            return self._limiter

    def idle(self) -> None:
        """Close the spare sessions (kept only to open the next runs sooner): a worker with no run
        in flight holds its reading session alone, leaving the rest to other workers' runs."""
        while (spare := self.spare()) is not None:
            spare.close()

    def give_back(self, conn: psycopg.Connection[Any]) -> bool:
        """Keep a closed writer's connection (lock released, commits asynchronous again) for the
        next writer: reopening a run, as a notebook cell run twice does, then needs no new session."""
        with self._spare_lock:
            if not self._closed:
                self._spares.append(conn)
                return True
        return False
