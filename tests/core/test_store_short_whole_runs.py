"""A fork or a copy whose write a store's server refuses for a shortage past its wait (the
PostgreSQL store's ``ServerShortError``: no connection to spare, a full lock table) is said as a
fork or a copy, which goes on by forking or copying again, and leaves no empty run behind.

Only a full disk was said so: the shortage came through saying "write again with the same log, or
resume the run" of a fork that was never made, and a copy left the empty log its writer opened.
The store here is a memory store whose writers' appends are refused as such a server refuses them
once ``short`` is set; ``test_postgres_lock_table.py`` makes the real refusal of a step's write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import uuid4

import pytest

from nb_durable.core.durable import durable_run
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import list_runs
from nb_durable.core.stores import StoreWriter, open_store
from nb_durable.core.whole_runs.fork import fork
from nb_durable.core.whole_runs.transfer import copy_runs
from nb_durable.errors import ServerShortError
from tests.fakes.wrapped import WrappedStore


class ShortServer(WrappedStore):
    """A memory store whose writers' appends are refused, once ``short`` is set, as a server short
    of locks refuses them past its wait."""

    def __init__(self) -> None:
        super().__init__(open_store(f"memory://short-{uuid4().hex}"))
        self.short = False

    def open_writer(self, run_id: str) -> StoreWriter:
        return _Refusing(self.inner.open_writer(run_id), self)


class _Refusing:
    def __init__(self, inner: StoreWriter, store: ShortServer) -> None:
        self._inner, self._store = inner, store

    def append(self, lines: Sequence[bytes], first_seq: int, *, sync: bool, index: Any = None) -> None:
        if self._store.short:
            raise ServerShortError(
                doing="cannot write run", store=self._store.url, lacks="is out of shared memory",
                said="out of shared memory", advice="Have max_locks_per_transaction raised on the server", seconds=30,
            )  # fmt: skip
        self._inner.append(lines, first_seq, sync=sync, index=index)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _one_run(store: Any) -> None:
    with durable_run("a", store):
        pass
    with EventLog("a", store) as log:
        run_step(log, "x", lambda: 1)


def test_a_fork_the_server_is_short_for_says_to_fork_again_and_leaves_no_run() -> None:
    store = ShortServer()
    _one_run(store)
    store.short = True
    with pytest.raises(ServerShortError) as refused:
        fork("a", "b", at=1, root=store)
    said = str(refused.value)
    assert said.startswith(f"cannot fork run 'a' into 'b' in {store.url}: its server is out of shared memory"), said
    assert said.endswith("To go on, fork again: the fork was not made, and no run 'b' was left."), said
    assert "resume the run" not in said, said
    assert [s.run_id for s in list_runs(store)] == ["a"]


def test_a_copy_the_server_is_short_for_says_to_copy_again_and_leaves_no_empty_run() -> None:
    source, destination = open_store(f"memory://from-{uuid4().hex}"), ShortServer()
    _one_run(source)
    destination.short = True
    with pytest.raises(ServerShortError) as refused:
        copy_runs(source, destination)
    said = str(refused.value)
    assert said.startswith(f"cannot copy run 'a' in {destination.url}: its server is out of shared memory"), said
    assert said.endswith("copy again: the runs already copied are passed over (run 'a' was not copied, and no empty run of it was left there)."), said
    assert destination.run_ids() == []
