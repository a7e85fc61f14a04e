"""The PostgreSQL store's tables and their migrations.

Layout: ``nb_durable_runs`` holds a row per run (a small integer key, the run id, who holds
its lease and what that holder asks a person); ``nb_durable_events`` a row per event ``(run, seq, line)``, holding the same
checksummed line the JSONL store writes, as ``bytea`` so every byte survives. The tables live
in the first schema of the connection's search_path (``?options=-csearch_path%3Dteam``).
``nb_durable_limits`` holds the limits shared through the store (a row per endpoint key),
``nb_durable_breakers`` their circuit breakers; ``nb_durable_index`` the run index (``index``).

Migrations: ``MIGRATIONS`` is an ordered list of SQL scripts whose position (from 1) is the
schema version it brings the database to; ``nb_durable_schema`` records each applied version.
Opening a store reads the version; if scripts are missing it takes a transaction-scoped
advisory lock, reads again and applies them in that same transaction, so concurrent first
connections migrate exactly once and a failed migration changes nothing. A database migrated
by a newer nb_durable is refused, never touched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import psycopg

from ....errors import StoreAccessError, StoreError, StoreNameError, StoreNotFoundError
from .index import INDEX_TABLE, SETTINGS_APART, backfill
from .urls import Mistake

__all__ = ["LINES_SQL", "MIGRATIONS", "RUN_IDS_SQL", "VERSION_SQL", "creation_refused", "migrate"]

MIGRATIONS: tuple[str, ...] = (
    # 1: runs and their events. No foreign key from events to runs: its check would lock the
    # run's row on every append; only a writer holding the run's lease inserts its events.
    """
    CREATE TABLE nb_durable_runs (
        id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        run_id text NOT NULL UNIQUE,
        holder_pid integer,
        holder_host text,
        holder_since double precision,
        holder_backend integer
    );
    CREATE TABLE nb_durable_events (
        run integer NOT NULL,
        seq integer NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (run, seq)
    );
    """,
    # 2: shared rate limits (``limiter``): a row per endpoint key, its 429 pause and its token
    # window. ``last_wait`` is what the last take of tokens was told (0: spent), so one upsert
    # both decides and returns its decision: RETURNING sees only the new row. Call slots are
    # advisory locks keyed by this table's oid, so they need no rows.
    """
    CREATE TABLE nb_durable_limits (
        key text PRIMARY KEY,
        pause_until double precision NOT NULL DEFAULT 0,
        window_start double precision NOT NULL DEFAULT 0,
        tokens bigint NOT NULL DEFAULT 0,
        last_wait double precision NOT NULL DEFAULT 0
    );
    """,
    # 3: the run index (``index``): a row per run, kept by each append's own statement; filled
    # from the events by ``BACKFILLS[3]`` in the migration's transaction.
    INDEX_TABLE,
    # 4: circuit breakers (``limiter.breaker_state``): a row per endpoint key holding the
    # breaker's small JSON state, locked (SELECT ... FOR UPDATE) for one read-modify-write.
    """
    CREATE TABLE nb_durable_breakers (
        key text PRIMARY KEY,
        state text NOT NULL DEFAULT '{}'
    );
    """,
    # 5: what a lease's holder asks a person (``core.holders``), as JSON text, beside who holds
    # it: believed, like the holder, only while that very backend holds the lock, and cleared
    # by the next writer as it names itself.
    "ALTER TABLE nb_durable_runs ADD COLUMN holder_asking text;",
    # 6: what program the holder is (``core.holders``: a kernel, a terminal command, a worker),
    # so a refused writer is told how to stop it; like the rest, named as the lease is taken.
    "ALTER TABLE nb_durable_runs ADD COLUMN holder_program text;",
    # 7: each index row's settings in a column of their own (``index.SETTINGS_APART``), so an
    # append rewrites the small rest of the row, not every tool's schema.
    SETTINGS_APART,
)

BACKFILLS: dict[int, Callable[[psycopg.Connection[Any], int], None]] = {3: backfill}
"""Python run after the migrations' SQL, in their transaction (filling a new table from the
events), told the version they bring the schema to."""

_MIGRATION_LOCK = 0x6E62_6475_7261_626C  # "nbdurabl": one database-wide key for schema changes

VERSION_SQL = "SELECT coalesce(max(version), 0) FROM nb_durable_schema"
LINES_SQL = (
    "SELECT e.line FROM nb_durable_events e JOIN nb_durable_runs r ON r.id = e.run "
    "WHERE r.run_id = %s ORDER BY e.seq"
)
RUN_IDS_SQL = (
    "SELECT r.run_id FROM nb_durable_runs r "
    "WHERE EXISTS (SELECT 1 FROM nb_durable_events e WHERE e.run = r.id) "
    'ORDER BY r.run_id COLLATE "C"'  # byte order, as sorted() orders run ids
)


class _Where(NamedTuple):
    """Where a store's tables go, as the server sees it for this user (names quoted for SQL)."""

    search_path: str
    role: str
    schema: str | None
    """The first schema of the search_path the database has (None: none)."""
    usable: bool
    creatable: bool
    owner: str | None
    """Who owns the schema's nb_durable tables (None: there are none)."""


