"""The PostgreSQL store beyond the shared contract: migrations, the session lease, dropped
connections, concurrent writers, bad URLs; and copying runs between every kind of store.

Every test runs against the private server of ``tests/pg.py``; without one they fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nb_durable import (
    EventLog,
    InDoubtError,
    RunError,
    RunLockedError,
    RunNotFoundError,
    StoreError,
    fork,
    list_runs,
    open_store,
    read_run,
    run_step,
)
from nb_durable.core.holders import Asking
from nb_durable.core.stores import postgres
from nb_durable.core.stores.postgres import MIGRATIONS, PostgresStore
from nb_durable.core.whole_runs.transfer import copy_runs
from nb_durable.errors import LeaseLostError, LogCorruptedError
from tests import forkserver
from tests.conftest import make_store_url, nb_durable_cli, subprocess_env
from tests.pg import PostgresServer, _free_port, postgres_url, server
from tests.waiting import wait_until


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def backend_holding(url: str, run_id: str) -> int:
    """The server process (backend pid) whose session holds a run's lease."""
    with connect(url) as conn:
        row = conn.execute(
            "SELECT l.pid FROM pg_locks l JOIN nb_durable_runs r ON l.objid = r.id::oid "
            "WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted "
            "AND l.classid = 'nb_durable_runs'::regclass::oid AND r.run_id = %s",
            (run_id,),
        ).fetchone()
    assert row is not None, f"nobody holds {run_id}"
    return int(row[0])


def terminate(backend: int) -> None:
    """What a DBA, a server restart or a network cut does to a session: end it."""
    assert server().admin().execute("SELECT pg_terminate_backend(%s, 10000)", (backend,)).fetchone() == (True,)


# -- migrations ----------------------------------------------------------------------------


