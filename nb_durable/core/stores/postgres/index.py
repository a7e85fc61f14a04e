"""The PostgreSQL store's run index: a row per run, written by the same statement as its events.

``nb_durable_index`` (migration 3) holds ``core.index.rows.IndexRow`` as jsonb, with the columns
a listing or a claim filters and orders by, keyed by the run's integer key; from migration 7 the
row's settings (every tool's schema, most of its bytes, changed only as a session starts) sit
in a column of their own, which an append leaves as it is: rewriting them with every append
(jsonb parsed, compressed, stored out of line) was half the statement's time on the server. A writer's append
is one statement (a CTE inserting the events and upserting the row), so the index and the log
commit together; a row that becomes ``pending`` (a submitted run, a worker's graceful stop)
also sends ``NOTIFY nb_durable_runs`` with the run id, delivered on that commit, so idle
workers wake at once. A database from before the index is filled from its events in the
migration's own transaction.

The claim: one indexed ``SELECT ... FOR UPDATE SKIP LOCKED`` of the pending runs whose lease
is free (no advisory lock granted on them), highest priority first, then the oldest (queued or started first),
marked claimed for a few seconds in that transaction, so workers polling together take
different runs; the lease, taken next, still decides who writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from ....errors import LogCorruptedError
from ...history import History
from ...index.cursor import sort_time
from ...index.rows import GOING, IndexRow, RunFilter, row_of
from ..base import StoredLog
from .holder_rows import lease_lock

__all__ = [
    "APART", "CHANNEL", "INDEX_TABLE", "SETTINGS_APART", "WITHIN", "IndexSQL", "backfill", "claim_sql", "column_drift",
    "drift_sql", "index_sql", "layout", "list_sql", "rows_sql", "upsert_params", "wakes_workers",
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

_COLUMNS = "run, run_id, status, ended, pending, priority, queued_at, updated_at, batch, parent, tags"
_VALUES = (
    "%(run)s, %(run_id)s, %(status)s, %(ended)s, %(pending)s, %(priority)s, %(queued_at)s, %(updated_at)s, "
    "%(batch)s, %(parent)s, %(tags)s::jsonb"
)
_SET = (
    "status = excluded.status, ended = excluded.ended, pending = excluded.pending, priority = excluded.priority, "
    "queued_at = excluded.queued_at, updated_at = excluded.updated_at, batch = excluded.batch, "
    "parent = excluded.parent, tags = excluded.tags, claimed_until = 0, "
)


@dataclass(frozen=True, slots=True)
class IndexSQL:
    """The index's statements for one layout of its table: the row's settings in a column of their
    own (``settings``, schema 7 on), or inside ``data`` (a store opened with an older schema list)."""

    apart: bool
    """Whether the settings have their own column (``upsert_params``)."""
    upsert: str
    append_one: str
    """One event and the run's row, in one statement (so one transaction): the row only if the event went in."""
    append_many: str
    row: str
    """The expression of a stored row's JSON (``IndexRow.to_json``), for a SELECT of the table (aliased ``i``)."""


def index_sql(apart: bool) -> IndexSQL:
    """The statements of the layout with the settings ``apart`` from ``data``, or inside it."""
    if apart:
        # A row sent without its settings (``upsert_params``) keeps the stored ones: the column is
        # left as it was, so the bulk of the row is neither rewritten nor compressed again.
        columns, values = f"{_COLUMNS}, settings, data", f"{_VALUES}, COALESCE(%(settings)s::jsonb, '{{}}'::jsonb), %(data)s::jsonb"
        kept = "settings = COALESCE(%(settings)s::jsonb, nb_durable_index.settings), data = excluded.data"
        # Settings inside ``data`` win: a process that opened the store before migration 7 still
        # writes them there (whole, or merged from the row's own), never in the column.
        row = "jsonb_build_object('settings', i.settings) || i.data"
    else:
        columns, values = f"{_COLUMNS}, data", f"{_VALUES}, %(data)s::jsonb"
        # A row sent without its settings keeps those already stored (core.index.rows.slim_since).
        kept = (
            "data = CASE WHEN excluded.data ? 'settings' THEN excluded.data ELSE excluded.data || "
            "jsonb_build_object('settings', COALESCE(nb_durable_index.data -> 'settings', '{}'::jsonb)) END"
        )
        row = "i.data"
    on_conflict = f"ON CONFLICT (run) DO UPDATE SET {_SET}{kept}"
    indexed = (
        f", idx AS (INSERT INTO nb_durable_index ({columns}) SELECT {values} WHERE EXISTS (SELECT 1 FROM ins) "
        f"{on_conflict} RETURNING 1) "
        "SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM idx), "
        "CASE WHEN %(notify)s AND EXISTS (SELECT 1 FROM ins) THEN pg_notify('" + CHANNEL + "', %(run_id)s) END, "
        # This statement's own transaction commits with the durability its append asks for: no
        # SET before it, so a step's unsynced intent then synced result costs no extra round trips.
        "set_config('synchronous_commit', %(commit)s, true)"
    )
    return IndexSQL(
        apart=apart,
        upsert=f"INSERT INTO nb_durable_index ({columns}) VALUES ({values}) {on_conflict}",
        append_one=(
            "WITH ins AS (INSERT INTO nb_durable_events (run, seq, line) SELECT %(run)s, %(seq)s, %(line)s "
            "WHERE pg_backend_pid() = %(backend)s RETURNING 1)" + indexed
        ),
        append_many=(
            "WITH ins AS (INSERT INTO nb_durable_events (run, seq, line) "
            "SELECT %(run)s, %(seq)s + t.n - 1, t.line FROM unnest(%(lines)s::bytea[]) WITH ORDINALITY AS t(line, n) "
            "WHERE pg_backend_pid() = %(backend)s RETURNING 1)" + indexed
        ),
        row=row,
    )


