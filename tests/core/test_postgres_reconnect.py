"""A PostgreSQL writer whose connection drops mid-run (its session terminated, the server
restarted, the network cut) takes its lease back on a new session and goes on: the step in
flight (a paid model call) is recorded once, never lost and never twice. It takes the lease back
only if nobody else took it and the log ends where it left it; else ``LeaseLostError`` as before.

Every test runs against the private server of ``tests/pg.py``; without one they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from nb_durable import EventLog, RunLockedError, list_runs, open_store, read_run, run_step
from nb_durable.core.events import RunStarted, StepCompleted
from nb_durable.core.holders import Asking
from nb_durable.core.index.check import check_index
from nb_durable.core.stores.postgres import PostgresStore, reconnect
from nb_durable.core.stores.postgres.writer import PostgresWriter
from nb_durable.errors import LeaseLostError, StoreError, StoreWaitWarning
from tests.conftest import subprocess_env
from tests.core.test_postgres import backend_holding, terminate
from tests.pg import _free_port, postgres_url, server
from tests.pg_proxy import Proxy


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    relay = Proxy(server().port)
    yield relay
    relay.close()


def steps_of(url: str, run_id: str) -> list[tuple[str, str, object]]:
    return [(s.step_id, s.state, s.result) for s in read_run(run_id, url).steps]


def events_of(url: str, run_id: str) -> int:
    return len(read_run(run_id, url).events)


def a_run(url: str, run_id: str, blip: Callable[[], None], *, durability: str = "process") -> list[str]:
    """Steps a, b, c of run ``run_id``, ``blip`` during b (its result not yet recorded): what ran."""
    ran: list[str] = []

    def step(name: str) -> Callable[[], str]:
        def run() -> str:
            ran.append(name)
            if name == "b":
                blip()
            return f"{name} done"

        return run

    with EventLog(run_id, url, durability=durability) as log:  # type: ignore[arg-type]
        for name in "abc":
            assert run_step(log, name, step(name), effect="external") == f"{name} done"
        log.finish_run("completed")
    return ran


def completed_once(url: str, run_id: str) -> None:
    assert steps_of(url, run_id) == [(n, "completed", f"{n} done") for n in "abc"]
    assert read_run(run_id, url).summary.status == "completed"
    with open_store(url) as store:
        assert check_index(store) == []


@pytest.mark.postgres
@pytest.mark.parametrize("durability", ["full", "process", "none"])
def test_a_writer_whose_session_is_terminated_mid_step_goes_on_with_the_lease(durability: str) -> None:
    url = postgres_url()

    def blip() -> None:
        terminate(backend_holding(url, "blip"))

    assert a_run(url, "blip", blip, durability=durability) == ["a", "b", "c"]
    completed_once(url, "blip")


@pytest.mark.postgres
def test_the_lease_taken_back_is_held_named_and_marked_as_before() -> None:
    url = postgres_url()
    question = Asking.now("approval:0:0:t1", "approval", "run_bash")
    with EventLog("held", url) as log, open_store(url) as other:
        assert isinstance(other, PostgresStore)
        run_step(log, "a", lambda: 1)
        log.writer.mark_asking(question)
        first = backend_holding(url, "held")
        terminate(first)
        run_step(log, "b", lambda: 2)
        assert backend_holding(url, "held") != first
        with pytest.raises(RunLockedError, match="this process"):
            other.open_writer("held")
        summary = list_runs(url)[0]
        assert (summary.status, summary.asking) == ("waiting", question)


@pytest.mark.postgres
def test_a_server_restart_mid_step_is_waited_out() -> None:
    url = postgres_url()
    started: list[threading.Thread] = []

    def blip() -> None:
        server().down()
        started.append(threading.Timer(1.5, server().up))  # the writer meets a server that is away a while
        started[0].start()

    try:
        assert a_run(url, "restart", blip) == ["a", "b", "c"]
    finally:
        for thread in started:
            thread.join()
    completed_once(url, "restart")


@pytest.mark.postgres
def test_an_append_whose_commit_is_not_acknowledged_is_not_written_twice(proxy: Proxy) -> None:
    url = proxy.url(postgres_url())

    def blip() -> None:
        proxy.cut_after_reply(b"b done")  # the result line of b: committed, its answer lost

    assert a_run(url, "unacked", blip) == ["a", "b", "c"]
    assert proxy.cuts == 1
    completed_once(url, "unacked")


@pytest.mark.postgres
def test_a_cut_the_server_has_not_noticed_ends_the_old_session_to_take_the_lease(proxy: Proxy) -> None:
    url = proxy.url(postgres_url())
    backends: list[int] = []

    def blip() -> None:
        backends.append(backend_holding(url, "cut"))
        proxy.sever()  # the old session lives on, holding the lease, until it is ended

    assert a_run(url, "cut", blip) == ["a", "b", "c"]
    completed_once(url, "cut")
    alive = server().admin().execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backends[0],)).fetchone()
    assert alive == (0,)


@pytest.mark.postgres
@pytest.mark.parametrize("dropped", [("parent",), ("child",), ("parent", "child")])
def test_a_child_started_in_its_parent_s_transaction_is_recorded_once_whichever_session_dropped(dropped: tuple[str, ...]) -> None:
    """A parent's step recording a child's start writes both logs in one transaction of the
    parent's session, the child's rows only while the child's session holds its lease."""
    url = postgres_url()
    with EventLog("p", url) as parent, EventLog("p.spawn", url) as child:
        run_step(parent, "a", lambda: "a done")
        for run_id in dropped:
            terminate(backend_holding(url, {"parent": "p", "child": "p.spawn"}[run_id]))
        parent.writer.append_with(
            StepCompleted, {"step": "spawn", "hash": None, "result": {"child": "p.spawn"}, "ms": 0.0},
            child.writer, RunStarted, {"run_id": "p.spawn", "settings": {}, "parent": {"run_id": "p", "step": "spawn"}},
        )  # fmt: skip
        run_step(child, "c", lambda: "c done")
        parent.cursor += 1
        run_step(parent, "b", lambda: "b done")
    assert steps_of(url, "p") == [("a", "completed", "a done"), ("spawn", "completed", {"child": "p.spawn"}), ("b", "completed", "b done")]
    assert steps_of(url, "p.spawn") == [("c", "completed", "c done")]
    assert read_run("p.spawn", url).summary.parent == "p"
    with open_store(url) as store:
        assert check_index(store) == []


