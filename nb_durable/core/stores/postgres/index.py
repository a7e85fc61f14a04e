"""The PostgreSQL store's run index: a row per run, written by the same statement as its events.

``nb_durable_index`` (migration 3) holds ``core.index.rows.IndexRow`` as jsonb, with the columns
a listing or a claim filters and orders by, keyed by the run's integer key. A writer's append
is one statement (a CTE inserting the events and upserting the row), so the index and the log
commit together; a row that becomes ``pending`` (a submitted run, a worker's graceful stop)
also sends ``NOTIFY nb_durable_runs`` with the run id, delivered on that commit, so idle
workers wake at once. A database from before the index is filled from its events in the
migration's own transaction.

The claim: one indexed ``SELECT ... FOR UPDATE SKIP LOCKED`` of the pending runs whose lease
is free (no advisory lock granted on them), highest priority first, then the longest waiting,
marked claimed for a few seconds in that transaction, so workers polling together take
different runs; the lease, taken next, still decides who writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from ....errors import LogCorruptedError
from ...history import History
from ...index.cursor import sort_time
from ...index.rows import GOING, IndexRow, RunFilter, row_of
from ..base import StoredLog

__all__ = [
    "APPEND_MANY", "APPEND_ONE", "CHANNEL", "DRIFT_SQL", "INDEX_TABLE", "UPSERT", "backfill", "claim_sql", "column_drift",
    "list_sql", "rows_sql", "upsert_params", "wakes_workers",
]  # fmt: skip

CHANNEL = "nb_durable_runs"
"""The LISTEN/NOTIFY channel: its payload is the id of a run a worker may take now."""

INDEX_TABLE = """
CREATE TABLE nb_durable_index (
    run integer PRIMARY KEY,
    run_id text NOT NULL UNIQUE,
    status text NOT NULL,
    ended boolean NOT NULL,
    pending boolean NOT NULL,
    priority integer NOT NULL,
    queued_at double precision,
    updated_at double precision,
    batch text,
    parent text,
    tags jsonb NOT NULL DEFAULT '[]',
    claimed_until double precision NOT NULL DEFAULT 0,
    data jsonb NOT NULL
);
CREATE INDEX nb_durable_index_claim ON nb_durable_index (priority DESC, queued_at) WHERE pending;
CREATE INDEX nb_durable_index_updated ON nb_durable_index (updated_at DESC);
CREATE INDEX nb_durable_index_batch ON nb_durable_index (batch, updated_at DESC);
CREATE INDEX nb_durable_index_parent ON nb_durable_index (parent) WHERE parent IS NOT NULL;
"""

_COLUMNS = "run, run_id, status, ended, pending, priority, queued_at, updated_at, batch, parent, tags, data"
_VALUES = (
    "%(run)s, %(run_id)s, %(status)s, %(ended)s, %(pending)s, %(priority)s, %(queued_at)s, %(updated_at)s, "
    "%(batch)s, %(parent)s, %(tags)s::jsonb, %(data)s::jsonb"
)
UPSERT = (
    f"INSERT INTO nb_durable_index ({_COLUMNS}) VALUES ({_VALUES}) ON CONFLICT (run) DO UPDATE SET "
    "status = excluded.status, ended = excluded.ended, pending = excluded.pending, priority = excluded.priority, "
    "queued_at = excluded.queued_at, updated_at = excluded.updated_at, batch = excluded.batch, "
    "parent = excluded.parent, tags = excluded.tags, claimed_until = 0, "
    # A row sent without its settings keeps those already stored (core.index.rows.slim_since).
    "data = CASE WHEN excluded.data ? 'settings' THEN excluded.data ELSE excluded.data || "
    "jsonb_build_object('settings', COALESCE(nb_durable_index.data -> 'settings', '{}'::jsonb)) END"
)


_INDEXED = (
    ", idx AS (INSERT INTO nb_durable_index (" + _COLUMNS + ") SELECT " + _VALUES + " WHERE EXISTS (SELECT 1 FROM ins) "
    + UPSERT[UPSERT.index("ON CONFLICT"):] + " RETURNING 1) "
    "SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM idx), "
    "CASE WHEN %(notify)s AND EXISTS (SELECT 1 FROM ins) THEN pg_notify('" + CHANNEL + "', %(run_id)s) END, "
    # This statement's own transaction commits with the durability its append asks for: no
    # SET before it, so a step's unsynced intent then synced result costs no extra round trips.
    "set_config('synchronous_commit', %(commit)s, true)"
)
APPEND_ONE = (
    "WITH ins AS (INSERT INTO nb_durable_events (run, seq, line) SELECT %(run)s, %(seq)s, %(line)s "
    "WHERE pg_backend_pid() = %(backend)s RETURNING 1)" + _INDEXED
)
"""One event and the run's row, in one statement (so one transaction): the row only if the event went in."""
APPEND_MANY = (
    "WITH ins AS (INSERT INTO nb_durable_events (run, seq, line) "
    "SELECT %(run)s, %(seq)s + t.n - 1, t.line FROM unnest(%(lines)s::bytea[]) WITH ORDINALITY AS t(line, n) "
    "WHERE pg_backend_pid() = %(backend)s RETURNING 1)" + _INDEXED
)


