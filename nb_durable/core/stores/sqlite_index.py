"""The SQLite store's run index: a table of rows written in each append's transaction.

``nb_durable_index`` holds one row per run (``core.index.rows.IndexRow`` as JSON, with the
columns a listing or a claim filters and orders by). A database from before the index is
migrated on open: the table is created and filled from the events in one ``BEGIN IMMEDIATE``
transaction, so concurrent first openers migrate once. The claim (``claim``) picks a worker's
next runs with one indexed query and marks them claimed for a few seconds in the same
transaction, so two workers polling together pick different runs; the lease still decides.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ...errors import LogCorruptedError, StoreError
from ..history import History
from ..index.cursor import sort_time
from ..index.rows import GOING, IndexRow, RunFilter, row_of
from .base import StoredLog
from .sqlite_file import Followed

__all__ = ["WakeWatch", "claim", "column_drift", "list_rows", "migrate", "rows", "upsert"]

_TABLE = """
CREATE TABLE nb_durable_index (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    ended INTEGER NOT NULL,
    pending INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    queued_at REAL,
    updated_at REAL,
    batch TEXT,
    parent TEXT,
    claimed_until REAL NOT NULL DEFAULT 0,
    data TEXT NOT NULL
);
CREATE INDEX nb_durable_index_claim ON nb_durable_index (priority DESC, queued_at) WHERE pending;
CREATE INDEX nb_durable_index_updated ON nb_durable_index (updated_at DESC);
CREATE INDEX nb_durable_index_batch ON nb_durable_index (batch, updated_at DESC);
CREATE INDEX nb_durable_index_parent ON nb_durable_index (parent) WHERE parent IS NOT NULL;
"""

_UPSERT = (
    "INSERT INTO nb_durable_index (run_id, status, ended, pending, priority, queued_at, updated_at, batch, parent, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
    "ended = excluded.ended, pending = excluded.pending, priority = excluded.priority, queued_at = excluded.queued_at, "
    "updated_at = excluded.updated_at, batch = excluded.batch, parent = excluded.parent, claimed_until = 0, "
    # A row sent without its settings keeps those already stored (core.index.rows.slim_since).
    "data = CASE WHEN json_type(excluded.data, '$.settings') IS NOT NULL THEN excluded.data ELSE "
    "json_set(excluded.data, '$.settings', json(COALESCE(json_extract(nb_durable_index.data, '$.settings'), '{}'))) END"
)


_FILTERED = ("run_id", "status", "ended", "pending", "priority", "queued_at", "updated_at", "batch", "parent")
"""The columns a listing or a claim reads instead of the row: each written from the row by ``_params``."""


def _params(row: IndexRow, settings: bool) -> tuple[Any, ...]:
    return (
        row.run_id, row.status, row.ended, row.pending, row.priority, row.queued_at, sort_time(row.updated_at),
        row.batch, row.parent, row.encoded(settings=settings),
    )


def upsert(conn: sqlite3.Connection, row: IndexRow, *, settings: bool = True) -> None:
    """Write a run's row (inside the caller's transaction); its settings left out unless ``settings``."""
    conn.execute(_UPSERT, _params(row, settings))


def migrate(conn: sqlite3.Connection) -> None:
    """Create the index table and fill it from the events, once, if it is missing."""
    if _exists(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        if not _exists(conn):
            for statement in filter(str.strip, _TABLE.split(";")):
                conn.execute(statement)
            run_ids = [r[0] for r in conn.execute("SELECT DISTINCT run_id FROM nb_durable_events")]
            for run_id in run_ids:
                lines = [bytes(r[0]) for r in conn.execute(
                    "SELECT line FROM nb_durable_events WHERE run_id = ? ORDER BY seq", (run_id,)
                )]
                try:
                    history = History.load(run_id, StoredLog.from_lines(lines, run_id))
                except LogCorruptedError:
                    continue  # a damaged log gets no row; readers warn about it
                upsert(conn, row_of(history))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _exists(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'nb_durable_index'").fetchone() is not None


def _decode(data: Iterable[tuple[Any, ...]]) -> list[IndexRow]:
    return [IndexRow.from_json(json.loads(r[0])) for r in data]


def rows(conn: sqlite3.Connection, run_ids: Sequence[str] | None) -> list[IndexRow]:
    """The rows of ``run_ids`` (every row when None)."""
    if run_ids is None:
        return _decode(conn.execute("SELECT data FROM nb_durable_index"))
    return _decode(
        conn.execute("SELECT data FROM nb_durable_index WHERE run_id IN (SELECT value FROM json_each(?))", (json.dumps(list(run_ids)),))
    )


def column_drift(conn: sqlite3.Connection) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Each run whose filter columns say other than its row, with each such column's
    (stored, the row's) values: what an edit by hand leaves, and a listing would filter by."""
    out = {}
    for stored in conn.execute(f"SELECT {', '.join(_FILTERED)}, data FROM nb_durable_index"):
        row = IndexRow.from_json(json.loads(stored[-1]))
        wanted = _params(row, settings=False)[: len(_FILTERED)]
        differ = {name: (got, want) for name, got, want in zip(_FILTERED, stored, wanted, strict=False) if got != want}
        if differ:
            out[row.run_id] = differ
    return out


