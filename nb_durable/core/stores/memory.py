"""A store in this process's memory: for tests, demos and throwaway runs.

Named stores (``memory://name``) are shared by everything in the process that names them,
so a second ``EventLog`` sees the runs of the first. Nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ...errors import RunLockedError
from ..holders import ASKING, locked_message, this_holder
from ..index.rows import IndexRow
from ..limiter import MemoryLimiter
from .base import ClosingStore, StoredLog, check_run_id, not_found

__all__ = ["MemoryStore", "memory_store"]

_NAMED: dict[str, MemoryStore] = {}
_NAMING = threading.Lock()  # threads naming a new store at once must all get the one store


def memory_store(name: str = "") -> MemoryStore:
    """The process-wide memory store of that name."""
    with _NAMING:
        store = _NAMED.get(name)
        if store is None:
            store = _NAMED[name] = MemoryStore(name)
        return store


class MemoryStore(ClosingStore):
    """Runs kept in a dict; the lease is a per-run entry of this object."""

    def __init__(self, name: str = "") -> None:
        self.url = f"memory://{name}"
        self.key = f"memory:{id(self)}"
        self._runs: dict[str, list[bytes]] = {}
        self._holders: dict[str, dict[str, Any]] = {}
        self._index: dict[str, IndexRow] = {}
        self._limiter = MemoryLimiter()
        # A worker's threads share this object: a lease must be one check-and-take.
        self._taking = threading.Lock()

    def limiter(self) -> MemoryLimiter:
        """Rate limits shared by everything in this process using this store."""
        return self._limiter

    def run_ids(self) -> list[str]:
        return sorted(self._runs)

    def location(self, run_id: str) -> str:
        return f"{self.url} run {run_id}"

    def load(self, run_id: str) -> StoredLog:
        check_run_id(run_id)
        if run_id not in self._runs:
            raise not_found(run_id, self.url, self.run_ids(), self.url)
        return StoredLog.from_lines(self._runs[run_id], self.location(run_id))

    def holder(self, run_id: str) -> dict[str, Any] | None:
        return self._holders.get(run_id)

    def held(self) -> dict[str, dict[str, Any]]:
        """Every run being written now, with its holder."""
        return dict(self._holders)

    def index_rows(self, run_ids: Sequence[str] | None = None) -> list[IndexRow]:
        """The run index's rows (of ``run_ids``)."""
        if run_ids is None:
            return list(self._index.values())
        return [self._index[r] for r in run_ids if r in self._index]

    def column_drift(self) -> dict[str, dict[str, tuple[Any, Any]]]:
        """None: the rows are the whole index, with no columns beside them."""
        return {}

    def open_writer(self, run_id: str) -> _MemoryWriter:
        check_run_id(run_id)
        me = this_holder()
        with self._taking:
            holder = self._holders.get(run_id)
            if holder is not None:
                raise RunLockedError(locked_message(run_id, holder), run_id=run_id, holder=holder)
            self._holders[run_id] = me
        return _MemoryWriter(self, run_id)


class _MemoryWriter:
    def __init__(self, store: MemoryStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id
        self._open = True

    def load(self) -> StoredLog:
        lines = self._store._runs.get(self._run_id, [])
        return StoredLog.from_lines(lines, self._store.location(self._run_id))

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: IndexRow | None = None) -> None:
        stored = self._store._runs.setdefault(self._run_id, [])
        assert len(stored) == first_seq, "appends arrive in sequence"
        stored.extend(line[:-1] for line in lines)
        if index is not None:
            self._store._index[self._run_id] = index

    def put_index(self, row: IndexRow) -> None:
        self._store._index[self._run_id] = row

    def mark_asking(self, asking: dict[str, Any] | None) -> None:
        holder = self._store._holders.get(self._run_id)
        if not self._open or holder is None:
            return
        # A new dict each time: a reader may hold the old one.
        rest = {k: v for k, v in holder.items() if k != ASKING}
        self._store._holders[self._run_id] = {**rest, ASKING: asking} if asking else rest

    def truncate(self, keep: int) -> None:
        del self._store._runs.setdefault(self._run_id, [])[keep:]

    def delete(self) -> None:
        self._store._runs.pop(self._run_id, None)
        self._store._index.pop(self._run_id, None)
        self.close()

    def close(self) -> None:
        if self._open:
            self._open = False
            self._store._holders.pop(self._run_id, None)
