"""Who holds a run's lease, as the runs table names it (pid, host, since, backend, what it asks a
person, what program it is) beside the backend pg_locks shows holding it: the store believes
the name only while that very backend holds the lock."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from ...holders import ASKING

__all__ = ["HELD_SQL", "HOLDER_SQL", "holder_of"]

HOLDER_SQL = """
SELECT r.holder_pid, r.holder_host, r.holder_since, r.holder_backend,
       {asking}, {program},
       (SELECT l.pid FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.database = d.oid AND l.classid = %(space)s::oid
           AND l.objid = r.id::oid AND l.objsubid = 2 AND l.granted
         LIMIT 1)
FROM nb_durable_runs r, (SELECT oid FROM pg_database WHERE datname = current_database()) d
WHERE r.run_id = %(run_id)s
"""
HELD_SQL = """
SELECT r.run_id, r.holder_pid, r.holder_host, r.holder_since, r.holder_backend, {asking}, {program}, l.pid
FROM pg_locks l JOIN nb_durable_runs r ON l.objid = r.id::oid
WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = %(space)s::oid AND l.objsubid = 2 AND l.granted
"""


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
