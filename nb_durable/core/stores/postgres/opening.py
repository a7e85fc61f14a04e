"""Opening a PostgreSQL run for writing: taking its lease on a session, naming its holder.

The lock is tried for the one row the run id's unique index finds (its row is made first if
the run is new); a lock held by a dead local process's backend, or by a new holder that has
not named itself yet, is waited for a moment, one held by a live holder is ``RunLockedError``.
A connection that drops while the lease is being taken (the spare that died idle, a server
restart, a proxy's cut) is ridden out on a new session by ``reconnect.ride_out``, as a writer's
append is, with the writer's rules: a lock still held by a session of this very open that
dropped is ended only if the runs table names that session and this holder (``reconnect.ours``);
one it never named is waited for until the server sees it gone; anyone else's is refused.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import psycopg

from ....errors import RunLockedError, StoreError
from ...holders import locked_message, this_holder
from . import reconnect
from .reconnect import Dropped, Gone, dropped, ours, ride_out
from .writer import PostgresWriter

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["open_writer"]

_STALE_GRACE = 5.0  # seconds to wait for the backend of a dead local holder to notice and exit
_LOCK_SQL = "SELECT id, pg_try_advisory_lock(%s, id) FROM nb_durable_runs WHERE run_id = %s"


def open_writer(store: PostgresStore, run_id: str) -> PostgresWriter:
    """Run ``run_id``'s lease, taken on a session of its own (the store's spare if it has one)."""
    old: list[tuple[int, dict[str, Any]]] = []  # sessions of this open that dropped, and the holder each named
    deadline = time.monotonic() + reconnect.RECONNECT_SECONDS

    def take(conn: psycopg.Connection[Any]) -> PostgresWriter:
        me, backend = this_holder(), conn.info.backend_pid  # asked now: a closed connection no longer knows it
        try:
            key = _lock(store, conn, run_id, old, deadline)
            return PostgresWriter(store, run_id, conn, key, store.name_holder(conn, key, me))
        except psycopg.Error as e:
            lost = dropped(conn)  # asked before closing it: a closed connection always looks dropped
            failed = None if lost else store.error("cannot open", e, run_id, on=conn)  # asked on it too: a right revoked
            conn.close()
            if failed is not None:
                raise failed from None
            old.append((backend, me))
            raise Dropped(store.scrubbed(e)) from None
        except BaseException:
            conn.close()
            raise

    def attempt() -> PostgresWriter:
        spare = store.spare() if not old else None
        if spare is not None:
            with contextlib.suppress(Dropped):  # it died while idle (a server restart): a new session, at once
                return take(spare)
        return take(store.session(run_id, riding_out=True))  # this store's server answered before: a restart

    try:
        return ride_out("open it", attempt, deadline, store=store, run_id=run_id)
    except Gone as why:
        # A session that never dropped did not get its connection: the server is full, or restarting.
        dropped_first = "the connection dropped, and " if old else ""
        raise StoreError(
            f"cannot open {store.named(run_id)}: {dropped_first}{why}.{why.then} Nothing of the run was changed: "
            "open it again once the server answers."
        ) from None


def _lock(
    store: PostgresStore, conn: psycopg.Connection[Any], run_id: str, old: list[tuple[int, dict[str, Any]]], deadline: float
) -> int:
    """The run's integer key, its lock taken on ``conn`` (its row made if needed)."""
    key, locked = _try(store, conn, run_id)
    grace = time.monotonic() + _STALE_GRACE
    while not locked:
        state, holder, locker, named = store.lock_state(conn, run_id)
        mine = [each for each in old if each[0] == locker]
        if mine and ours(locker, named, mine[0]):
            # This open's own session, alive on a server that has not seen the cut: end it, and its lock ends with it.
            conn.execute("SELECT pg_terminate_backend(%s, 1000)", (locker,))
        elif mine and state == "unrecorded":
            # Taken by this open's session before it named itself: presumably ours, but nothing
            # says so, so it is waited for (the server ends a session it sees gone) within the time.
            if time.monotonic() > deadline:
                raise Gone(
                    f"a session of this open that dropped (backend {locker}) still holds the lease after "
                    f"{reconnect.RECONNECT_SECONDS:g} s, unnamed: the server has not seen it end (it ends it "
                    "within a minute on a network cut; an administrator can end it with pg_terminate_backend)"
                )
            time.sleep(0.05)
        elif state == "held" or (state != "free" and time.monotonic() > grace):
            raise RunLockedError(locked_message(run_id, holder), run_id=run_id, holder=holder)
        else:
            time.sleep(0.02)  # a dead holder's backend is exiting, or a new holder naming itself
        locked = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (store.lock_space, key)).fetchone()[0]  # type: ignore[index]
    return key


def _try(store: PostgresStore, conn: psycopg.Connection[Any], run_id: str) -> tuple[int, bool]:
    """The run's integer key (its row is created if needed) and whether its lock was taken."""
    # The lock is tried only for the one row the unique index finds: one round trip.
    row = conn.execute(_LOCK_SQL, (store.lock_space, run_id)).fetchone()
    if row is None:
        # Not INSERT ... ON CONFLICT on every open: it would burn a key on each reopen.
        conn.execute("INSERT INTO nb_durable_runs (run_id) VALUES (%s) ON CONFLICT (run_id) DO NOTHING", (run_id,))
        row = conn.execute(_LOCK_SQL, (store.lock_space, run_id)).fetchone()
    assert row is not None
    return int(row[0]), bool(row[1])