APART, WITHIN = index_sql(True), index_sql(False)
"""The statements of schema 7 on (settings apart), and of a store opened with an older schema list."""


def layout(version: int) -> IndexSQL:
    """The index's statements at schema ``version``: the settings apart from migration 7 (``SETTINGS_APART``) on."""
    return APART if version >= 7 else WITHIN

SETTINGS_APART = """
ALTER TABLE nb_durable_index ADD COLUMN settings jsonb NOT NULL DEFAULT '{}';
UPDATE nb_durable_index SET settings = data -> 'settings' WHERE data ? 'settings';
"""
"""Migration 7: each row's settings (every tool's schema, most of its bytes) in a column of their
own. They stay in ``data`` too until the row's next write by this version, so a process that
opened the store before, and merges a slim row with the settings ``data`` holds, keeps them."""


def wakes_workers(row: IndexRow) -> bool:
    """Whether writing this row makes a run takeable by a worker now (submitted, or stopped by one)."""
    return row.pending and (row.status == "queued" or row.ended)


def upsert_params(run: int, row: IndexRow, *, settings: bool = True, apart: bool = True) -> dict[str, Any]:
    """The parameters of an ``IndexSQL.upsert`` for a run's row (``run``: its integer key), the
    row's settings left out unless ``settings``: in their own column when ``apart``, else in ``data``."""
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
        "settings": json.dumps(dict(row.settings), sort_keys=True, separators=(",", ":")) if settings and apart else None,
        "data": row.encoded(settings=settings and not apart),
    }


_FILTERED = ("run_id", "status", "ended", "pending", "priority", "queued_at", "updated_at", "batch", "parent", "tags")
"""The columns a listing or a claim reads instead of the row: each written from it by ``upsert_params``."""
def drift_sql(sql: IndexSQL) -> str:
    """What ``column_drift`` compares: every row's filter columns and its row."""
    return f"SELECT {', '.join(_FILTERED)}, {sql.row} FROM nb_durable_index i"


def column_drift(stored: Sequence[tuple[Any, ...]]) -> dict[str, dict[str, tuple[Any, Any]]]:
    """Each run whose filter columns (``drift_sql``'s rows) say other than its row, with each
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


def backfill(conn: psycopg.Connection[Any], version: int) -> None:
    """Fill the new index from every run's events (inside the migration's transaction, which
    brings the schema to ``version``)."""
    sql = layout(version)
    runs = conn.execute("SELECT id, run_id FROM nb_durable_runs").fetchall()
    for run, run_id in runs:
        lines = [bytes(r[0]) for r in conn.execute("SELECT line FROM nb_durable_events WHERE run = %s ORDER BY seq", (run,))]
        if not lines:
            continue
        try:
            history = History.load(run_id, StoredLog.from_lines(lines, run_id))
        except LogCorruptedError:
            continue  # a damaged log gets no row; readers warn about it
        conn.execute(sql.upsert, upsert_params(run, row_of(history), apart=sql.apart))


def rows_sql(sql: IndexSQL, run_ids: Sequence[str] | None) -> tuple[str, Any]:
    """The query of the rows of ``run_ids`` (every row when None), and its parameters."""
    if run_ids is None:
        return f"SELECT {sql.row} FROM nb_durable_index i", ()
    return f"SELECT {sql.row} FROM nb_durable_index i WHERE run_id = ANY(%s)", (list(run_ids),)


def list_sql(sql: IndexSQL, wanted: RunFilter, held: Mapping[str, str]) -> tuple[str, Any]:
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
    return f'SELECT {sql.row} FROM nb_durable_index i{where} ORDER BY updated_at DESC, run_id COLLATE "C"{page}', params


_CLAIM = f"""
WITH picked AS (
    SELECT i.run FROM nb_durable_index i
    WHERE i.pending AND i.claimed_until < extract(epoch FROM clock_timestamp()) AND i.updated_at <= %(idle_before)s
      AND NOT (i.run_id = ANY(%(exclude)s)) AND i.tags @> %(tags)s::jsonb
      AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE {lease_lock("l", "i.run")})
    ORDER BY i.priority DESC, i.queued_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE nb_durable_index i SET claimed_until = extract(epoch FROM clock_timestamp()) + %(hold)s
FROM picked WHERE i.run = picked.run
RETURNING i.priority, i.queued_at, {{row}}
"""


def claim_sql(
    sql: IndexSQL, space: int, limit: int, *, exclude: Sequence[str], tags: Sequence[str], idle_before: float, hold: float
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
    return _CLAIM.format(row=sql.row), params
