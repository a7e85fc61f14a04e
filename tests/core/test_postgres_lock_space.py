"""A store on a cluster whose OIDs are past 2**31, as a long-lived cluster's come to be.

Every lease is an advisory lock whose first key is the runs table's oid, an int4: past 2**31 it
is a negative number (``PostgresStore.lock_space``), and pg_locks shows it as the unsigned oid.
Each query that looks for a lease in pg_locks (``holder_rows.lease_lock``: the holder, the
leases held, the claim, a worker's look, a take-back) must read it so; given the unsigned oid,
``::int`` overflows. Every test starts a PostgreSQL server of its own (``tests/pg.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable import EventLog, list_runs, read_run, run_step
from nb_durable.core.index.claim import claim_runs
from nb_durable.core.runs import read_summary
from nb_durable.core.steps import QUEUED
from nb_durable.core.stores import open_store
from tests import markers
from tests.pg import PostgresServer

pytestmark = pytest.mark.postgres


@pytest.fixture
def url() -> Iterator[str]:
    markers.require("postgres", "a PostgreSQL server of its own")
    pg = PostgresServer(next_oid=3_000_000_000).start()
    try:
        yield pg.url()
    finally:
        pg.stop()


def test_leases_are_found_on_a_store_whose_runs_table_has_an_oid_past_2_31(url: str, tmp_path: Path) -> None:
    with open_store(url) as store:
        pg: Any = store
        assert pg.lock_space < 0, pg.lock_space  # the runs table's oid is past 2**31
        for run_id in ("held", "free"):
            with EventLog(run_id, store) as log:
                log.start_run({"task": run_id, QUEUED: True})
        listener = pg.listen()
        try:
            with EventLog("held", store) as log:
                run_step(log, "a", lambda: 1)
                summary = read_summary("held", url)
                assert summary.status == "running" and summary.holder is not None, summary  # the holder's query
                assert {s.run_id for s in list_runs(url) if s.status == "running"} == {"held"}  # the leases held
                assert [r.run_id for r in claim_runs(store, 5, hold=0)] == ["free"]  # the claim skips a held lease
                assert len(pg.leases_held(listener)) == 1  # a worker's look
                # The session ends (a restart, a network cut): the next write takes the lease back.
                backend = pg.reading.execute(
                    "SELECT holder_backend FROM nb_durable_runs WHERE run_id = 'held'"
                ).fetchone()[0]
                pg.reading.execute("SELECT pg_terminate_backend(%s, 10000)", (backend,))
                run_step(log, "b", lambda: 2)
        finally:
            listener.close()
    assert [s.result for s in read_run("held", url).steps] == [1, 2]
