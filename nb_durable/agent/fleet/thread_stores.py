"""One open store per resuming thread of a worker, kept from run to run.

Opening a store is not free (a PostgreSQL store connects, checks its schema and keeps a
spare writer session; a SQLite store connects and migrates), and a worker resuming run after
run opened it three times per run. While ``kept()`` lasts, each thread that asks ``here()``
gets a store of its own, opened once and closed when ``kept()`` ends: a store's reading
connection is never shared between threads (a SQLite connection's transaction, a psycopg
cursor's results), and each thread's store keeps its writer session as its spare, so the
next run's lease is taken on a session already open. Outside ``kept()``, ``here()`` is the
spec itself: each call opens and closes as before.

A store whose threads may share it (``shared_by_threads``: PostgreSQL, whose reads go through
psycopg's locked connection and whose writers each have a session) is shared instead
(``share()``): the worker's own. A store per thread held two sessions per thread for the
worker's life (its reading session, and its writer's kept as a spare), so three workers of
``--concurrency 2`` held eighteen connections once idle, and a small server had none left for
any run; shared, a worker holds one, and one more per run in flight.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ...core.stores import Store, StoreSpec, open_store

__all__ = ["ThreadStores"]


class ThreadStores:
    """The store of ``spec``, one open per thread while ``kept()`` lasts."""

    def __init__(self, spec: StoreSpec) -> None:
        self.spec = spec
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[Store] | None = None
        self._shared: Store | None = None

    def share(self, store: Store) -> None:
        """While kept, give every thread ``store`` if its threads may share it (its owner closes it)."""
        if getattr(store, "shared_by_threads", False):
            with self._lock:
                self._shared = store

    def here(self) -> StoreSpec:
        """This thread's open store while kept (or the one shared), else the spec (opened by each use)."""
        with self._lock:
            if self._open is None or isinstance(self.spec, Store):
                return self.spec
            if self._shared is not None:
                return self._shared
            opened = self._open
        store: Store | None = getattr(self._local, "store", None)
        if store is not None and any(s is store for s in opened):
            return store
        store = open_store(self.spec)
        with self._lock:
            kept = self._open is not None
            if kept:
                self._open.append(store)
        if not kept:  # kept() ended meanwhile
            store.close()
            return self.spec
        self._local.store = store
        return store

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Keep each thread's store open until the block ends, then close them all."""
        with self._lock:
            self._open = []
        try:
            yield
        finally:
            with self._lock:
                stores, self._open, self._shared = self._open or [], None, None
            for store in stores:
                with contextlib.suppress(Exception):
                    store.close()
