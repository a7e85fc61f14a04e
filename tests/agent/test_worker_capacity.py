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
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import PASSED_OVER, Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core.events import Decision, StepCompleted
from nb_durable.core.runs import BY_WORKER, read_run, read_summary
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
    # The worker's own look, which its wake-ups listen on, takes the role's one connection: none is left for a run.
    server().admin().execute(f"ALTER ROLE {name} CONNECTION LIMIT 1")
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


def fill(url: str) -> list[psycopg.Connection[Any]]:
    """Sessions of ``url``'s role until the server refuses one, and still refuses it a moment later."""
    held: list[psycopg.Connection[Any]] = []
    refused = 0
    while refused < 2:
        try:
            held.append(psycopg.connect(url))
            refused = 0
        except psycopg.OperationalError:
            refused += 1
            time.sleep(0.5)
    return held


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
        # Another application's take all but one of the role's five: the worker's look, which its
        # wake-ups listen on, takes the last. Filled until refused, twice, as a session this process
        # just closed holds its place until its backend has gone.
        others = fill(url)
        others.pop().close()
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


def test_a_fleet_short_of_connections_still_completes_every_run_once(
    role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three workers of --concurrency 2, and six sessions for the role: an idle worker held two
    (its look, its wake-ups' LISTEN), so the fleet's idle sessions took all six and every run
    was passed over, for ever. An idle worker holds one now, and a run one more."""
    name, url = role
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 5.0)
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")
    queued = [submit(f"task {i}", store=url, workspace=str(tmp_path), demo=True) for i in range(12)]
    server().admin().execute(f"ALTER ROLE {name} CONNECTION LIMIT 6")
    looked = f"postgresql://postgres@127.0.0.1:{server().port}/postgres?options=-csearch_path%3D{name}"  # none of the six
    workers = [ResumeWorker(store=url, concurrency=2, poll=0.2, name=f"w{n}") for n in range(3)]
    threads = [threading.Thread(target=w.run) for w in workers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWaitWarning)  # a run waiting for a session says so: expected here
        for thread in threads:
            thread.start()
        try:
            wait_until(
                lambda: {read_summary(r, looked).status for r in queued} == {"completed"},
                "every run to complete", timeout=90, seen=lambda: sorted(read_summary(r, looked).status for r in queued),
            )
        finally:
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(30)
    for run_id in queued:
        record = read_run(run_id, looked)
        results = Counter(e.step for e in record.events if isinstance(e, StepCompleted))
        assert set(results.values()) == {1}, f"{run_id}: steps recorded twice: {results}"
        takers = [e.by for e in record.events if isinstance(e, Decision) and e.by.startswith(BY_WORKER)]
        assert len(takers) == 1, f"{run_id} was taken {len(takers)} times: {takers}"


def test_a_worker_holds_one_session_idle_and_one_more_per_run_in_flight(
    role: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What docs/stores.md tells an operator to size for: it held two idle, two more per run
    thread, and kept them all once idle again (2, 4, 6, then 6)."""
    name, url = role
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "1")  # each model call a second: the runs stay in flight
    admin = server().admin()

    def sessions() -> int:
        return int(admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (name,)).fetchone()[0])

    worker = ResumeWorker(store=url, concurrency=2, poll=0.2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        wait_until(lambda: worker.asleep and sessions() == 1, "one session, idle", seen=sessions)
        queued = [submit(f"task {i}", store=url, workspace=str(tmp_path), demo=True) for i in range(2)]
        looked = f"postgresql://postgres@127.0.0.1:{server().port}/postgres?options=-csearch_path%3D{name}"
        wait_until(lambda: {read_summary(r, looked).status for r in queued} == {"running"}, "both runs in flight")
        assert sessions() <= 3, "its own, and one a run"
        wait_until(lambda: {read_summary(r, looked).status for r in queued} == {"completed"}, "both runs done", timeout=90)
        wait_until(lambda: sessions() == 1, "one session once idle again", seen=sessions)
    finally:
        worker.stop()
        thread.join(30)
