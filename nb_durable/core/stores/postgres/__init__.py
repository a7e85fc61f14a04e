"""Many runs in one PostgreSQL database, shared by every machine that reaches it: ``postgresql://...``.

One concept per module: ``schema`` (the tables, their migrations), ``store`` (connections and
the lease, an advisory lock of the writer's own session), ``opening`` (taking it), ``reconnect``
(riding out a dropped connection), ``holding`` (a writer's lease held by its session: lost,
taken back, marked, released), ``holder_rows`` (who holds a lease, as the table and pg_locks say),
``writer`` (one run's appends through that session), ``listening`` (a worker's LISTEN on the
reading session), ``limiter`` (rate limits shared through the database: a row per endpoint, call
slots as advisory locks) and ``urls`` (URLs and server messages without the password). Importing this
package imports psycopg, so ``open_store`` imports it only for a ``postgresql://`` URL.
"""

from __future__ import annotations

from . import schema
from .schema import MIGRATIONS
from .store import PostgresStore
from .urls import safe_url

__all__ = ["MIGRATIONS", "PostgresStore", "safe_url", "schema"]