@pytest.mark.postgres
def test_a_new_store_is_migrated_to_the_latest_schema_version() -> None:
    url = postgres_url()
    store = PostgresStore(url)
    assert store.schema_version == len(MIGRATIONS) >= 1
    with connect(url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM nb_durable_schema ORDER BY version")]
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    PostgresStore(url)  # opening again applies nothing
    assert store.schema_version == len(MIGRATIONS)


@pytest.mark.postgres
def test_a_url_naming_a_schema_that_is_not_there_is_told_so_not_to_name_a_schema() -> None:
    """search_path=team_runz (a typo) was answered 'name a schema it may create in with
    ?options=-csearch_path%3Dschema in the URL': the URL did, and the operator was sent in a circle."""
    url = postgres_url().rpartition("search_path%3D")[0] + "search_path%3Dteam_runz"
    with pytest.raises(StoreError) as refused:
        PostgresStore(url)
    said = str(refused.value)
    assert "No schema of the connection's search_path (team_runz) exists in that database" in said, said
    assert "GRANT CREATE" not in said and "name a schema it may create in" not in said, said


@pytest.mark.postgres
def test_a_schema_holding_another_program_s_tables_of_its_names_is_refused_and_left_as_it_was() -> None:
    """A schema whose nb_durable_runs was another program's got PostgreSQL's bare 'relation
    "nb_durable_runs" already exists', which said neither whose the table is nor what to do."""
    url = postgres_url()
    with connect(url) as conn:
        conn.execute("CREATE TABLE nb_durable_runs (id integer, note text)")
    sessions = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'refused_here'"
    with connect(url) as conn:
        with pytest.raises(StoreError) as refused:
            PostgresStore(url + "&application_name=refused_here")  # its sessions told apart from other tests'
        # A closed session's backend leaves pg_stat_activity a moment after the close; one left open never does.
        wait_until(lambda: conn.execute(sessions).fetchone() == (0,), "the refused store's session closed, not left open", 10)
    said = str(refused.value)
    assert "it holds tables named as nb_durable's (nb_durable_runs) that no nb_durable made" in said, said
    assert "name a schema of its own in the URL (?options=-csearch_path%3Dschema)" in said and "already exists" not in said, said
    with connect(url) as conn:
        left = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    assert left == [("nb_durable_runs",)], "nothing was made beside it"


@pytest.mark.postgres
def test_a_store_another_process_made_since_this_one_looked_is_not_taken_for_another_program_s() -> None:
    """Eight threads opening one new schema at once (a benchmark's first runs) had one refused:
    it found no nb_durable_schema, another thread's first migration committed, and the look for
    other programs' tables found nb_durable's own. That look is one snapshot: both, or neither."""
    from nb_durable.core.stores.postgres.schema import _refuse_others

    url = postgres_url()
    with connect(url) as late:  # looked before the store was made ...
        assert late.execute("SELECT to_regclass('nb_durable_schema')").fetchone() == (None,)
        PostgresStore(url).close()  # ... which another process does now
        _refuse_others(late, url)  # nb_durable's own tables: nothing to refuse


@pytest.mark.postgres
def test_a_reader_of_a_schema_without_a_store_makes_nothing_there_and_says_so(tmp_path: Path) -> None:
    """nb-durable runs, check-index and show (and %agent_runs --store: open_store(existing=True)) on a schema with no store
    (a mistyped name, or another program's database) made nb_durable's six tables there and
    listed no runs, where a SQLite file or a folder not there is said and never made."""
    url = postgres_url()
    tables = "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
    said = f"there is no store at {url}: schema {url.rpartition('%3D')[2]} of that database holds no nb_durable tables"
    for command in (["runs"], ["check-index"], ["show", "r"]):
        refused = nb_durable_cli(*command, "--store", url, cwd=tmp_path)
        assert refused.returncode == 2 and said in refused.stderr and "is the store's name right?" in refused.stderr, refused.stderr
    with pytest.raises(StoreError, match=re.escape(said)):
        open_store(url, existing=True)
    with connect(url) as conn:
        assert conn.execute(tables).fetchone() == (0,), "reading made nothing"
    with open_store(url) as store, EventLog("r", store) as log:  # a writer makes the store, as before
        log.start_run({"task": "t"})
    listed = nb_durable_cli("runs", "--store", url, cwd=tmp_path)
    assert listed.returncode == 0 and "\nr " in listed.stdout, listed.stdout


@pytest.mark.postgres
def test_concurrent_first_connections_migrate_exactly_once() -> None:
    url = server().fresh_database()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def first_connection() -> None:
        barrier.wait()
        try:
            PostgresStore(url).close()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=first_connection) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM nb_durable_schema").fetchone() == (len(MIGRATIONS),)


@pytest.mark.postgres
def test_a_later_migration_is_applied_once_and_a_failing_one_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_url()
    PostgresStore(url)
    broken = "CREATE TABLE nb_durable_extra (a integer); SELECT 1 / 0"
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", (*MIGRATIONS, broken))
    with pytest.raises(StoreError, match="division by zero"):
        PostgresStore(url)
    with connect(url) as conn:
        assert conn.execute("SELECT to_regclass('nb_durable_extra')").fetchone() == (None,)
        assert conn.execute("SELECT max(version) FROM nb_durable_schema").fetchone() == (len(MIGRATIONS),)
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", (*MIGRATIONS, "CREATE TABLE nb_durable_extra (a integer)"))
    assert PostgresStore(url).schema_version == len(MIGRATIONS) + 1
    assert PostgresStore(url).schema_version == len(MIGRATIONS) + 1