FINISH = """
import sys
from nb_durable import EventLog
with EventLog(sys.argv[2], sys.argv[1]) as log:
    log.finish_run("failed")
"""


@pytest.mark.postgres
@pytest.mark.parametrize("meanwhile", ["holds the lease", "wrote and left"])
def test_a_writer_whose_lease_another_took_meanwhile_fails_with_nothing_written(meanwhile: str) -> None:
    url = postgres_url()
    others: list[PostgresWriter] = []
    before: list[int] = []

    def blip() -> None:
        before.append(events_of(url, "taken"))  # b's intent among them
        terminate(backend_holding(url, "taken"))  # waits for the old session to end, and its lock with it
        if meanwhile == "holds the lease":
            others.append(PostgresStore(url).open_writer("taken"))
        else:
            subprocess.run([sys.executable, "-c", FINISH, url, "taken"], check=True, env=subprocess_env(), timeout=60)

    def b() -> str:
        blip()
        return "b done"

    with EventLog("taken", url) as log:
        run_step(log, "a", lambda: "a done")
        with pytest.raises(LeaseLostError) as info:
            run_step(log, "b", b, effect="external")
        with pytest.raises(LeaseLostError):
            log.finish_run("completed")  # the writer writes nothing more
    for other in others:
        other.close()
    said = str(info.value)
    assert "lost its lease" in said and "the connection dropped" in said and "Open the run again" in said, said
    why = f"another writer took the lease: pid {os.getpid()}" if meanwhile == "holds the lease" else "the log changed"
    assert why in said, said
    after = read_run("taken", url)
    assert len(after.events) == before[0] + (1 if meanwhile == "wrote and left" else 0)  # b's result is not among them
    assert [(s.step_id, s.state) for s in after.steps] == [("a", "completed"), ("b", "in_doubt")]


