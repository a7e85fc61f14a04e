"""A PostgreSQL run's lease as its writer holds it: an advisory lock of one session of this process.

The lease lives in that session: if the connection drops (server restart, ``pg_terminate_backend``,
network), the lease goes with it. A statement that finds it gone takes the lease back on a new
session (``_take_back``, through ``reconnect.retake``: only if nobody took it and the log still
ends as the writer expects) and is then made, exactly once; failing that the writer raises
``LeaseLostError`` and never writes again. A statement the server refuses on a live session for a
shortage other sessions make (connections, its lock table: ``urls.short_of``) is tried again
within the same window (``_short_waited``, through ``reconnect.ride_out``, which says it waits),
then is ``ServerShortError``. The lease also carries what its holder asks a person
(``mark_asking``), marked again on a session that takes it back; a shortage is waited out for
it the same way, and past the wait it is a ``StoreWaitWarning``, never the run's failure. The
lease ends with ``close``.
What is written under it is ``writer``'s.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from ....errors import LeaseLostError, ServerShortError, StoreWaitWarning, warn_each_time
from . import reconnect
from .reconnect import Gone, Refused, retake, ride_out
from .urls import short_of

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["Holding"]

_T = TypeVar("_T")

_MARK_SQL = "UPDATE nb_durable_runs SET holder_asking = %s WHERE id = %s AND holder_backend = pg_backend_pid()"
_UNLOCK_SQL = (
    # The name cleared as the lease is let go: a name left with no lease held says its session
    # ended holding it, the writer maybe alive (``PostgresStore.left_by``).
    "WITH released AS (UPDATE nb_durable_runs SET holder_backend = NULL WHERE id = %(key)s AND holder_backend = pg_backend_pid()) "
    "SELECT pg_advisory_unlock(%(space)s, %(key)s), set_config('synchronous_commit', 'off', false)"
)


class Holding:
    """One run's lease (an advisory lock of this connection's session): held, lost, taken back, marked, released."""

    def __init__(
        self, store: PostgresStore, run_id: str, conn: psycopg.Connection[Any], key: int, holder: dict[str, Any]
    ) -> None:
        self._store = store
        self._run_id = run_id
        self._key = key
        self._lost = ""
        self._asking: str | None = None  # the mark last sent (a new session sends it again)
        self._use(conn, holder)

    def _use(self, conn: psycopg.Connection[Any], holder: dict[str, Any]) -> None:
        """Write through ``conn``, whose session holds the lease (``holder``: as the runs table names it)."""
        self._conn: psycopg.Connection[Any] | None = conn
        self._holder = holder
        self._backend = conn.info.backend_pid

    def _live(self) -> psycopg.Connection[Any]:
        if self._lost:
            raise self._lost_error(self._lost)
        if self._conn is None:
            raise LeaseLostError(
                f"the writer of run {self._run_id!r} was closed; open the run again to write it",
                run_id=self._run_id,
                holder=None,
            )
        return self._conn

    def _lost_error(self, why: str) -> LeaseLostError:
        store = self._store
        return LeaseLostError(
            f"run {self._run_id!r} lost its lease on the PostgreSQL store {store.url} ({store.where}): "
            f"{why}. The lease lived in that connection, so this writer writes nothing more (an event "
            "being written when it dropped may or may not be recorded: the store says which). Open the "
            "run again to go on: recorded steps replay, and a step that was in flight runs again or "
            "is settled as in doubt. If another writer (a worker) took it meanwhile, the run goes on "
            "there: opening it is refused while that one holds it, and replays what it recorded after.",
            run_id=self._run_id,
            holder=None,
        )

    def _dropped(self) -> bool:
        conn = self._conn
        return conn is None or conn.broken or conn.closed

    def _failed(self, doing: str, e: psycopg.Error) -> Exception:
        if self._dropped():
            self._lost = f"the connection dropped ({self._store.scrubbed(e)})"
            if self._conn is not None:
                self._conn.close()
            return self._lost_error(self._lost)
        return self._store.error(f"cannot {doing}", e, self._run_id, on=self._conn)

    def _refused(self, doing: str, e: psycopg.Error) -> Exception:
        """What a statement the live session's server refused raises: ``Refused`` if for a shortage
        other sessions make (waited out by ``_short_waited``), else the store's error."""
        return self._short_of(e) or self._store.error(doing, e, self._run_id, on=self._conn)

    def _short_of(self, e: psycopg.Error) -> Refused | None:
        """``Refused`` if the live session's server refused a statement for a shortage other sessions make."""
        shortage = short_of(e)
        return None if shortage is None else Refused(self._store.scrubbed(e), shortage)

    def _short_waited(self, attempt: Callable[[], _T], deadline: float) -> _T:
        """``attempt()``, tried again while the server refuses it for a shortage (``Refused``), until
        ``deadline``, saying so as a drop is said (``ride_out``); then ``ServerShortError``."""
        try:
            return ride_out("write to it", attempt, deadline, store=self._store, run_id=self._run_id)
        except Gone as why:
            assert why.shortage is not None  # only a Refused reaches ride_out here: a drop is taken back inside
            raise ServerShortError(
                doing=f"cannot write run {self._run_id!r}", store=self._store.named(), lacks=why.shortage.lacks,
                said=why.said, advice=why.shortage.then, seconds=reconnect.RECONNECT_SECONDS,
            ) from None  # fmt: skip

    def _take_back(self, e: psycopg.Error, endings: Sequence[reconnect.Ending] | None, deadline: float) -> int | None:
        """After the connection dropped under a statement: take the lease back on a new session
        (``reconnect``) and say which of ``endings`` the log ends with; else raise
        ``LeaseLostError`` as a dropped connection always did."""
        dropped = f"the connection dropped ({self._store.scrubbed(e)})"
        if self._conn is not None:
            self._conn.close()
        try:
            again = retake(self._store, self._run_id, self._key, (self._backend, self._holder), endings, deadline)
        except Gone as why:
            self._lost = f"{dropped}, and {why}" + (f".{why.then.rstrip('.')}" if why.then else "")
            raise self._lost_error(self._lost) from None
        self._use(again.conn, again.holder)
        if self._asking is not None:
            self._mark(deadline)  # the new holder row was written unmarked
        return again.ending

    def mark_asking(self, asking: dict[str, Any] | None) -> None:
        if self._conn is None or self._lost or not self._store.marks_asking:
            return
        self._asking = json.dumps(asking) if asking else None
        self._mark(time.monotonic() + reconnect.RECONNECT_SECONDS)

    def _mark(self, deadline: float) -> None:
        """Write the mark last asked for (only the backend holding the lock does), a shortage waited
        out until ``deadline`` as a write's is; never raises."""
        conn = self._conn
        assert conn is not None

        def attempt() -> None:
            try:
                conn.execute(_MARK_SQL, (self._asking, self._key))
            except psycopg.Error as e:
                refused = None if self._dropped() else self._short_of(e)
                if refused is not None:
                    raise refused from None
                # A drop: the session that takes the lease back marks it again (``_take_back``).
                # Anything else is the next append's to report, as it always was.

        try:
            self._short_waited(attempt, deadline)
        except ServerShortError as e:
            # Not raised: the mark only shows what the run waits on (``StoreWriter.mark_asking``), and
            # the run waits for its answer all the same. Not silent either: a run listed as running
            # while it waits for a person looks stuck to whoever watches the listing. A
            # StoreWaitWarning, as ``ride_out`` says the wait itself (past SAY_AFTER only, and saying
            # it waits, never that it gave up); said each time, for each mark is another question.
            warn_each_time(StoreWaitWarning(str(self._unmarked(e))))

    def _unmarked(self, e: ServerShortError) -> ServerShortError:
        """``e`` said as the mark that was not written, and what readers show meanwhile."""
        if self._asking is not None:
            doing, shown = f"cannot mark run {self._run_id!r} as waiting", "running, not waiting, while it waits"
        else:
            doing, shown = f"cannot clear the waiting mark of run {self._run_id!r}", "waiting until it marks again or ends"
        return e.said_as(doing, f"nothing is needed: the run goes on all the same, only listed as {shown}")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        # Unlock, not just close: a closed connection's backend releases its lock only as it
        # exits, a moment later, and a reopen right after close() must find the run free.
        unlocked = False
        if not (conn.broken or conn.closed):
            with contextlib.suppress(psycopg.Error):  # if the connection died, so did its lock
                unlocked = conn.execute(_UNLOCK_SQL, {"space": self._store.lock_space, "key": self._key}).fetchone() == (True, "off")
        if not (unlocked and self._store.give_back(conn)):
            conn.close()
