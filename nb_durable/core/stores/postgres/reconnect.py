"""Taking a run's lease back after its writer's connection dropped (a server restart,
``pg_terminate_backend``, a network cut), for the append that was being made to go on.

A new session is opened with a bounded backoff (``RECONNECT_SECONDS`` in all), and the lease
is taken again only if it is free, or still held by this writer's own old session (a cut the
server has not noticed yet: that session is ended first, so its lock goes with it). Then the
log must end where this writer left it: at the last line it wrote, or at the lines of the
append that was in flight, byte for byte (its commit may have gone through with only the
acknowledgement lost). Anything else (another writer holds the lease, the log moved on, no
server within the time) is ``Gone``: the writer then raises today's ``LeaseLostError``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from ....errors import StoreError
from ...holders import describe_holder

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["RECONNECT_SECONDS", "Gone", "Retaken", "retake"]

RECONNECT_SECONDS = 30.0
"""How long, in all, a writer whose connection dropped tries to take its lease back (docs/stores.md)."""

_FIRST_PAUSE, _LONGEST_PAUSE = 0.1, 4.0

_LOCKER_SQL = """
SELECT (SELECT l.pid FROM pg_locks l
         WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND l.classid = %(space)s::int::oid AND l.objid = %(key)s::int::oid AND l.objsubid = 2 AND l.granted LIMIT 1),
       r.holder_backend, r.holder_pid, r.holder_host, r.holder_since
FROM nb_durable_runs r WHERE r.id = %(key)s
"""
_TAIL_SQL = "SELECT seq, line FROM nb_durable_events WHERE run = %s AND seq >= %s ORDER BY seq"


class Gone(Exception):
    """The lease cannot be taken back; the message says why, to follow 'the connection dropped (...)'."""


@dataclass
class Retaken:
    """A new session holding the run's lease again."""

    conn: psycopg.Connection[Any]
    holder: dict[str, Any]
    """What the runs table now names as the lease's holder (this process, this new session)."""
    recorded: bool
    """Whether the append that was in flight is already in the log (its commit went through)."""


def retake(
    store: PostgresStore, run_id: str, key: int, old: tuple[int, dict[str, Any]], next_seq: int,
    pending: Sequence[bytes], deadline: float,
) -> Retaken:  # fmt: skip
    """The run's lease again, on a new session, if nobody else took it and the log ends at line
    ``next_seq - 1`` (or at ``pending``, the lines of the append in flight from ``next_seq``).
    ``old``: the backend pid and holder of the dropped session; ``deadline``: a ``time.monotonic()``."""
    pause, why = _FIRST_PAUSE, "the server did not answer"
    while True:
        try:
            conn = store.session(run_id)
        except StoreError as e:
            why = str(e)
        else:
            try:
                return _take(store, conn, key, old, next_seq, pending, deadline)
            except psycopg.Error as e:
                if not (conn.broken or conn.closed):
                    conn.close()
                    raise Gone(f"taking the lease back failed: {store.scrubbed(e)}") from None
                why = store.scrubbed(e)  # dropped again (the server is still going down): try anew
            except BaseException:
                conn.close()
                raise
            conn.close()
        if time.monotonic() + pause > deadline:
            raise Gone(f"no new connection could take the lease back within {RECONNECT_SECONDS:g} s ({why})")
        time.sleep(pause)
        pause = min(pause * 2, _LONGEST_PAUSE)


def _take(
    store: PostgresStore, conn: psycopg.Connection[Any], key: int, old: tuple[int, dict[str, Any]], next_seq: int,
    pending: Sequence[bytes], deadline: float,
) -> Retaken:  # fmt: skip
    old_backend, old_holder = old
    params = {"space": store.lock_space, "key": key}
    while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (store.lock_space, key)).fetchone()[0]:  # type: ignore[index]
        row = conn.execute(_LOCKER_SQL, params).fetchone()
        locker = row[0] if row else None
        named = tuple(row[1:]) if row else ()
        ours = (old_backend, old_holder["pid"], old_holder["host"], old_holder["since"])
        if locker is not None and (locker != old_backend or named != ours):
            said = dict(zip(("pid", "host", "since"), named[1:], strict=True))
            who = describe_holder(said) if named[0] == locker else "another process"
            raise Gone(f"meanwhile another writer took the lease: {who}")
        if time.monotonic() > deadline:
            raise Gone(f"its old session still held the lease after {RECONNECT_SECONDS:g} s")
        if locker is not None:
            # Still our own session, alive on a server that has not seen the cut: end it, and
            # its lock (and any statement of ours it was still running) ends with it.
            conn.execute("SELECT pg_terminate_backend(%s, 1000)", (old_backend,))
        else:
            time.sleep(0.02)  # it was being released between the two queries
    tail = [(int(seq), bytes(line)) for seq, line in conn.execute(_TAIL_SQL, (key, next_seq - 1), binary=True)]
    mine = [(next_seq + i, line[:-1]) for i, line in enumerate(pending)]
    seqs = [seq for seq, _ in tail]
    last = [next_seq - 1] if next_seq > 0 else []
    if seqs == last:
        recorded = False
    elif pending and tail[len(last) :] == mine:
        recorded = True  # committed, with only its acknowledgement lost: never written twice
    else:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (store.lock_space, key))
        left = f"line {next_seq - 1}, the last this writer wrote" if next_seq else "its start (this writer wrote nothing)"
        raise Gone(f"meanwhile the log changed: it no longer ends at {left}")
    return Retaken(conn, store.name_holder(conn, key), recorded)
