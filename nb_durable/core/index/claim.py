"""Claiming runs for a worker: the pending runs whose lease is free, highest priority first.

A store with a claim of its own (SQLite: one ``BEGIN IMMEDIATE`` transaction; PostgreSQL: one
``FOR UPDATE SKIP LOCKED`` statement) marks what it hands out as claimed for
``CLAIM_SECONDS``, so workers polling together take different runs. Any other indexed store
(memory, JSONL) is claimed here from its rows and ``held()``, with the claims remembered in
this process. Either way a claim is only a hint: the worker then takes the run's lease, which
alone decides who writes, so a claim lost or doubled costs a look, never a step run twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .listing import ROWS_MAX
from .rows import CLAIM_SECONDS, IndexRow, claim_order, index_of

__all__ = ["Wakeups", "claim_runs", "release_claims"]

_claimed: dict[tuple[str, str], float] = {}
_lock = threading.Lock()


def claim_runs(
    store: Any,
    limit: int,
    *,
    exclude: Sequence[str] = (),
    tags: Sequence[str] = (),
    idle_before: float = float("inf"),
    hold: float = CLAIM_SECONDS,
    stop: Callable[[], bool] = lambda: False,
) -> list[IndexRow]:
    """Up to ``limit`` runs for a worker to take now: pending, lease free, not in ``exclude``,
    started with every tag of ``tags``, idle (its last event) since before ``idle_before``; in the order to take them.
    Each is kept from other claims for ``hold`` seconds (0: a look that claims nothing).
    A claim waiting for a lock held elsewhere (SQLite's write lock) ends with none once ``stop()``
    is true: the caller (a worker stopping) would give back what it claimed anyway."""
    own = getattr(store, "claim", None)
    if callable(own):
        # No store holds more runs: a larger limit (nb-durable worker --concurrency 10**20) was
        # SQLite's OverflowError traceback and PostgreSQL's "bigint out of range".
        limit = min(limit, ROWS_MAX)
        found: list[IndexRow] = own(limit, exclude=exclude, tags=tags, idle_before=idle_before, hold=hold, stop=stop)
        return found
    indexed = index_of(store)
    if indexed is None:
        return []
    now = time.time()
    held = indexed.held()
    skip = set(exclude)
    with _lock:
        rows = [
            r
            for r in indexed.index_rows()
            if r.pending
            and r.run_id not in held
            and r.run_id not in skip
            and set(tags) <= set(r.tags)
            and (r.updated_at or 0.0) <= idle_before
            and _claimed.get((store.key, r.run_id), 0.0) < now
        ]
        rows.sort(key=lambda r: claim_order(r.priority, r.queued_at))
        picked = rows[:limit]
        for r in picked if hold > 0 else ():
            _claimed[(store.key, r.run_id)] = now + hold
    return picked


def release_claims(store: Any, run_ids: Sequence[str]) -> None:
    """Give claimed runs back at once (a worker that will not take them after all)."""
    if not run_ids:
        return
    own = getattr(store, "release", None)
    if callable(own):
        own(run_ids)
        return
    with _lock:
        for run_id in run_ids:
            _claimed.pop((store.key, run_id), None)


class Wakeups:
    """Wakes a worker when a run becomes takeable, on stores that can say so (PostgreSQL's
    LISTEN/NOTIFY: a submit, a worker's graceful stop). A thread of its own waits on the
    store's listening session and sets ``event``; losing that session only costs the worker
    its polls' delay (it polls anyway, and reconnects here after a pause).

    A store that cannot notify but can be watched cheaply (SQLite: ``watch()``, a mark read
    only when ``PRAGMA data_version`` says something was committed) is looked at every
    ``look`` seconds instead, and the worker woken when its mark changes: a submit wakes an
    idle SQLite worker within about ``look`` seconds, not at its next poll.

    A writer that dies sends nothing, but its lease ends with its session: between
    notifications the thread asks the store which leases are held (``leases_held``, one
    look at the server's lock table every ``watch`` seconds) and wakes the worker when one
    it saw held is not any more, so a killed writer's run is taken within about ``watch``
    seconds, whatever other leases were taken meanwhile."""

    def __init__(
        self, store: Any, *, retry: float = 1.0, watch: float = 0.5, look: float = 0.2, opener: Callable[[], Any] | None = None
    ) -> None:
        """``store``: the store to listen to or watch; or None, and ``opener`` opens it, tried
        again every ``retry`` seconds until it opens (a worker started while its database is
        down), and closed with this."""
        self.event = threading.Event()
        self.ready = threading.Event()
        """Set while the store can wake the worker (listening, or watching): a poll begun after
        this misses nothing, since anything later sets ``event``. Cleared while the listening
        session or the watch is lost, until it is back."""
        self.span = 0
        """Counts the times ``ready`` was set: a poll begun in an earlier span may have missed
        a wake-up sent while the session was down."""
        self._store = store
        self._opened: Any = None  # the store ``opener`` opened, closed with this
        self._retry = retry
        self._watch = watch
        self._look = look
        self._stopping = threading.Event()
        self._conn: Any = None
        self._thread: threading.Thread | None = None
        self._wakes = True  # whether the store can wake anyone: unknown until an opener's store opens
        if store is None and opener is not None:
            self._thread = threading.Thread(target=self._open, args=(opener,), name="nb-durable-wakeups", daemon=True)
        elif callable(getattr(store, "listen", None)):
            self._thread = threading.Thread(target=self._listen, name="nb-durable-wakeups", daemon=True)
        elif callable(getattr(store, "watch", None)):
            # The first mark is read here, before the worker's first poll: any change after
            # that poll began is one the watch sees.
            first: tuple[Any, Any] | None = None
            with contextlib.suppress(Exception):
                watcher = store.watch()
                first = (watcher, watcher.mark())
                self.span += 1
                self.ready.set()
            self._thread = threading.Thread(target=self._look_at, args=(first,), name="nb-durable-wakeups", daemon=True)
        if self._thread is not None:
            self._thread.start()

    def _open(self, opener: Callable[[], Any]) -> None:
        """Open the store, then listen or watch as its kind can: each begins by waking the
        worker, whose poll then finds what came before (a run submitted while the store was down)."""
        while not self._stopping.is_set():
            try:
                self._store = self._opened = opener()
                break
            except Exception:
                self._stopping.wait(self._retry)  # still down: the polls go on and say so
        else:
            return
        if callable(getattr(self._store, "listen", None)):
            self._listen()
        elif callable(getattr(self._store, "watch", None)):
            self._look_at(None)
        else:
            self._wakes = False

    @property
    def listening(self) -> bool:
        """Whether the store can wake this worker at all (while an opener's store is not open
        yet: it may)."""
        return self._thread is not None and self._wakes

    def _listen(self) -> None:
        while not self._stopping.is_set():
            try:
                self._conn = self._store.listen()
                held = self._store.leases_held(self._conn)
                # Ready before the wake-up it sends: the poll that wake-up starts is one begun
                # while listening, and finds anything submitted or freed before the count above.
                self.span += 1
                self.ready.set()
                self.event.set()
                while not self._stopping.is_set():
                    for _ in self._conn.notifies(timeout=self._watch, stop_after=1):
                        self.event.set()
                    now_held = self._store.leases_held(self._conn)
                    if held - now_held:
                        # A writer ended, maybe killed: its run may want a worker. Which leases, not
                        # how many: another taken meanwhile would hide it from a count.
                        self.event.set()
                    held = now_held
            except Exception:
                # The session dropped (a server restart): the polls go on; listen again soon.
                self.ready.clear()
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        self._conn.close()
                self._conn = None
                self._stopping.wait(self._retry)

    def _look_at(self, first: tuple[Any, Any] | None) -> None:
        while not self._stopping.is_set():
            try:
                watch, last = first if first is not None else (self._store.watch(), None)
                first = None
                try:
                    if last is None:
                        last = watch.mark()
                        self.span += 1
                        self.ready.set()
                        self.event.set()  # the watch began late: a look finds what came before it
                    while not self._stopping.wait(self._look):
                        mark = watch.mark()
                        if mark != last:
                            self.event.set()
                        last = mark
                finally:
                    watch.close()
            except Exception:
                self.ready.clear()
                self._stopping.wait(self._retry)  # the file busy or gone for a moment: the polls go on

    def close(self) -> None:
        """Stop listening."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        # Not under a thread still using it (its join timed out): that one is left to the process's end.
        if self._opened is not None and (self._thread is None or not self._thread.is_alive()):
            with contextlib.suppress(Exception):
                self._opened.close()