# The search_path's schemas in order, whether or not this user may use them: a schema without
# USAGE is left out of the path the server uses, so its tables look absent.
_WHERE_SQL = """
SELECT quote_ident(current_user), quote_ident(n.nspname), has_schema_privilege(n.oid, 'USAGE'),
       has_schema_privilege(n.oid, 'CREATE'),
       (SELECT quote_ident(pg_get_userbyid(c.relowner)) FROM pg_class c
         WHERE c.relnamespace = n.oid AND c.relname = 'nb_durable_schema')
FROM unnest(%s::text[]) WITH ORDINALITY AS p(name, i)
JOIN pg_namespace n ON n.nspname = CASE WHEN p.name = '$user' THEN current_user ELSE p.name END
ORDER BY p.i LIMIT 1
"""


def _where(conn: psycopg.Connection[Any]) -> _Where | None:
    """Where the tables go for this connection's user (None if the server cannot say)."""
    try:
        conn.rollback()
        path = str(conn.execute("SHOW search_path").fetchone()[0])  # type: ignore[index]
        names = [n.strip()[1:-1].replace('""', '"') if n.strip().startswith('"') else n.strip() for n in path.split(",")]
        row = conn.execute(_WHERE_SQL, (names,)).fetchone()
        if row is None:
            role = conn.execute("SELECT quote_ident(current_user)").fetchone()[0]  # type: ignore[index]
            return _Where(path, str(role), None, False, False, None)
        return _Where(path, *row)
    except psycopg.Error:
        return None  # the general advice still holds


def _older_version(conn: psycopg.Connection[Any], where: _Where) -> int | None:
    """The schema version of another role's store older than this nb_durable's (which this user
    may not upgrade: altering a table is its owner's), else None (or if this user cannot read it)."""
    if where.owner is None or where.owner == where.role or not where.usable:
        return None
    try:
        version = int(conn.execute(f"SELECT coalesce(max(version), 0) FROM {where.schema}.nb_durable_schema").fetchone()[0])  # type: ignore[index]
    except psycopg.Error:
        return None  # no right to read it either: the GRANT comes first
    return version if version < len(MIGRATIONS) else None


def creation_refused(conn: psycopg.Connection[Any], error: psycopg.Error) -> Mistake | None:
    """Why the tables could not be made, upgraded or used for ``error``, as the error to raise and
    what a person does (None if it is not about the user's rights or where the tables go); asked
    on the connection that failed, before it is closed."""
    hidden = isinstance(error, psycopg.errors.UndefinedTable)  # the server leaves a schema without USAGE out of the path
    if not (hidden or isinstance(error, (psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidSchemaName))):
        return None
    where = _where(conn)
    if hidden and (where is None or where.schema is None or where.usable):
        return None  # a table missing indeed: not about rights
    if where is not None and where.schema is None and where.search_path != '"$user", public':
        # The URL named the schema (a typo, or one not made yet): advice to name one misleads.
        return Mistake(StoreNameError, (
            f". No schema of the connection's search_path ({where.search_path}) exists in that database: fix the name "
            "the URL gives (?options=-csearch_path%3D...), or create the schema first (CREATE SCHEMA ...)"
        ))  # fmt: skip
    if where is None or where.schema is None:
        return Mistake(StoreNameError if isinstance(error, psycopg.errors.InvalidSchemaName) else StoreAccessError, (
            ". The first user to open a store creates its tables: give it CREATE on the schema "
            "(GRANT CREATE, USAGE ON SCHEMA public TO ...), or name a schema it may create in with "
            "?options=-csearch_path%3Dschema in the URL"
        ))  # fmt: skip
    older = _older_version(conn, where)
    if older is not None:
        return Mistake(StoreAccessError, (
            f". The store's tables in schema {where.schema} are at schema version {older}, and this nb_durable upgrades them "
            f"to version {len(MIGRATIONS)} as it opens them, which only their owner, {where.owner}, may do: open the store "
            f"once as {where.owner} (the same URL with that user: nb-durable runs --store URL will do), then try again"
        ))  # fmt: skip
    if where.owner is not None and where.usable:
        return Mistake(StoreAccessError, (
            f". The store's tables in schema {where.schema} belong to {where.owner}, and {where.role} may not use them: "
            f"have {where.owner} (or a superuser) run GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
            f"{where.schema} TO {where.role}, or use the URL of a user that may, then try again"
        ))  # fmt: skip
    # Tables made already need only USAGE to be used; making them needs CREATE too. The GRANT
    # names the rights missing of those, so it gives no more than the store needs.
    needed = (("USAGE", where.usable),) if where.owner else (("USAGE", where.usable), ("CREATE", where.creatable))
    missing = [right for right, has in needed if not has] or ["CREATE", "USAGE"]
    return Mistake(StoreAccessError, (
        f". User {where.role} has no {' or '.join(missing)} right on schema {where.schema}, where the store's tables "
        f"{'are' if where.owner else 'go'}: have its owner (or a superuser) run GRANT {', '.join(sorted(missing))} ON SCHEMA "
        f"{where.schema} TO {where.role}, or name a schema it may create in with ?options=-csearch_path%3Dschema "
        "in the URL, then try again"
    ))  # fmt: skip


