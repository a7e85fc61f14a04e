"""Riding out a dropped PostgreSQL connection (a server restart, ``pg_terminate_backend``, a
network cut): the one retry policy of the store, and taking a writer's lease back with it.

``ride_out`` tries again, on a new session, whatever a drop cut short (``Dropped``), with a
bounded backoff, ``RECONNECT_SECONDS`` in all: a writer's append, opening a run (its lease, its
load, a torn tail's truncation), and a reader's query (idempotent, so simply asked again). A
writer's statement its live session's server refuses for a shortage (``Refused``) is tried again
the same way, on that session: refused, it wrote nothing.

A writer's lease went with its session, so ``retake`` takes it again only if it is free, or
still held by this writer's own old session (a cut the server has not noticed yet: that session
is ended first, so its lock goes with it; ``ours`` says when a lock is that). Then the log must
end as the writer expects (``retake``'s ``endings``): where it left it, or with the lines of the
write that was in flight, byte for byte (its commit may have gone through with only the
acknowledgement lost). Anything else (another writer holds the lease, the log moved on, no
server within the time) is ``Gone``: the writer then raises today's ``LeaseLostError``.

A server that restarts drops every session of this process at once, and one short of
connections, or of shared memory for locks, is short for all of them: a worker's threads each
waiting for it would each say the same, so the waits that overlap on one server for one cause
(a drop, or one shortage) say it once (``_Saying``), naming the store rather than one run of
the several that wait; a later outage is said again, even in the same words (``warn_each_time``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from ....errors import StoreWaitWarning, warn_each_time
from ...holders import describe_holder
from .holder_rows import lease_lock
from .urls import Shortage

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["RECONNECT_SECONDS", "SAY_AFTER", "Dropped", "Gone", "Refused", "Retaken", "dropped", "ours", "retake", "ride_out"]

RECONNECT_SECONDS = 30.0
"""How long, in all, the store rides out a dropped connection before it gives up (docs/stores.md)."""

SAY_AFTER = 1.0
"""Seconds of riding out a drop before a ``StoreWaitWarning`` says so (a restart is often shorter)."""

SAME_OUTAGE = RECONNECT_SECONDS
"""Seconds after a wait gave up within which the next wait on that server, for that cause, is the
same outage, not said again (a worker's next poll)."""

_FIRST_PAUSE, _LONGEST_PAUSE = 0.1, 4.0

_T = TypeVar("_T")

_LOCKER_SQL = f"""
SELECT (SELECT l.pid FROM pg_locks l WHERE {lease_lock("l", "%(key)s")} LIMIT 1),
       r.holder_backend, r.holder_pid, r.holder_host, r.holder_since
FROM nb_durable_runs r WHERE r.id = %(key)s
"""
_TAIL_SQL = "SELECT seq, line FROM nb_durable_events WHERE run = %s AND seq >= %s ORDER BY seq"

Ending = Sequence[tuple[int, "bytes | None"]]
"""How a log may end: its lines from some seq on, each a (seq, line) where None takes any line."""


class Dropped(Exception):
    """A try met a dropped connection, or could not get a new one: worth another within the time.
    The message says what the driver said."""


class Refused(Dropped):
    """A new connection, or a statement on a live one, was refused because the server is short of
    what other sessions hold (``urls.short_of``: connections, shared memory for locks): worth another
    within the time, as they end, but no drop, and said as what it is."""

    def __init__(self, why: str, shortage: Shortage) -> None:
        super().__init__(why)
        self.shortage = shortage


class Gone(Exception):
    """What was cut short cannot be done again; the message says why, to follow 'the connection dropped (...)'.
    ``shortage``: the server was short of capacity (``Refused``) until the end; ``said``: its last words then."""

    def __init__(self, why: str, *, shortage: Shortage | None = None, said: str = "") -> None:
        super().__init__(why)
        self.shortage = shortage
        self.said = said

    @property
    def refused(self) -> bool:
        """Whether no new connection was had because the server is short of capacity (no drop)."""
        return self.shortage is not None

    @property
    def then(self) -> str:
        """What to do, to follow the message, when it is not the caller's usual advice (else '')."""
        return f" {self.shortage.then}." if self.shortage is not None else ""


_Cause = tuple[str, str | None]
"""A server (``PostgresStore.named()``) and why waits on it wait: what it lacks (``Shortage.lacks``), or None for a drop."""


class _Saying:
    """The waits of this process on one server for one cause, and whether one said so: a restart
    or a shortage is the server's, so waits that overlap say it once, and so do waits that follow
    one another within ``SAME_OUTAGE`` seconds (a worker's polls through a long outage, each
    giving up after ``RECONNECT_SECONDS``); the first wait to get through says its end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: dict[_Cause, int] = {}
        self._said: dict[_Cause, list[Any]] = {}  # cause -> [what was said to be down, since when, when its last wait ended (None: one goes on)]

    def join(self, key: _Cause) -> None:
        with self._lock:
            self._waits[key] = self._waits.get(key, 0) + 1

    def first_to_say(self, key: _Cause, what: Callable[[bool], str], started: float) -> str | None:
        """What this wait (begun at ``started``) says is down (``what(alone)``), or None when the outage is said already."""
        with self._lock:
            alone = self._waits[key] == 1
            said = self._said.get(key)
            if said is not None and _current(said):
                said[2] = None
                return None
            told = what(alone)
            self._said[key] = [told, started, None]
            return told

    def leave(self, key: _Cause) -> None:
        with self._lock:
            self._waits[key] -= 1
            if self._waits[key] == 0:
                del self._waits[key]
                if key in self._said:
                    self._said[key][2] = time.monotonic()

    def over(self, server: str, met: Sequence[_Cause]) -> tuple[str, float]:
        """What was said to be down of ``server`` and is not any more, and since when (its end, to
        say: '' when none was): a drop ends with any wait's attempt that goes through, a shortage
        only with one of a wait that met it (``met``): a read on a session kept says nothing of new ones."""
        if not self._said:  # the common case, without the lock
            return "", 0.0
        with self._lock:
            ended = [self._said.pop(key) for key in list(self._said) if key == (server, None) or key in met]
        ended = [e for e in ended if _current(e)]  # one given up on long ago was not "above"
        return (ended[0][0], min(e[1] for e in ended)) if ended else ("", 0.0)


def _current(said: list[Any]) -> bool:
    """Whether an outage said (``_Saying._said``) still goes on: a wait on it goes on, or the last ended
    within ``SAME_OUTAGE``."""
    return said[2] is None or time.monotonic() - said[2] < SAME_OUTAGE


_SAYING = _Saying()


def dropped(conn: psycopg.Connection[Any]) -> bool:
    """Whether ``conn``'s session is gone (an error on it was a drop, not a refusal)."""
    return conn.broken or conn.closed


def ride_out(
    doing: str, attempt: Callable[[], _T], deadline: float | None = None, *, store: PostgresStore, run_id: str | None = None
) -> _T:
    """``attempt()``, tried again after each ``Dropped`` it raises, with a growing pause, until
    ``deadline`` (a ``time.monotonic()``; by default ``RECONNECT_SECONDS`` from now); then
    ``Gone``, saying that no new connection could ``doing`` ("take the lease back") in time.
    Once the wait passes ``SAY_AFTER`` seconds a ``StoreWaitWarning`` names the store (or run
    ``run_id`` in it) and how long it goes on, since a cell or a worker would otherwise sit
    silent; a drop or shortage another wait of this process on that server is saying is not said
    again, nor one a wait just before this said (``SAME_OUTAGE``), and one said while other waits
    overlap names the store, not this wait's run; the first attempt to go through after it was
    said says its end ("the server of ... answers again")."""
    if deadline is None:
        deadline = time.monotonic() + RECONNECT_SECONDS
    started = time.monotonic()
    pause = _FIRST_PAUSE
    said = False
    joined: list[_Cause] = []  # the causes this wait met (``_Saying``)
    try:
        while True:
            try:
                done = attempt()
            except Dropped as e:
                why, shortage = str(e), e.shortage if isinstance(e, Refused) else None
            else:
                told, since = _SAYING.over(store.named(), joined)
                if told:
                    # An idle worker said "dropped ... trying again" and then nothing: its log read
                    # as a store still down. The first wait to get through says the outage's end.
                    warn_each_time(StoreWaitWarning(f"the server of {told} answers again after {time.monotonic() - since:.0f} s; the wait said above is over"))
                return done
            now = time.monotonic()
            if now + pause > deadline:
                raise Gone(f"no new connection could {doing} within {RECONNECT_SECONDS:g} s ({why})", shortage=shortage, said=why)
            key = (store.named(), None if shortage is None else shortage.lacks)
            if key not in joined:
                joined.append(key)
                _SAYING.join(key)
            if not said and now - started >= SAY_AFTER:
                said = True
                what = _SAYING.first_to_say(key, lambda alone: store.named(run_id if alone else None), started)
                if what is not None:
                    happened = f"the connection to {what} dropped" if shortage is None else f"the server of {what} {shortage.lacks}"
                    # Said each time: ``_SAYING`` already keeps it to once per outage, and Python's
                    # once-per-text would hide a later outage said in the same words.
                    warn_each_time(StoreWaitWarning(f"{happened} ({why}); trying again to {doing} for up to {deadline - now:.0f} s more"))
            time.sleep(pause)
            pause = min(pause * 2, _LONGEST_PAUSE)
    finally:
        for key in joined:
            _SAYING.leave(key)


def ours(locker: int | None, named: Sequence[Any], old: tuple[int, dict[str, Any]]) -> bool:
    """Whether a run's lock is held by this process's own dropped session ``old`` (its backend
    pid, the holder it named): that backend holds it and the runs table names that very backend
    and holder (``named``: holder_backend, pid, host, since), so a backend pid reused by another
    session is never taken for it."""
    backend, holder = old
    return locker == backend and tuple(named) == (backend, holder["pid"], holder["host"], holder["since"])


@dataclass
class Retaken:
    """A new session holding the run's lease again."""

    conn: psycopg.Connection[Any]
    holder: dict[str, Any]
    """What the runs table now names as the lease's holder (this process, this new session)."""
    ending: int | None
    """Which of the endings asked for the log ends with (None: none was asked)."""


def retake(
    store: PostgresStore, run_id: str, key: int, old: tuple[int, dict[str, Any]], endings: Sequence[Ending] | None,
    deadline: float,
) -> Retaken:  # fmt: skip
    """The run's lease again, on a new session, if nobody else took it and the log ends as one of
    ``endings`` does (None: the writer has read nothing of it yet, so any log will do).
    ``old``: the backend pid and holder of the dropped session; ``deadline``: a ``time.monotonic()``."""

    def attempt() -> Retaken:
        conn = store.session(run_id, riding_out=True)
        try:
            return _take(store, conn, key, old, endings, deadline)
        except psycopg.Error as e:
            lost = dropped(conn)  # asked before closing it: a closed connection always looks dropped
            conn.close()
            if not lost:
                raise Gone(f"taking the lease back failed: {store.scrubbed(e)}") from None
            raise Dropped(store.scrubbed(e)) from None  # dropped again (the server is still going down)
        except BaseException:
            conn.close()
            raise

    return ride_out("take the lease back", attempt, deadline, store=store, run_id=run_id)


def _take(
    store: PostgresStore, conn: psycopg.Connection[Any], key: int, old: tuple[int, dict[str, Any]],
    endings: Sequence[Ending] | None, deadline: float,
) -> Retaken:  # fmt: skip
    params = {"space": store.lock_space, "key": key}
    while not conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (store.lock_space, key)).fetchone()[0]:  # type: ignore[index]
        row = conn.execute(_LOCKER_SQL, params).fetchone()
        locker = row[0] if row else None
        named = tuple(row[1:]) if row else ()
        if locker is not None and not ours(locker, named, old):
            said = dict(zip(("pid", "host", "since"), named[1:], strict=True))
            who = describe_holder(said) if named[0] == locker else "another process"
            raise Gone(f"meanwhile another writer took the lease: {who}")
        if time.monotonic() > deadline:
            raise Gone(f"its old session still held the lease after {RECONNECT_SECONDS:g} s")
        if locker is not None:
            # Still our own session, alive on a server that has not seen the cut: end it, and
            # its lock (and any statement of ours it was still running) ends with it.
            conn.execute("SELECT pg_terminate_backend(%s, 1000)", (old[0],))
        else:
            time.sleep(0.02)  # it was being released between the two queries
    ending = None if endings is None else _ending(conn, key, endings)
    if endings is not None and ending is None:
        conn.execute("SELECT pg_advisory_unlock(%s, %s)", (store.lock_space, key))
        raise Gone("meanwhile the log changed: it no longer ends where this writer left it")
    return Retaken(conn, store.name_holder(conn, key), ending)


def _ending(conn: psycopg.Connection[Any], key: int, endings: Sequence[Ending]) -> int | None:
    """Which of ``endings`` the log ends with, read from their lowest seq on."""
    start = min((lines[0][0] for lines in endings if lines), default=0)
    tail = [(int(seq), bytes(line)) for seq, line in conn.execute(_TAIL_SQL, (key, start), binary=True)]
    for which, lines in enumerate(endings):
        if len(lines) == len(tail) and all(s == seq and want in (None, line) for (s, want), (seq, line) in zip(lines, tail, strict=True)):
            return which
    return None