@pytest.mark.postgres
def test_a_server_that_stays_away_ends_the_run_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_url()
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    with EventLog("away", url) as log:
        run_step(log, "a", lambda: "a done")
        server().down()
        try:
            began = time.monotonic()
            with pytest.raises(LeaseLostError) as info:
                run_step(log, "b", lambda: "b done")
            took = time.monotonic() - began
        finally:
            server().up()
    said = str(info.value)
    assert "no new connection could take the lease back within 1 s" in said, said
    assert 0.5 < took < 8, took
    assert steps_of(url, "away") == [("a", "completed", "a done")]  # b, run again when the run is reopened
    with psycopg.connect(url, autocommit=True) as conn:  # nothing of b's result went in
        assert conn.execute("SELECT count(*) FROM nb_durable_events").fetchone() == (events_of(url, "away"),)


def test_the_docs_give_the_time_a_writer_tries_to_take_its_lease_back() -> None:
    docs = Path(__file__).parents[2] / "docs"
    said = f"{reconnect.RECONNECT_SECONDS:g} s"
    assert f"retrying for up to {said} in all" in (docs / "stores.md").read_text()
    assert f"`RECONNECT_SECONDS`,\n{said} in all" in (docs / "design.md").read_text()


# -- opening a run, and reading one, ride out a drop the same way ---------------------------

OPENING = {
    "taking the lease": b"advisory_lock($1, id)",
    "naming its holder": b"holder_backend = pg_backend_pid()",
    "loading the log": b"SELECT e.line FROM nb_durable_events e",
}


@pytest.mark.postgres
@pytest.mark.parametrize("during", OPENING)
def test_a_run_opened_while_its_connection_drops_opens_and_goes_on(proxy: Proxy, during: str) -> None:
    url = postgres_url()
    with EventLog("reopened", url) as log:
        run_step(log, "a", lambda: "a done")
        run_step(log, "b", lambda: "b done")
    proxy.cut_after_reply(OPENING[during])  # done by the server (the lock taken, the row named), the answer lost
    with EventLog("reopened", proxy.url(url)) as log:
        assert proxy.cuts == 1
        for name in "ab":
            assert run_step(log, name, lambda: pytest.fail("a recorded step ran again")) == f"{name} done"
        run_step(log, "c", lambda: "c done")
        log.finish_run("completed")
    completed_once(url, "reopened")


