"""Who holds a run's lease, as the runs table names it (pid, host, since, backend, what it asks a
person, what program it is) beside the backend pg_locks shows holding it: the store believes
the name only while that very backend holds the lock."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ...holders import ASKING

__all__ = ["HELD_SQL", "HOLDER_SQL", "LEFT_SQL", "holder_of", "lease_lock"]


def lease_lock(lock: str, run: str | None = None, space: str = "%(space)s") -> str:
    """SQL true of row ``lock`` of ``pg_locks`` if it is a lease held: a granted advisory lock
    of this database on the pair (``space``, the store's lock space; the run's key, ``run``, or
    any run), which ``pg_locks`` shows with ``objsubid`` 2 (a lock of two int4 keys)."""
    on_run = "" if run is None else f" AND {lock}.objid = {run}::int::oid"
    return (
        f"{lock}.locktype = 'advisory' AND {lock}.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        f"AND {lock}.classid = {space}::int::oid{on_run} AND {lock}.objsubid = 2 AND {lock}.granted"
    )


HOLDER_SQL = f"""
SELECT r.holder_pid, r.holder_host, r.holder_since, r.holder_backend,
       {{asking}}, {{program}},
       (SELECT l.pid FROM pg_locks l WHERE {lease_lock("l", "r.id")} LIMIT 1)
FROM nb_durable_runs r
WHERE r.run_id = %(run_id)s
"""
HELD_SQL = f"""
SELECT r.run_id, r.holder_pid, r.holder_host, r.holder_since, r.holder_backend, {{asking}}, {{program}}, l.pid
FROM pg_locks l JOIN nb_durable_runs r ON l.objid = r.id::oid
WHERE {lease_lock("l")}
"""
LEFT_SQL = f"""
SELECT r.holder_pid, r.holder_host, r.holder_since, extract(epoch FROM pg_postmaster_start_time()) > r.holder_since
FROM nb_durable_runs r JOIN nb_durable_index i ON i.run = r.id
WHERE r.run_id = %(run_id)s AND r.holder_backend IS NOT NULL AND NOT i.ended
  AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE {lease_lock("l", "r.id")})
"""
"""The holder still named of an unfinished run whose lease no session holds: its session ended
holding it (a release clears the name), whether or not its writer lives on; and whether the
server started since the holder took the lease (then the session ended with the server, not
with its process)."""


def holder_of(pid: Any, host: Any, since: Any, asking: str | None, program: str | None) -> dict[str, Any]:
    """A lease's holder as the runs table names it, with what program it is and what it asks
    a person, where it says."""
    holder = {"pid": pid, "host": host, "since": since}
    if program:
        holder["program"] = program
    if asking:
        with contextlib.suppress(ValueError):
            holder[ASKING] = json.loads(asking)
    return holder