def migrate(conn: psycopg.Connection[Any], url: str, *, existing: bool = False) -> None:
    """Bring the database's tables to this nb_durable's schema version, once, under a lock;
    ``existing``: a schema without them is refused (a reader's mistyped name), not filled."""
    exists = conn.execute("SELECT to_regclass('nb_durable_schema') IS NOT NULL").fetchone()[0]  # type: ignore[index]
    version = conn.execute(VERSION_SQL).fetchone()[0] if exists else 0  # type: ignore[index]
    if version == len(MIGRATIONS):
        return
    if not exists:
        _refuse_others(conn, url)
        if existing:
            schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
            refused = None if schema else creation_refused(conn, psycopg.errors.InvalidSchemaName())
            if refused is not None and refused.kind is StoreAccessError:  # there, but not this user's to use
                raise StoreAccessError(f"cannot read the PostgreSQL store {url}{refused.then}.")
            held = (
                f"schema {schema} of that database holds no nb_durable tables" if schema
                else "no schema of the connection's search_path exists in that database"
            )
            raise StoreNotFoundError(
                f"there is no store at {url}: {held} (is the store's name right?). Reading made "
                "nothing there: a store is made by the first run written to it"
            )
    _check_version(version, url)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS nb_durable_schema "
            "(version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        version = conn.execute(VERSION_SQL).fetchone()[0]  # type: ignore[index]
        _check_version(version, url)
        applied = range(version + 1, len(MIGRATIONS) + 1)
        for number in applied:
            conn.execute(MIGRATIONS[number - 1])
            conn.execute("INSERT INTO nb_durable_schema (version) VALUES (%s)", (number,))
        # A backfill writes with this version's statements, so it runs once every table has their layout.
        for number in applied:
            if number in BACKFILLS:
                BACKFILLS[number](conn, len(MIGRATIONS))

_OWN_TABLES = ("nb_durable_runs", "nb_durable_events", "nb_durable_limits", "nb_durable_index", "nb_durable_breakers")


def _refuse_others(conn: psycopg.Connection[Any], url: str) -> None:
    """Refuse a schema where tables of nb_durable's names exist but no migration was recorded:
    no nb_durable made them (its first migration records itself in the same transaction), so
    they are another program's, and creating beside them failed with PostgreSQL's bare
    'relation "nb_durable_runs" already exists'."""
    # One statement, so one snapshot: another process's first migration, committed since this
    # one looked for nb_durable_schema, shows its tables and that table together, or neither.
    found = conn.execute(
        "SELECT string_agg(tablename, ', ' ORDER BY tablename) FROM pg_tables "
        "WHERE schemaname = current_schema() AND tablename = ANY(%s) AND NOT EXISTS "
        "(SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'nb_durable_schema')",
        (list(_OWN_TABLES),),
    ).fetchone()[0]  # type: ignore[index]
    if found:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        raise StoreError(
            f"the PostgreSQL store {url} cannot be made in schema {schema}: it holds tables named as "
            f"nb_durable's ({found}) that no nb_durable made (it has no nb_durable_schema table), "
            "so they are another program's. They were left untouched: name a schema of its own "
            "in the URL (?options=-csearch_path%3Dschema), or drop those tables if nothing uses them."
        )


def _check_version(version: int, url: str) -> None:
    if version > len(MIGRATIONS):
        raise StoreError(
            f"the PostgreSQL store {url} has schema version {version}, but this nb_durable "
            f"knows versions up to {len(MIGRATIONS)}: a newer nb_durable migrated it. Upgrade "
            "(pip install -U 'nb-durable[postgres]') to read or write its runs; it was left untouched."
        )