@pytest.mark.postgres
def test_a_store_of_schema_version_4_has_no_waiting_mark_until_migrated_to_the_column(monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_url()
    question = Asking.now("approval:0:0:t1", "approval", "run_bash")
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", MIGRATIONS[:4])
    with EventLog("old", url) as log:
        run_step(log, "a", lambda: 1)
        log.writer.mark_asking(question)  # no column to hold it: the run reads as running, and goes on
        assert [(s.run_id, s.status) for s in list_runs(url)] == [("old", "running")]
    monkeypatch.undo()
    with EventLog("old", url) as log:  # migrated to version 5 on open: holder_asking
        log.writer.mark_asking(question)
        summary = list_runs(url)[0]
        assert (summary.status, summary.asking) == ("waiting", question)
    assert list_runs(url)[0].status == "interrupted"


@pytest.mark.postgres
def test_a_refused_writer_is_told_how_to_stop_the_holder_by_what_program_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs table had no column for what the holder is, so on PostgreSQL a second writer
    was always told to "stop that process", where a JSONL or SQLite lease named the worker or
    terminal command holding it and how to stop that."""
    from nb_durable.core.holders import name_this_process
    from nb_durable.errors import RunLockedError

    url = postgres_url()
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", MIGRATIONS[:5])
    with name_this_process("nb-durable worker"), EventLog("old", url):  # a store of schema 5: no column
        with pytest.raises(RunLockedError) as refused:
            open_store(url).open_writer("old")
        assert "stop that process" in str(refused.value)
    monkeypatch.undo()
    with name_this_process("nb-durable worker"), EventLog("new", url):  # migrated to 6 on open
        assert open_store(url).holder("new")["program"] == "nb-durable worker"  # type: ignore[index]
        with pytest.raises(RunLockedError) as refused:
            open_store(url).open_writer("new")
        assert "stop that worker (kill " in str(refused.value) and "SIGTERM records the run interrupted" in str(refused.value)


@pytest.mark.postgres
def test_a_database_migrated_by_a_newer_nb_durable_is_refused_untouched() -> None:
    url = postgres_url()
    PostgresStore(url)
    with connect(url) as conn:
        conn.execute("INSERT INTO nb_durable_schema (version) VALUES (%s)", (len(MIGRATIONS) + 1,))
    with pytest.raises(StoreError, match=rf"schema version {len(MIGRATIONS) + 1}.*pip install -U"):
        open_store(url)


# -- the lease -----------------------------------------------------------------------------


@pytest.mark.postgres
def test_the_holder_is_named_while_the_lease_is_held_and_never_after() -> None:
    url = postgres_url()
    store = open_store(url)
    writer = store.open_writer("held")
    holder = store.holder("held")
    assert holder is not None and set(holder) <= {"pid", "host", "since", "program"}
    import os

    assert holder["pid"] == os.getpid()
    writer.close()
    # The row still names the old holder; the lock says it is gone.
    assert store.holder("held") is None
    assert store.holder("never-opened") is None


@pytest.mark.postgres
def test_runs_of_two_stores_in_one_database_never_share_a_lease() -> None:
    # Both stores number their runs from 1, so a lock keyed on that number alone would clash.
    first, second = open_store(postgres_url()), open_store(postgres_url())
    a = first.open_writer("same-id")
    b = second.open_writer("same-id")
    try:
        assert first.holder("same-id") is not None and second.holder("same-id") is not None
        with pytest.raises(RunLockedError):
            first.open_writer("same-id")
    finally:
        a.close()
        b.close()


CHILD = """
import sys
from nb_durable import EventLog, run_step
log = EventLog("shared", sys.argv[1])
print("holding", flush=True)
for command in sys.stdin:
    name = command.strip()
    try:
        print("ok", run_step(log, name, lambda: name + " by child"), flush=True)
    except Exception as e:
        print("error", type(e).__name__, str(e).replace("\\n", " "), flush=True)
"""


@pytest.mark.postgres
def test_a_killed_connection_frees_the_run_and_its_writer_loses_it_to_a_writer_that_took_it() -> None:
    url = postgres_url()
    child = forkserver.Popen(
        [sys.executable, "-c", CHILD, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=subprocess_env()
    )
    assert child.stdout is not None and child.stdin is not None

    def tell(line: str) -> str:
        child.stdin.write(line + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        return child.stdout.readline().strip()  # type: ignore[union-attr]

    try:
        assert child.stdout.readline().strip() == "holding"
        assert tell("a") == "ok a by child"
        with pytest.raises(RunLockedError, match=f"pid {child.pid}"):
            EventLog("shared", url)
        terminate(backend_holding(url, "shared"))
        # The child process lives on, but its lease went with its connection: until its next
        # write takes it back, the run is free, and a writer that takes it first keeps it.
        assert [(s.run_id, s.status) for s in list_runs(url)] == [("shared", "interrupted")]
        with EventLog("shared", url) as log:
            answer = tell("b")
            assert answer.startswith("error LeaseLostError run 'shared' lost its lease"), answer
            assert "another writer took the lease" in answer and "Open the run again" in answer, answer
            assert run_step(log, "a", lambda: "again") == "a by child"  # replayed
            assert run_step(log, "b", lambda: "b by parent") == "b by parent"  # never recorded: live
            answer = tell("c")
            assert answer.startswith("error LeaseLostError"), answer
            assert run_step(log, "c", lambda: "c by parent") == "c by parent"
    finally:
        child.kill()
        child.communicate()
    assert [s.result for s in read_run("shared", url).steps] == ["a by child", "b by parent", "c by parent"]


@pytest.mark.postgres
@pytest.mark.parametrize("effect", ["idempotent", "external"])
def test_a_step_in_flight_when_the_connection_dies_reruns_or_is_in_doubt(effect: str) -> None:
    url = postgres_url()
    ran: list[str] = []

    taker: list[Any] = []

    def send() -> str:
        ran.append("send")
        terminate(backend_holding(url, "flight"))  # the connection dies during the effect
        if not taker:  # and another writer takes the run meanwhile, so it cannot be taken back
            taker.append(PostgresStore(url).open_writer("flight"))
        return "sent"

    log = EventLog("flight", url)
    run_step(log, "prepare", lambda: "ready")
    with pytest.raises(LeaseLostError, match="lost its lease"):
        run_step(log, "send", send, effect=effect)  # type: ignore[arg-type]
    with pytest.raises(LeaseLostError):
        log.finish_run("completed")
    log.close()
    taker[0].close()
    record = read_run("flight", url)
    assert [s.state for s in record.steps] == ["completed", "in_doubt" if effect == "external" else "interrupted"]
    if effect == "external":
        with EventLog("flight", url) as again, pytest.raises(InDoubtError, match="'send'"):
            run_step(again, "prepare", lambda: "not again")
            run_step(again, "send", send, effect="external")
    with EventLog("flight", url, in_doubt="rerun") as again:
        assert run_step(again, "prepare", lambda: "not again") == "ready"
        assert run_step(again, "send", lambda: "sent again", effect=effect) == "sent again"  # type: ignore[arg-type]
        again.finish_run("completed")
    assert ran == ["send"]
    assert read_run("flight", url).summary.status == "completed"


@pytest.mark.postgres
def test_idle_connections_cut_by_the_server_are_replaced_without_fuss() -> None:
    url = postgres_url()
    store = open_store(url)
    assert isinstance(store, PostgresStore)
    with EventLog("idle", store) as log:
        run_step(log, "a", lambda: 1)
    # The closed writer's connection waits as the store's spare; readers have their own.
    [spare] = store._spares
    terminate(spare.info.backend_pid)
    terminate(store._conn.info.backend_pid)
    assert store.run_ids() == ["idle"]
    with EventLog("idle", store) as log:
        assert run_step(log, "a", lambda: 2) == 1
        assert run_step(log, "b", lambda: 3) == 3


WRITER = """
import sys
from nb_durable import EventLog, run_step
with EventLog(sys.argv[2], sys.argv[1]) as log:
    sys.stdin.readline()  # start together
    for i in range(int(sys.argv[3])):
        run_step(log, f"s{i}", lambda i=i: {"run": sys.argv[2], "i": i}, effect="idempotent")
    log.finish_run("completed")
"""


@pytest.mark.postgres
def test_many_processes_write_their_own_runs_at_once() -> None:
    url = postgres_url()
    names = [f"writer-{k}" for k in range(4)]
    writers = [
        forkserver.Popen(
            [sys.executable, "-c", WRITER, url, name, "60"], stdin=subprocess.PIPE, text=True, env=subprocess_env()
        )
        for name in names
    ]
    for w in writers:
        w.communicate("go\n", timeout=120)
        assert w.returncode == 0
    runs = {s.run_id: s for s in list_runs(url)}
    assert sorted(runs) == names
    for name in names:
        assert runs[name].status == "completed" and runs[name].completed_steps == 60
        assert [s.result for s in read_run(name, url).steps] == [{"run": name, "i": i} for i in range(60)]


@pytest.mark.postgres
def test_a_synced_append_is_flushed_when_it_returns() -> None:
    """durability='full': each record's commit waits for the WAL flush, as synchronous_commit
    on does (set inside the append's own statement; an asynchronous commit returns before the
    WAL writer flushes, up to wal_writer_delay later)."""
    # A server of its own: the WAL is the whole cluster's, and on the shared one other tests'
    # asynchronous commits are inserted and not yet flushed as this one reads both positions.
    pg = PostgresServer().start()
    try:
        with EventLog("sync", pg.url(), durability="full") as log:
            conn = log.writer._out._conn  # type: ignore[union-attr]  # the backend under test
            for i in range(5):
                run_step(log, f"s{i}", lambda: 1)
                inserted, flushed = conn.execute("SELECT pg_current_wal_insert_lsn(), pg_current_wal_flush_lsn()").fetchone()
                assert _lsn(flushed) >= _lsn(inserted)
    finally:
        pg.stop()


@pytest.mark.postgres
@pytest.mark.parametrize("durability", ["full", "process"])
def test_a_writer_session_stays_asynchronous(durability: str) -> None:
    """Each append sets its commit's durability for its own transaction: the session's stays off."""
    with EventLog("sync", postgres_url(), durability=durability) as log:  # type: ignore[arg-type]
        run_step(log, "a", lambda: 1)
        conn = log.writer._out._conn  # type: ignore[union-attr]
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)


def _lsn(text: str) -> int:
    high, low = str(text).split("/")
    return (int(high, 16) << 32) + int(low, 16)


# -- bad input -----------------------------------------------------------------------------


def test_an_unreachable_server_is_named_without_the_password() -> None:
    port = _free_port()
    with pytest.raises(StoreError) as info:
        open_store(f"postgresql://nbuser:s3cret-pw@127.0.0.1:{port}/runs")
    message = str(info.value)
    assert f"host 127.0.0.1, port {port}" in message
    assert "cannot connect" in message and "Check that the server runs" in message
    # One line, whatever lines and question marks libpq's own text had ("...connections?. Check").
    assert "\n" not in message and "?." not in message and "Connection refused; " in message, message
    assert "s3cret" not in message and "s3cret" not in repr(info.value.__cause__)


@pytest.mark.postgres
def test_bad_urls_get_clear_errors() -> None:
    with pytest.raises(StoreError, match=r"unknown store scheme 'postgresql\+psycopg://'.*postgresql://"):
        open_store("postgresql+psycopg://u:pw@127.0.0.1/db")
    with pytest.raises(StoreError, match="not a PostgreSQL URL.*bogus") as info:
        open_store("postgresql://u:pw-123@127.0.0.1/db?bogus=1")
    assert "pw-123" not in str(info.value)
    with pytest.raises(StoreError, match='database "no_such_db" does not exist'):
        open_store(server().url("no_such_db"))
    with pytest.raises(StoreError, match="cannot prepare the tables.*no schema has been selected.*search_path"):
        open_store(server().url(options="-csearch_path%3Dno_such_schema"))


@pytest.mark.postgres
def test_store_names_and_keys_never_carry_the_password() -> None:
    url = postgres_url().replace("postgres@", "postgres:hunter2@")  # the server trusts 127.0.0.1
    store = open_store(url)
    with EventLog("named", store) as log:
        assert "hunter2" not in repr(log) + log.location + store.url + store.key
    assert store.key == open_store(postgres_url().split("?")[0] + "?" + url.split("?")[1]).key


def test_without_psycopg_the_error_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from nb_durable import open_store, StoreError\n"
        "try:\n    open_store('postgresql://u@127.0.0.1/db')\n"
        "except StoreError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True)
    assert "pip install 'nb-durable[postgres]'" in out.stdout, out.stderr


def test_core_and_other_stores_never_import_psycopg() -> None:
    code = (
        "import sys, nb_durable, nb_durable.core, nb_durable.core.whole_runs.transfer\n"
        "nb_durable.open_store('memory://x'); nb_durable.open_store('sqlite:///:memory:')\n"
        "print('psycopg' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), check=True)
    assert out.stdout.strip() == "False"


# -- copying runs between stores -----------------------------------------------------------


def make_runs(store: str) -> None:
    """Runs of every shape: finished, failed, in doubt, decided, forked, odd characters."""
    with EventLog("done", store) as log:
        log.start_run({"task": "héllo ☃ \"quoted\"\n", "model": "m"})
        for i in range(5):
            run_step(log, f"tool:{i}", lambda i=i: {"i": i, "text": "ü" * i, "nested": [1.5, None, True]}, effect="idempotent")  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
        log.finish_run("completed", output="fin ✓")
    with EventLog("broken", store) as log:
        run_step(log, "a", lambda: 1)
        log.finish_run("failed", error="boom")
    log = EventLog("doubt", store)
    with pytest.raises(KeyboardInterrupt):
        run_step(log, "send", _interrupt, effect="external")
    log.close()
    with EventLog("decided", store) as log:
        with pytest.raises(KeyboardInterrupt):
            run_step(log, "pay", _interrupt, effect="external")
    with EventLog("decided", store, in_doubt="skip") as log:
        run_step(log, "pay", lambda: None, effect="external")
    fork("done", "branch", at=2, root=store).close()


def _interrupt() -> None:
    raise KeyboardInterrupt


@pytest.mark.postgres
def test_a_round_trip_jsonl_postgres_sqlite_jsonl_keeps_every_byte(tmp_path: Path) -> None:
    first = make_store_url("jsonl", tmp_path / "a")
    make_runs(first)
    pg = postgres_url()
    sqlite = make_store_url("sqlite", tmp_path)
    last = make_store_url("jsonl", tmp_path / "b")
    names = ["branch", "broken", "decided", "done", "doubt"]
    assert copy_runs(first, pg) == names
    assert copy_runs(pg, sqlite) == names
    assert copy_runs(sqlite, last) == names
    for name in names:
        before = (Path(first) / f"{name}.jsonl").read_bytes()
        assert (Path(last) / f"{name}.jsonl").read_bytes() == before
        assert b"".join(line + b"\n" for line in _lines(pg, name)) == before
    assert [(s.run_id, s.status, s.steps) for s in list_runs(pg)] == [
        (s.run_id, s.status, s.steps) for s in list_runs(first)
    ]


def _lines(url: str, run_id: str) -> list[bytes]:
    with connect(url) as conn:
        rows = conn.execute(
            "SELECT e.line FROM nb_durable_events e JOIN nb_durable_runs r ON r.id = e.run "
            "WHERE r.run_id = %s ORDER BY e.seq",
            (run_id,),
        )
        return [bytes(r[0]) for r in rows]


@pytest.mark.postgres
def test_a_copied_run_resumes_in_its_new_store(tmp_path: Path) -> None:
    source = make_store_url("memory", tmp_path)
    with EventLog("move", source) as log:
        run_step(log, "a", lambda: "recorded")
    pg = postgres_url()
    assert copy_runs(source, pg, ["move"]) == ["move"]
    with EventLog("move", pg) as log:
        assert run_step(log, "a", lambda: pytest.fail("must replay")) == "recorded"
        assert run_step(log, "b", lambda: "live") == "live"
    assert copy_runs(pg, make_store_url("memory", tmp_path), "move") == ["move"]  # one id, as a string


@pytest.mark.postgres
def test_copying_never_overwrites_and_checks_everything_first(tmp_path: Path) -> None:
    source = make_store_url("jsonl", tmp_path)
    make_runs(source)
    pg = postgres_url()
    other = make_store_url("sqlite", tmp_path)
    with EventLog("done", other) as log:  # another run of the same id
        run_step(log, "a", lambda: "not the source's")
    copy_runs(other, pg)
    with pytest.raises(RunError, match=r"already has 1 of the runs to copy \('done'\), other than the source's.*never overwrites"):
        copy_runs(source, pg)
    with pytest.raises(RunNotFoundError, match="no run 'ghost'"):
        copy_runs(source, pg, ["broken", "ghost"])
    assert open_store(pg).run_ids() == ["done"], "a refused copy copied nothing"
    assert read_run("done", pg).steps[0].result == "not the source's"
    with pytest.raises(StoreError, match="into itself"):
        copy_runs(pg, pg)


@pytest.mark.postgres
def test_a_run_the_destination_holds_line_for_line_is_passed_over_so_copying_again_copies_the_rest(tmp_path: Path) -> None:
    """Copying a store again (after a copy cut short, or to bring a backup up to date) was
    refused for every run copied before, and the person had to name each of the others."""
    source = make_store_url("jsonl", tmp_path)
    make_runs(source)
    pg = postgres_url()
    assert copy_runs(source, pg, ["done", "broken"]) == ["done", "broken"]
    copied: list[str] = []
    passed: list[str] = []
    assert copy_runs(source, pg, report=copied.append, same=passed.append) == copied
    assert sorted(passed) == ["broken", "done"] and sorted(copied) == ["branch", "decided", "doubt"]
    assert sorted(open_store(pg).run_ids()) == sorted(open_store(source).run_ids())
    with EventLog("broken", source) as log:  # the source's run went on: the copy there is no longer it
        run_step(log, "a", lambda: pytest.fail("must replay"))
        run_step(log, "b", lambda: 2)
    with pytest.raises(RunError, match=r"already has 1 of the runs to copy \('broken'\), other than the source's"):
        copy_runs(source, pg)


@pytest.mark.postgres
def test_a_damaged_source_run_is_not_copied(tmp_path: Path) -> None:
    source = make_store_url("jsonl", tmp_path)
    make_runs(source)
    path = Path(source) / "done.jsonl"
    lines = path.read_bytes().split(b"\n")
    number = next(n for n, line in enumerate(lines) if b'"i":1,' in line)
    lines[number] = lines[number].replace(b'"i":1,', b'"i":7,')
    path.write_bytes(b"\n".join(lines))
    pg = postgres_url()
    with pytest.raises(LogCorruptedError, match=f"line {number + 1} of"):
        copy_runs(source, pg)
    assert open_store(pg).run_ids() == []


@pytest.mark.postgres
def test_runs_being_written_are_not_copied_either_way(tmp_path: Path) -> None:
    source, pg = make_store_url("sqlite", tmp_path), postgres_url()
    with EventLog("busy", source) as log:
        run_step(log, "a", lambda: 1)
        with pytest.raises(RunLockedError, match="being written by pid"):
            copy_runs(source, pg)
    writer = open_store(pg).open_writer("busy")  # the destination run is leased, still empty
    try:
        with pytest.raises(RunLockedError, match="'busy' is being written"):
            copy_runs(source, pg)
    finally:
        writer.close()
    assert copy_runs(source, pg) == ["busy"]
    assert json.loads(_lines(pg, "busy")[1])["kind"] == "step_completed"


@pytest.mark.postgres
def test_a_writer_truncates_and_appends_many_lines_at_once() -> None:
    store = open_store(postgres_url())
    with EventLog("lines", store) as log:
        for name in "abc":
            run_step(log, name, lambda name=name: name)  # type: ignore[misc]  # mypy cannot infer a lambda with a default argument
    lines = [line + b"\n" for line in _lines(store.url, "lines")]
    writer = store.open_writer("lines")
    try:
        writer.truncate(2)
        assert writer.load().data == b"".join(lines[:2])
        writer.append(lines[2:], 2, sync=True)
        assert writer.load().data == b"".join(lines)
    finally:
        writer.close()


def test_without_server_binaries_the_tests_fail_saying_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.pg as pg

    monkeypatch.setattr(pg.shutil, "which", lambda name: None)
    monkeypatch.setattr(pg.glob, "glob", lambda pattern: [])
    with pytest.raises(pg.PostgresUnavailable, match=r"apt-get install -y postgresql"):
        pg.find_binaries()


@pytest.mark.postgres
def test_index_rows_of_schema_6_move_their_settings_to_their_own_column_and_an_append_leaves_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every append rewrote the whole row, every tool's schema with it (parsed, compressed and
    stored out of line on the server each time): half the append's time. From schema 7 they
    have a column of their own, which an append leaves as it was."""
    import os

    from nb_durable.core.index.check import check_index

    def chunks(conn: psycopg.Connection[Any]) -> list[int]:
        """The out-of-line values the index holds now: a value written again gets a new chunk id."""
        toast = conn.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'nb_durable_index'::regclass").fetchone()
        return sorted(r[0] for r in conn.execute(f"SELECT DISTINCT chunk_id FROM {toast[0]}"))  # type: ignore[index]

    url = postgres_url()
    tools = [{"name": f"tool{i}", "description": os.urandom(60).hex(), "input_schema": {"type": "object"}} for i in range(40)]
    settings = {"task": "t", "model": "m", "tools": tools}
    monkeypatch.setattr(postgres.schema, "MIGRATIONS", MIGRATIONS[:6])
    with EventLog("old", url) as log:  # written by an nb_durable of schema 6: the settings inside data
        log.start_run(settings)
        run_step(log, "a", lambda: 1)
    older = open_store(url)  # a process of schema 6 that stays open past the migration
    monkeypatch.undo()
    before = list_runs(url)
    with EventLog("late", older) as log:  # it writes as it always did, once the store is migrated
        open_store(url)  # migrated to 7 here
        log.start_run(settings)
        run_step(log, "a", lambda: 1)
    older.close()
    with EventLog("new", url) as log:
        log.start_run(settings)
        run_step(log, "a", lambda: 1)
        with connect(url) as conn:
            held = chunks(conn)
        run_step(log, "b", lambda: 2)
        with connect(url) as conn:
            assert chunks(conn) == held  # the settings stored as the run started, not written again
    with connect(url) as conn:
        stored = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT run_id, data ? 'settings', settings FROM nb_durable_index")}
    # The old rows keep theirs inside data too, until this version writes them again; the late
    # writer's are there alone, and are the row's.
    assert stored == {"old": (True, settings), "late": (True, {}), "new": (False, settings)}
    assert list_runs(url, run_ids=["old"]) == before
    assert [(s.run_id, s.steps, s.settings) for s in list_runs(url)] == [("new", 2, settings), ("late", 1, settings), ("old", 1, settings)]
    with open_store(url) as store:
        assert check_index(store) == []


@pytest.mark.postgres
def test_a_lease_released_names_no_writer_left_and_one_whose_session_ended_names_its_writer() -> None:
    # What a worker reads to leave a run to a live writer whose session ended (agent.fleet.live_writers).
    url = postgres_url()
    with PostgresStore(url) as store:
        with EventLog("released", store) as log:
            run_step(log, "a", lambda: 1)
        assert store.left_by("released") is None  # closed: let go of, the name cleared with it
        log = EventLog("left", store)
        try:
            run_step(log, "a", lambda: 1)
            assert store.left_by("left") is None  # held
            terminate(backend_holding(url, "left"))
            left = store.left_by("left")
            assert left is not None and left["pid"] == os.getpid(), left
            run_step(log, "b", lambda: 2)  # the writer takes its lease back
            assert store.left_by("left") is None
        finally:
            log.close()
        assert store.left_by("left") is None
        with EventLog("ended", store) as log:
            log.start_run({"task": "t"})
            log.finish_run("completed")
            terminate(backend_holding(url, "ended"))
        assert store.left_by("ended") is None  # a run that ended is nobody's to wait for