def wakes_workers(row: IndexRow) -> bool:
    """Whether writing this row makes a run takeable by a worker now (submitted, or stopped by one)."""
    return row.pending and (row.status == "queued" or row.ended)


def upsert_params(run: int, row: IndexRow, *, settings: bool = True) -> dict[str, Any]:
    """The parameters of ``UPSERT`` for a run's row (``run``: its integer key), the row's
    settings left out unless ``settings``."""
    return {
        "run": run,
        "run_id": row.run_id,
        "status": row.status,
        "ended": row.ended,
        "pending": row.pending,
        "priority": row.priority,
        "queued_at": row.queued_at,
        "updated_at": sort_time(row.updated_at),  # never NULL, which this descending order put first
        "batch": row.batch,
        "parent": row.parent,
        "tags": json.dumps(list(row.tags)),
        "data": row.encoded(settings=settings),
    }


_FILTERED = ("run_id", "status", "ended", "pending", "priority", "queued_at", "updated_at", "batch", "parent", "tags")
"""The columns a listing or a claim reads instead of the row: each written from it by ``upsert_params``."""
DRIFT_SQL = f"SELECT {', '.join(_FILTERED)}, data FROM nb_durable_index"
"""What ``column_drift`` compares: every row's filter columns and its data."""


def column_drift(stored: Sequence[tuple[Any, ...]]) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Each run whose filter columns (``DRIFT_SQL``'s rows) say other than its row, with each
    such column's (stored, the row's) values: what an edit by hand leaves, and a listing would filter by."""
    out = {}
    for found in stored:
        row = IndexRow.from_json(found[-1])
        wanted = upsert_params(0, row, settings=False)
        wanted["tags"] = list(row.tags)  # as the jsonb column reads back
        differ = {name: (got, wanted[name]) for name, got in zip(_FILTERED, found, strict=False) if got != wanted[name]}
        if differ:
            out[row.run_id] = differ
    return out


def backfill(conn: psycopg.Connection[Any]) -> None:
    """Fill the new index from every run's events (inside the migration's transaction)."""
    runs = conn.execute("SELECT id, run_id FROM nb_durable_runs").fetchall()
    for run, run_id in runs:
        lines = [bytes(r[0]) for r in conn.execute("SELECT line FROM nb_durable_events WHERE run = %s ORDER BY seq", (run,))]
        if not lines:
            continue
        try:
            history = History.load(run_id, StoredLog.from_lines(lines, run_id))
        except LogCorruptedError:
            continue  # a damaged log gets no row; readers warn about it
        conn.execute(UPSERT, upsert_params(run, row_of(history)))


def rows_sql(run_ids: Sequence[str] | None) -> tuple[str, Any]:
    """The query of the rows of ``run_ids`` (every row when None), and its parameters."""
    if run_ids is None:
        return "SELECT data FROM nb_durable_index", ()
    return "SELECT data FROM nb_durable_index WHERE run_id = ANY(%s)", (list(run_ids),)


def list_sql(wanted: RunFilter, held: Mapping[str, str]) -> tuple[str, Any]:
    """The rows ``wanted`` picks, most recently updated first, one page of them (``held``: each
    run whose lease is held, and what it does: running or waiting)."""
    clauses: list[str] = []
    params: dict[str, Any] = {"held": list(held), "waiting": [r for r, s in held.items() if s == "waiting"]}
    if wanted.statuses:
        # As core.runs.live_status says: waiting whatever the log, running only if unfinished.
        said = []
        if "running" in wanted.statuses:
            params["running"] = [r for r, s in held.items() if s == "running"]
            said.append("(NOT ended AND run_id = ANY(%(running)s))")
        if "waiting" in wanted.statuses:
            said.append("(run_id = ANY(%(waiting)s))")
        others = [s for s in wanted.statuses if s not in GOING]
        if others:
            params["others"] = others
            said.append(
                "(status = ANY(%(others)s) AND NOT run_id = ANY(%(waiting)s) AND (ended OR NOT run_id = ANY(%(held)s)))"
            )
        clauses.append("(" + " OR ".join(said) + ")")
    if wanted.batch is not None:
        clauses.append("batch = %(batch)s")
        params["batch"] = wanted.batch
    if wanted.parent is not None:
        clauses.append("parent = ANY(%(parent)s)")
        params["parent"] = list(wanted.parent)
    if wanted.run_ids is not None:
        clauses.append("run_id = ANY(%(run_ids)s)")
        params["run_ids"] = list(wanted.run_ids)
    if wanted.tags:
        clauses.append("tags @> %(tags)s::jsonb")
        params["tags"] = json.dumps(list(wanted.tags))
    if wanted.after is not None:
        # The listing's order past the cursor, its first term a range the updated_at index starts at.
        clauses.append('updated_at <= %(after_at)s AND (updated_at < %(after_at)s OR run_id COLLATE "C" > %(after_run)s)')
        params["after_at"], params["after_run"] = wanted.after.updated_at, wanted.after.run_id
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    page = " OFFSET %(offset)s"
    params["offset"] = wanted.offset
    if wanted.limit is not None:
        page += " LIMIT %(limit)s"
        params["limit"] = wanted.limit
    return f'SELECT data FROM nb_durable_index{where} ORDER BY updated_at DESC, run_id COLLATE "C"{page}', params


_CLAIM = """
WITH picked AS (
    SELECT i.run FROM nb_durable_index i
    WHERE i.pending AND i.claimed_until < extract(epoch FROM clock_timestamp()) AND i.queued_at <= %(idle_before)s
      AND NOT (i.run_id = ANY(%(exclude)s)) AND i.tags @> %(tags)s::jsonb
      AND NOT EXISTS (
        SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = %(space)s::oid AND l.objid = i.run::oid AND l.objsubid = 2 AND l.granted)
    ORDER BY i.priority DESC, i.queued_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE nb_durable_index i SET claimed_until = extract(epoch FROM clock_timestamp()) + %(hold)s
FROM picked WHERE i.run = picked.run
RETURNING i.priority, i.queued_at, i.data
"""


def claim_sql(
    space: int, limit: int, *, exclude: Sequence[str], tags: Sequence[str], idle_before: float, hold: float
) -> tuple[str, Any]:
    """The claim of up to ``limit`` pending runs with a free lease, each for ``hold`` seconds (0: a look)
    (one statement, so one transaction in autocommit), and its parameters."""
    params = {
        "idle_before": idle_before if idle_before != float("inf") else 1e300,
        "exclude": list(exclude),
        "tags": json.dumps(list(tags)),
        "space": space,
        "limit": limit,
        "hold": hold,
    }
    return _CLAIM, params