def _where(wanted: RunFilter, held: Mapping[str, str]) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if wanted.statuses:
        # As core.runs.live_status says: waiting whatever the log, running only if unfinished.
        others = [s for s in wanted.statuses if s not in GOING]
        held_json = json.dumps(list(held))
        waiting_json = json.dumps([r for r, s in held.items() if s == "waiting"])
        said = []
        if "running" in wanted.statuses:
            said.append("(NOT ended AND run_id IN (SELECT value FROM json_each(?)))")
            params.append(json.dumps([r for r, s in held.items() if s == "running"]))
        if "waiting" in wanted.statuses:
            said.append("(run_id IN (SELECT value FROM json_each(?)))")
            params.append(waiting_json)
        if others:
            said.append(
                "(status IN (SELECT value FROM json_each(?)) AND run_id NOT IN (SELECT value FROM json_each(?)) "
                "AND (ended OR run_id NOT IN (SELECT value FROM json_each(?))))"
            )
            params += [json.dumps(others), waiting_json, held_json]
        clauses.append("(" + " OR ".join(said) + ")")
    if wanted.batch is not None:
        clauses.append("batch = ?")
        params.append(wanted.batch)
    if wanted.parent is not None:
        clauses.append("parent IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(wanted.parent)))
    if wanted.run_ids is not None:
        clauses.append("run_id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(wanted.run_ids)))
    for tag in wanted.tags:
        clauses.append("EXISTS (SELECT 1 FROM json_each(json_extract(data, '$.tags')) t WHERE t.value = ?)")
        params.append(tag)
    if wanted.after is not None:
        # The listing's order past the cursor; "updated_at <= ?" on its own is what lets the
        # updated_at index start the scan at the cursor (with an OR alone it sorts every row).
        clauses.append("updated_at <= ? AND (updated_at < ? OR run_id > ?)")
        params += [wanted.after.updated_at, wanted.after.updated_at, wanted.after.run_id]
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def list_rows(conn: sqlite3.Connection, wanted: RunFilter, held: Mapping[str, str]) -> list[IndexRow]:
    """The rows ``wanted`` picks, most recently updated first, one page of them (``held``: each
    run whose lease is held, and what it does: running or waiting)."""
    where, params = _where(wanted, held)
    page = ""
    if wanted.limit is not None:
        page = " LIMIT ? OFFSET ?"
        params += [wanted.limit, wanted.offset]
    elif wanted.offset:
        page = " LIMIT -1 OFFSET ?"
        params.append(wanted.offset)
    return _decode(conn.execute(f"SELECT data FROM nb_durable_index{where} ORDER BY updated_at DESC, run_id{page}", params))


_SQLITE_BUSY = 5
_NAP = 0.05
"""Seconds a claim waits for the write lock inside SQLite before it looks again from Python."""


def _begin_within(conn: sqlite3.Connection, wait: float, stop: Callable[[], bool]) -> bool:
    """``BEGIN IMMEDIATE``, waiting up to ``wait`` s for the write lock in short naps, not in one
    busy wait inside SQLite: a worker's signal handlers run only between Python's steps, so an idle
    worker whose claim met a lock held elsewhere heard neither SIGTERM nor the second signal that
    ends it at once for the 30 s of the connection's busy timeout. False, with no transaction
    begun, once ``stop()`` says the caller wants nothing any more (a worker stopping)."""
    deadline = time.monotonic() + wait
    (kept,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout = {int(_NAP * 1000)}")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return True
            except sqlite3.OperationalError as e:
                if getattr(e, "sqlite_errorcode", 0) & 0xFF != _SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
                if stop():
                    return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(kept)}")


def claim(
    conn: sqlite3.Connection,
    limit: int,
    *,
    exclude: Sequence[str],
    tags: Sequence[str],
    idle_before: float,
    hold: float,
    wait: float,
    stop: Callable[[], bool],
) -> list[IndexRow]:
    """Up to ``limit`` runs a worker may take, highest priority first, then the first in line,
    marked claimed for ``hold`` seconds in the same ``BEGIN IMMEDIATE`` transaction (0: a look),
    its write lock waited for up to ``wait`` s, or until ``stop()`` (then none)."""
    now = time.time()
    tag_sql = "".join(
        " AND EXISTS (SELECT 1 FROM json_each(json_extract(data, '$.tags')) t WHERE t.value = ?)" for _ in tags
    )
    if not _begin_within(conn, wait, stop):
        return []
    try:
        found = conn.execute(
            "SELECT run_id, data FROM nb_durable_index WHERE pending AND claimed_until < ? "
            "AND updated_at <= ? AND run_id NOT IN (SELECT value FROM json_each(?))" + tag_sql +
            " ORDER BY priority DESC, queued_at LIMIT ?",
            (now, idle_before, json.dumps(list(exclude)), *tags, limit),
        ).fetchall()
        if hold > 0:
            conn.executemany("UPDATE nb_durable_index SET claimed_until = ? WHERE run_id = ?", [(now + hold, r[0]) for r in found])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return _decode((r[1],) for r in found)


class WakeWatch:
    """What a sleeping worker watches on SQLite, which cannot notify: a mark that changes when
    a run becomes takeable by a write alone (submitted, or stopped by a worker: the rows a
    PostgreSQL append would NOTIFY about). ``PRAGMA data_version`` (no table read) says
    whether anything was committed since the last look; only then is the mark read again,
    with the claim's partial index. A killed writer's run is left to the polls: its lease is a
    file lock, and its end changes nothing in the database. The connection follows the file at
    the store's path (``sqlite_file.Followed``): with none there the mark is empty, and the runs
    of a file made there again are marked as soon as it is."""

    def __init__(self, conn: Followed) -> None:
        self._conn = conn
        self._read: sqlite3.Connection | None = None  # the connection the version below is of
        self._version: int | None = None
        self._mark: tuple[Any, ...] = ()

    def mark(self) -> tuple[Any, ...]:
        """The takeable-by-write runs' count and newest change (unchanged: nothing to wake for)."""
        try:
            conn = self._conn()
        except StoreError:  # deleted: a poll now says so; a file made there again changes the mark
            self._read = None
            return ()
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if conn is not self._read or version != self._version:
            self._read, self._version = conn, version
            self._mark = tuple(
                conn.execute(
                    "SELECT count(*), max(updated_at) FROM nb_durable_index WHERE pending AND (status = 'queued' OR ended)"
                ).fetchone()
            )
        return self._mark

    def close(self) -> None:
        self._conn.close()
