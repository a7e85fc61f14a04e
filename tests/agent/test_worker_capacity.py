"""A worker whose PostgreSQL server has no connection to spare for the runs it takes: each run
waits for a connection (with a backoff, ``reconnect.ride_out``), then is passed over for
``PASS_OVER_FOR`` seconds with what happened and what to do (fewer workers, a lower concurrency,
a pooler, a higher limit), never the password; it stays queued for a later look, and the
worker does not take it again meanwhile (no spinning on the full server). Its threads wait at
once, for one server: that is said once, not once per thread."""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import PASSED_OVER, Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.runs import read_summary
from nb_durable.core.stores.postgres import reconnect
from nb_durable.errors import StoreWaitWarning
from tests import markers
from tests.pg import PostgresServer, server
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres

PASSWORD = "s3cret-worker"


@pytest.fixture
def role() -> Iterator[tuple[str, str]]:
    admin = server().admin()
    name = f"capped_{uuid.uuid4().hex[:10]}"
    admin.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{PASSWORD}' CONNECTION LIMIT 5")
    admin.execute(f"CREATE SCHEMA {name} AUTHORIZATION {name}")
    yield name, f"postgresql://{name}:{PASSWORD}@127.0.0.1:{server().port}/postgres?options=-csearch_path%3D{name}"
    admin.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{name}'")
    admin.execute(f"DROP SCHEMA {name} CASCADE")
    admin.execute(f"DROP ROLE {name}")


def test_a_worker_with_no_connection_to_spare_passes_its_runs_over_once_and_says_why(
    role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, url = role
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    queued = [submit(f"task {i}", store=url, workspace=str(tmp_path), demo=True) for i in range(3)]
    # The worker's own look and its wake-ups take the role's two connections: none is left for a run.
    server().admin().execute(f"ALTER ROLE {name} CONNECTION LIMIT 2")
    taken: list[Taken] = []
    worker = ResumeWorker(store=url, concurrency=2, poll=0.2, report=taken.append)
    thread = threading.Thread(target=worker.run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWaitWarning)  # said once per wait: the worker's lines say the rest
        thread.start()
        deadline = time.monotonic() + 30
        while len({t.run_id for t in taken}) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # polls go on meanwhile: a passed-over run is not taken again
        worker.stop()
        thread.join(30)
    assert sorted(t.run_id for t in taken) == sorted(queued), [t.run_id for t in taken]
    for t in taken:
        assert t.outcome == PASSED_OVER and PASSWORD not in t.detail, t.detail
        assert "too many connections for role" in t.detail and "The server has no connection to spare" in t.detail, t.detail
        assert "the connection dropped" not in t.detail, t.detail
    assert worker.polls >= 3, "the worker kept looking"
    server().admin().execute(f"ALTER ROLE {name} CONNECTION LIMIT 5")
    assert {read_summary(r, url).status for r in queued} == {"queued"}


def test_a_worker_whose_threads_all_wait_for_a_connection_says_so_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of a worker's --concurrency threads waiting on a server with no connection to spare
    said the same StoreWaitWarning: N lines for one full server."""
    markers.require("postgres", "a PostgreSQL server of its own")
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 2.0)
    monkeypatch.setattr(reconnect, "SAY_AFTER", 0.2)
    # max_connections 8, 3 of them kept for superusers: 5 for the role, the server's own limit.
    pg = PostgresServer(settings={"max_connections": "8", "superuser_reserved_connections": "3"}).start()
    try:
        pg.admin().execute("CREATE ROLE w LOGIN")
        pg.admin().execute("CREATE SCHEMA w AUTHORIZATION w")
        url = f"postgresql://w@127.0.0.1:{pg.port}/postgres?options=-csearch_path%3Dw"
        queued = [submit(f"task {i}", store=url, workspace=str(tmp_path), demo=True) for i in range(3)]
        others = [psycopg.connect(url) for _ in range(3)]  # another application's: the worker's look and wake-ups take the rest
        taken: list[Taken] = []
        worker = ResumeWorker(store=url, concurrency=3, poll=0.2, report=taken.append)
        thread = threading.Thread(target=worker.run)
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")  # every one said, as Python's default would not show a repeated text
            thread.start()
            wait_until(lambda: len(taken) == 3, "the worker to pass its three runs over", seen=lambda: taken)
            worker.stop()
            thread.join(30)
        for conn in others:
            conn.close()
    finally:
        pg.stop()
    assert sorted(t.run_id for t in taken) == sorted(queued) and {t.outcome for t in taken} == {PASSED_OVER}, taken
    waits = [str(w.message) for w in warned if issubclass(w.category, StoreWaitWarning)]
    assert len(waits) == 1, waits
    assert "has no connection to spare" in waits[0] and f"port {pg.port}" in waits[0], waits