@pytest.mark.postgres
@pytest.mark.parametrize("named", [True, False])
def test_an_open_whose_old_session_lives_on_ends_it_only_if_it_named_itself(
    proxy: Proxy, named: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cut the server never sees: the open's dropped session keeps the lock it took. Named as
    this open's holder, it is ended; not named yet, nothing proves it ours: it is left alone."""
    url = postgres_url()
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    with EventLog("kept", url) as log:
        run_step(log, "a", lambda: "a done")
    proxy.cut_after_reply(OPENING["naming its holder" if named else "taking the lease"], keep_server=True)
    if named:
        with EventLog("kept", proxy.url(url)) as log:
            assert run_step(log, "a", lambda: "again") == "a done"
        return
    old = None
    with pytest.raises(StoreError) as info:
        EventLog("kept", proxy.url(url))
    old = backend_holding(url, "kept")  # the dropped session, never ended by this process
    said = str(info.value)
    assert "cannot open run 'kept'" in said and f"(backend {old}) still holds the lease after 1 s, unnamed" in said, said
    terminate(old)


@pytest.mark.postgres
@pytest.mark.parametrize("meanwhile", ["nothing", "the truncation went through", "another writer cut and wrote it anew"])
def test_a_truncation_whose_connection_drops_is_made_once(proxy: Proxy, meanwhile: str) -> None:
    url = postgres_url()
    for run_id, c in (("cut", "c done"), ("twin", "C DONE")):
        with EventLog(run_id, url) as log:
            run_step(log, "a", lambda: "a done")
            run_step(log, "b", lambda: "b done")
            run_step(log, "c", lambda c=c: c)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    with PostgresStore(url) as plain:
        other_line = plain.load("twin").data.splitlines(keepends=True)[-1]  # c's line, of another making
    store = open_store(proxy.url(url))
    writer = store.open_writer("cut")
    lines = writer.load().data.splitlines(keepends=True)
    if meanwhile == "the truncation went through":
        proxy.cut_after_reply(b"DELETE FROM nb_durable_events WHERE run")
    else:
        terminate(backend_holding(url, "cut"))
    if meanwhile == "another writer cut and wrote it anew":
        other = PostgresStore(url).open_writer("cut")
        other.truncate(3)
        other.append([other_line], 3, sync=True)
        other.close()
    try:
        if meanwhile == "another writer cut and wrote it anew":
            with pytest.raises(LeaseLostError, match="the log changed"):
                writer.truncate(3)
            assert steps_of(url, "cut")[-1] == ("c", "completed", "C DONE")  # its line is not cut a second time
            return
        writer.truncate(3)
        assert writer.load().data == b"".join(lines[:3])
        writer.append(lines[3:], 3, sync=True)
        assert writer.load().data == b"".join(lines)
    finally:
        writer.close()
        store.close()
    assert proxy.cuts == (meanwhile == "the truncation went through")
    assert steps_of(url, "cut") == [(n, "completed", f"{n} done") for n in "abc"]


@pytest.mark.postgres
def test_a_store_being_read_rides_out_a_server_restart() -> None:
    url = postgres_url()
    with EventLog("read", url) as log:
        run_step(log, "a", lambda: "a done")
    store = open_store(url)  # a worker's or a notebook's store, kept open
    restarted: list[threading.Thread] = []
    try:
        server().down()
        restarted.append(threading.Timer(1.5, server().up))
        restarted[0].start()
        with pytest.warns(StoreWaitWarning) as said:
            assert [s.summary.run_id for s in [read_run("read", store)]] == ["read"]
        assert [r.run_id for r in list_runs(store)] == ["read"]
        # Past a second, the wait says so, naming the run and the store (never its password),
        # and then its end: a worker idle on its poll said the outage and nothing after it.
        [warning, back] = said.list
        assert str(back.message).startswith(f"the server of run 'read' in the PostgreSQL store {store.url} ("), back
        assert " answers again after " in str(back.message) and "the wait said above is over" in str(back.message), back
        text = str(warning.message)
        assert text.startswith(f"the connection to run 'read' in the PostgreSQL store {store.url} (")
        assert "dropped (" in text and text.endswith(" s more") and "trying again to read it for up to " in text
        # The store once, the driver's reason once: a failed connect's reason was its whole
        # StoreError ("cannot connect to <the store>: ... Check that the server runs ...").
        assert text.count(store.url) == 1 and "cannot connect" not in text and "Check that" not in text, text
        assert warning.filename == __file__, "the warning points at the caller, not at nb_durable"
    finally:
        for thread in restarted:
            thread.join()
        store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("kept", [True, False])
def test_a_run_opened_while_the_server_restarts_waits_for_it(kept: bool) -> None:
    """Through a store kept open (a worker's), or one opened for this very run (a cell's), the
    server having answered this process before."""
    url = postgres_url()
    with EventLog("opened", url) as log:
        run_step(log, "a", lambda: "a done")
    store = open_store(url) if kept else url
    restarted: list[threading.Thread] = []
    try:
        server().down()
        restarted.append(threading.Timer(1.5, server().up))
        restarted[0].start()
        with EventLog("opened", store) as log:
            assert run_step(log, "a", lambda: "again") == "a done"
            run_step(log, "b", lambda: "b done")
    finally:
        for thread in restarted:
            thread.join()
        if isinstance(store, PostgresStore):
            store.close()
    assert steps_of(url, "opened") == [("a", "completed", "a done"), ("b", "completed", "b done")]


@pytest.mark.postgres
def test_an_open_whose_server_stays_away_fails_saying_so_and_an_unknown_one_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_url()
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    store = open_store(url)
    server().down()
    try:
        began = time.monotonic()
        with pytest.raises(StoreError) as info:
            store.open_writer("away")
        took = time.monotonic() - began
        never = url.replace(f":{server().port}/", f":{_free_port()}/", 1)  # no server there, ever
        quick = time.monotonic()
        with pytest.raises(StoreError, match="cannot connect"):
            open_store(never)
        assert time.monotonic() - quick < 0.5
    finally:
        server().up()
        store.close()
    said = str(info.value)
    assert "cannot open run 'away'" in said and "no new connection could open it within 1 s" in said, said
    assert 0.5 < took < 8, took
