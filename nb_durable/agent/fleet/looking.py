"""Where a worker looks for runs (``ResumeWorker`` holds the fields): the store it looks on, opened
at its start or, unreachable then, as soon as the loop or its wake-ups can; and whether it is
asleep, having looked since the store could wake it.

On PostgreSQL the wake-ups listen on that very store's session and the worker's runs read
through it (``thread_stores``), so an idle worker holds one session; a SQLite watch has a
connection, and so a store, of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ...core.index.claim import Wakeups
from ...core.stores import Store, check_writable, make_there, open_store, store_kind
from ...errors import StoreError
from .thread_stores import ThreadStores

__all__ = ["CANNOT_TAKE", "Looking"]

CANNOT_TAKE = "this worker cannot take runs"
"""What a worker says it cannot do on a store that can only be read (``StoreReadOnlyError``)."""


class Looking:
    """The store a worker looks on and its wake-ups."""

    store: str
    _poll_store: Store | None
    _opening: threading.Lock
    _stores: ThreadStores
    _wakeups: Wakeups | None
    _looked_while: int | None
    _idle: bool

    @property
    def asleep(self) -> bool:
        """Whether the worker runs nothing and waits for its next poll or a wake-up, having
        looked at the store since the store could wake it, and the store can wake it now:
        nothing it could know of is left unlooked at (what a wake-up's test waits for; a count
        of polls cannot say it)."""
        woken = self._wakeups is not None and self._wakeups.event.is_set()
        now = self._wakeable()
        return now is not None and self._looked_while == now and self._idle and not woken

    def _wakeable(self) -> int | None:
        """The span in which the store can wake this worker now (0: it has no way to, and only
        polls), or None while it cannot: a look counts only within the span it began in, so a
        session lost and listened to again asks for a new look."""
        wakeups = self._wakeups
        if wakeups is None or not wakeups.listening:
            return 0
        return wakeups.span if wakeups.ready.is_set() else None

    def _open_poll_store(self) -> Store:
        store = open_store(self.store)
        try:
            check_writable(store, CANNOT_TAKE)
            make_there(store)  # a folder not there yet, as a SQLite file is as it opens: its banner says "made empty"
        except StoreError:
            store.close()
            raise
        return store

    def _looking_store(self) -> Store:
        """The store the worker looks on, opened now if it was unreachable (by the loop or its wake-ups, whichever first)."""
        with self._opening:
            if self._poll_store is None:
                self._poll_store = self._open_poll_store()
                self._stores.share(self._poll_store)
            return self._poll_store

    def _opener(self) -> Callable[[], Store]:
        """What the wake-ups open a store unreachable at the start with: on PostgreSQL, the worker's
        own, whose session they listen on (a store of their own held one more session for its life)."""
        if store_kind(self.store) == "postgresql":
            return self._looking_store
        return lambda: open_store(self.store)  # a SQLite watch has a connection of its own: a store of its own too
