"""Which runs a worker takes, and how it keeps going (``ResumeWorker`` in this process).

* On a JSONL store: a run whose writer died, or one a worker stopped, is taken; a run that
  failed, stopped short, hit its turn limit, was interrupted by a person, is being written,
  cannot be rebuilt (a scripted model, plain Python steps), or is in doubt under
  ``in_doubt="fail"`` is not; ``tags`` and ``older_than`` filter; runs already in hand are
  passed over; the oldest comes first.
* ``nb-durable run --tag`` records the tags in the run's settings.
* A store the worker cannot reach is warned about on each poll (the worker keeps going), and
  ``stop()`` ends it.
* A queued run whose workspace folder is not on this machine is passed over for a while, not
  recorded as failed, and taken once the folder is back; so is a run whose store fails while
  the worker takes it (PostgreSQL refusing writes), taken once the store is back.
* ``ready`` is heard once ``run()`` can take runs (the SDK imported), before any run is taken.

The end-to-end behaviour, with real processes killed and signalled, is in ``test_worker.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.fleet import store_trouble
from nb_durable.agent.fleet import worker as worker_module
from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import PASSED_OVER
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.settings import AgentSettings
from nb_durable.core.log import EventLog, run_step
from nb_durable.core.runs import list_runs, read_run, read_summary
from nb_durable.core.stores import opened
from nb_durable.errors import StoreError
from tests import forkserver
from tests.conftest import make_store_url, nb_durable_cli, subprocess_env


def _interrupt() -> None:
    raise KeyboardInterrupt


def _agent_run(store: str, run_id: str, *, tags: tuple[str, ...] = (), kind: str = "anthropic",
               end: tuple[str, Any, str | None] | None = None, external: bool = False) -> None:
    with EventLog(run_id, store) as log:
        log.start_run(AgentSettings(task=f"task {run_id}", model_kind=kind, tags=tags).to_json())
        run_step(log, "model:0", lambda: {"message": {}}, effect="idempotent")
        if external:
            with contextlib.suppress(KeyboardInterrupt):
                run_step(log, "tool:0:0:x", _interrupt, effect="external")
        if end is not None:
            log.finish_run(end[0], output=end[1], error=end[2])  # type: ignore[arg-type]


def test_which_runs_a_worker_takes(tmp_path: Path) -> None:
    store = str(tmp_path / "runs")
    _agent_run(store, "crashed", tags=("nightly", "team-a"))
    _agent_run(store, "crashed-untagged")
    _agent_run(store, "stopped-by-worker", end=("interrupted", None, "stopped by worker h:1 before step model:1; any worker resumes it"))
    _agent_run(store, "in-doubt", external=True)
    _agent_run(store, "by-person", end=("interrupted", None, "interrupted by the user"))
    _agent_run(store, "turn-limit", end=("interrupted", {"text": ""}, "reached the limit of 1 turns"))
    _agent_run(store, "failed", end=("failed", None, "401"))
    _agent_run(store, "truncated", end=("truncated", {"text": "..."}, "cut off"))
    _agent_run(store, "done", end=("completed", {"text": "ok"}, None))
    _agent_run(store, "scripted", kind="scripted")
    with EventLog("plain", store) as log:
        run_step(log, "a", lambda: 1)
    busy = EventLog("busy", store)
    try:
        busy.start_run(AgentSettings(task="busy").to_json())
        takes = ["crashed", "crashed-untagged", "stopped-by-worker", "in-doubt"]
        assert ResumeWorker(store).candidates() == takes
        assert ResumeWorker(store, in_doubt="fail").candidates() == takes[:3]
        assert ResumeWorker(store, tags=("nightly",)).candidates() == ["crashed"]
        assert ResumeWorker(store, tags=("nightly", "team-b")).candidates() == []
        assert ResumeWorker(store, older_than=3600).candidates() == []
        assert ResumeWorker(store).candidates(busy=["crashed"]) == takes[1:]
    finally:
        busy.close()
    with pytest.raises(ValueError, match="concurrency"):
        ResumeWorker(store, concurrency=0)


def test_run_records_its_tags(tmp_path: Path) -> None:
    done = forkserver.run(
        [sys.executable, "-m", "nb_durable.cli", "run", "--demo", "--run", "tagged", "--tag", "nightly", "--tag", "team-a",
         "--store", str(tmp_path / "runs"), "list the files"],
        cwd=tmp_path, env=subprocess_env(NB_DURABLE_DEMO_LATENCY="0"), capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert read_run("tagged", str(tmp_path / "runs")).summary.settings["tags"] == ["nightly", "team-a"]
    assert ResumeWorker(str(tmp_path / "runs"), tags=("nightly",)).candidates() == []  # completed: nothing to take


@contextlib.contextmanager
def running(worker: ResumeWorker) -> Iterator[None]:
    """``worker.run()`` on a thread for the block, stopped (and gone) at its end."""
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        yield
    finally:
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()


def test_a_worker_waits_out_a_store_it_cannot_reach_says_so_once_and_says_when_it_is_back(tmp_path: Path) -> None:
    """It said the whole error again at every poll, forever (every 5 s by default), and never
    that the store was back."""
    warned: list[str] = []
    unreachable = f"sqlite:///{tmp_path / 'not-yet' / 'runs.db'}"
    worker = ResumeWorker(unreachable, poll=0.05, warn=warned.append)
    with running(worker):
        deadline = time.monotonic() + 30
        while worker.polls == 0 and not warned:
            assert time.monotonic() < deadline, "no warning"
            time.sleep(0.02)
        time.sleep(0.5)  # ten polls more, all failing for the same reason
        assert len(warned) == 1, warned
        assert f"cannot list the runs of {unreachable}" in warned[0], warned
        # Its wake-ups open the store as soon as the folder is there, and wake it: sooner than a poll.
        assert warned[0].endswith("; trying again every 0.05 s, and within a second of its file being there again"), warned
        (tmp_path / "not-yet").mkdir()  # the store can be reached now
        while worker.polls == 0:
            assert time.monotonic() < deadline, f"the worker never listed the runs: {warned}"
            time.sleep(0.02)
        time.sleep(0.2)
    assert warned[1:] == [f"can list the runs of {unreachable} again"], warned


def test_a_worker_whose_sqlite_store_is_deleted_says_so_and_takes_the_runs_of_the_file_made_again(tmp_path: Path) -> None:
    """The store's folder deleted under a running worker, then made again by the next submit:
    the worker kept reading the deleted file through the connection it had open, said
    nothing, and never took a run of the new file (they stayed queued for ever)."""
    folder = tmp_path / "store"
    folder.mkdir()
    store = f"sqlite:///{folder / 'runs.db'}"
    submit("say hello", store=store, run_id="before", workspace=str(tmp_path), demo=True)
    warned: list[str] = []
    worker = ResumeWorker(store, poll=0.05, warn=warned.append)
    with running(worker):
        deadline = time.monotonic() + 30
        while read_summary("before", store).status != "completed":
            assert time.monotonic() < deadline, "the first run was never taken"
            time.sleep(0.05)
        shutil.rmtree(folder)
        while not warned:
            assert time.monotonic() < deadline, "the worker said nothing of its store's file deleted"
            time.sleep(0.02)
        assert "was deleted" in warned[0], warned
        folder.mkdir()
        submit("say hello", store=store, run_id="after", workspace=str(tmp_path), demo=True)
        while read_summary("after", store).status != "completed":
            assert time.monotonic() < deadline, f"the run queued in the new file was never taken: {warned}"
            time.sleep(0.05)
    assert warned[-1] == f"can list the runs of {store} again", warned


def test_a_run_whose_sqlite_file_is_deleted_under_its_writer_records_nothing_more_and_says_so(tmp_path: Path) -> None:
    """Each step went on being "recorded" in the deleted file (an open connection writes on),
    so a worker reported the run completed with its whole log gone; and a writer opened after
    the delete made the folder again, with a file that had no run index."""
    folder = tmp_path / "store"
    folder.mkdir()
    store = f"sqlite:///{folder / 'runs.db'}"
    with opened(store) as kept:
        with EventLog("written", kept) as log:
            log.start_run(AgentSettings(task="task").to_json())
            shutil.rmtree(folder)
            with pytest.raises(StoreError, match="was deleted while"):
                run_step(log, "model:0", lambda: {"message": {}}, effect="idempotent")
        with pytest.raises(StoreError, match="was deleted while"):
            kept.open_writer("another")
    assert not folder.exists()


def test_a_worker_recalls_a_store_it_still_cannot_reach_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_trouble, "RECALL_AFTER", 0.3)
    warned: list[str] = []
    unreachable = f"sqlite:///{tmp_path / 'no-such-folder' / 'runs.db'}"
    worker = ResumeWorker(unreachable, poll=0.05, warn=warned.append)
    with running(worker):
        deadline = time.monotonic() + 30
        while len(warned) < 3:
            assert time.monotonic() < deadline, f"not recalled: {warned}"
            time.sleep(0.02)
    assert warned[1] == warned[2] == (
        f"still cannot list the runs of {unreachable} (as said above); trying again every 0.05 s, "
        "and within a second of its file being there again"
    )


def test_what_a_worker_says_of_when_it_looks_again_at_each_kind_of_store() -> None:
    """Only the polls look again at a JSONL folder (nothing wakes a worker there); a PostgreSQL
    server and a SQLite file are tried every second besides."""
    assert store_trouble.trying_again("runs", 60) == "trying again every 60 s"
    assert store_trouble.trying_again("jsonl:///srv/runs", 7.5) == "trying again every 7.5 s"
    assert store_trouble.trying_again("runs.db", 60).endswith("every 60 s, and within a second of its file being there again")
    assert store_trouble.trying_again("sqlite:///runs.db", 60).endswith("within a second of its file being there again")
    assert store_trouble.trying_again("postgresql://u@h/db", 60) == (
        "trying again every 60 s, and within a second of the server answering again"
    )


def test_a_worker_says_it_is_ready_once_the_sdk_is_imported_and_before_it_takes_a_run(tmp_path: Path) -> None:
    """The CLI's banner printed before the SDK's import (over a second), so a worker that had
    said it was there was not yet able to take a run; a bench waiting for it measured imports."""
    code = (
        "import sys\nfrom nb_durable.agent.fleet.worker import ResumeWorker\n"
        "said = []\n"
        "w = ResumeWorker(sys.argv[1], ready=lambda: said.append(('ready', 'anthropic' in sys.modules)), "
        "report=lambda taken: said.append(('took', taken.run_id)))\n"
        "w.run(once=True)\nprint(said)\n"
    )
    store = str(tmp_path / "runs")
    with EventLog("died", store) as log:  # a writer that died: a worker takes it
        log.start_run(AgentSettings(task="t", model="demo", model_kind="demo", workspace=str(tmp_path)).to_json())
    done = subprocess.run([sys.executable, "-c", code, store], env=subprocess_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('ready', True), ('took', 'died')]", done.stdout + done.stderr


def test_a_queued_run_whose_workspace_is_not_here_is_passed_over_until_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another machine sharing the store may have the folder, or a person may restore it: the
    run stays queued with nothing recorded, and is taken once the folder is back."""
    store, workspace = str(tmp_path / "runs"), tmp_path / "gone"
    workspace.mkdir()
    run_id = submit("say hello", store=store, run_id="homeless", workspace=str(workspace), demo=True)
    workspace.rmdir()
    worker = ResumeWorker(store)
    taken = worker.take(run_id)
    assert taken.outcome == PASSED_OVER, taken
    assert "workspace is not on this machine" in taken.detail and str(workspace) in taken.detail, taken.detail
    assert read_summary(run_id, store).status == "queued" and read_run(run_id, store).steps == ()
    assert worker.candidates() == []  # not asked again at every poll
    once = nb_durable_cli("worker", "--store", store, "--once", cwd=tmp_path)
    assert once.returncode == 0, once.stderr
    assert "homeless: passed over: its workspace is not on this machine" in once.stdout, once.stdout
    assert "0 run(s) taken, 0 completed, 1 passed over (said above)" in once.stdout, once.stdout
    monkeypatch.setattr(worker_module, "PASS_OVER_FOR", 0.0)
    soon = ResumeWorker(store)
    assert soon.take(run_id).outcome == PASSED_OVER
    assert soon.candidates() == [run_id]  # tried again once its time is up: not remembered as failed
    workspace.mkdir()
    assert (taken := soon.take(run_id)).outcome == "completed", taken
    told = nb_durable_cli("worker", "--help", cwd=tmp_path)  # and the worker's help says so
    said = " ".join(told.stdout.split())
    assert "(its workspace folder missing," in said and "passed over with the reason and tried again a minute later" in said, said


@pytest.mark.postgres
def test_a_run_whose_store_fails_while_a_worker_takes_it_is_tried_again_once_the_store_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database refuses writes as the worker takes a queued run (its disk full): the run is
    the store's victim, not at fault, and its log never changes; so it is passed over for a
    while, not remembered as failed until its log changes (which left it queued for ever)."""
    import psycopg

    from tests.pg import postgres_url

    store = postgres_url()
    run_id = submit("say hello", store=store, run_id="victim", workspace=str(tmp_path), demo=True)
    with psycopg.connect(store, autocommit=True) as admin:
        admin.execute(
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN "
            "RAISE EXCEPTION 'could not extend file: No space left on device'; END $$ LANGUAGE plpgsql"
        )
        admin.execute("CREATE TRIGGER refuse BEFORE INSERT ON nb_durable_events FOR EACH ROW EXECUTE FUNCTION refuse()")
        worker = ResumeWorker(store)
        taken = worker.take(run_id)
        assert taken.outcome == PASSED_OVER, taken
        assert "the store failed while it was taken" in taken.detail and "No space left on device" in taken.detail, taken.detail
        assert read_summary(run_id, store).status == "queued"
        assert worker.candidates() == []  # not asked again at every poll
        admin.execute("DROP TRIGGER refuse ON nb_durable_events")
    monkeypatch.setattr(worker_module, "PASS_OVER_FOR", 0.0)
    worker._passed_over[run_id] = 0.0  # its minute is up
    assert worker.candidates() == [run_id]
    assert (taken := worker.take(run_id)).outcome == "completed", taken


@pytest.mark.usefixtures("no_ambient_anthropic")
def test_a_worker_without_credentials_passes_over_a_run_for_the_messages_api_and_never_fails_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run queued where a key was set, taken by a worker started without one: the worker
    resumed it and recorded it failed ('no credentials'), and so every run it took, each left
    for a person to resume, with advice in Python's words (resume_agent(...)) on a terminal."""
    store = str(tmp_path / "runs")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-queued-with-a-key")
    run_id = submit("say hello", store=store, run_id="keyless", workspace=str(tmp_path))
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    taken = ResumeWorker(store).take(run_id)
    assert taken.outcome == PASSED_OVER, taken
    assert "this worker has no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN or ANTHROPIC_BASE_URL set" in taken.detail, taken.detail
    assert read_summary(run_id, store).status == "queued" and read_run(run_id, store).steps == ()
    demo = submit("say hello", store=store, run_id="demo", workspace=str(tmp_path), demo=True)
    assert ResumeWorker(store).take(demo).outcome == "completed"  # the demo model needs no credentials


def test_a_worker_stopped_while_a_model_call_waits_to_try_again_leaves_the_run_interrupted_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM during a 529 storm: the worker went on retrying for some 20 s, then recorded the
    run failed (which no worker takes) instead of stopping and leaving it to the next worker."""
    from tests.fakes import Error, FunctionScenario, MessagesAPIServer

    asked = threading.Event()

    def overloaded(request: Any) -> Error:
        asked.set()
        return Error(529, "overloaded_error", "Overloaded")

    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(overloaded)) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        run_id = submit("say hello", store=store, run_id="stormy", workspace=str(tmp_path), model="claude-test-1")
        worker = ResumeWorker(store)
        taken: list[Any] = []
        thread = threading.Thread(target=lambda: taken.append(worker.take(run_id)))
        thread.start()
        assert asked.wait(30), "the worker sent no request"
        stopped = time.monotonic()
        worker.stop()
        thread.join(30)
    assert time.monotonic() - stopped < 5, "the stop waited for the retries"
    assert taken and taken[0].outcome == "interrupted", taken
    summary = read_summary(run_id, store)
    assert summary.status == "interrupted" and (summary.error or "").startswith(f"stopped by worker {worker.name}"), summary
    assert ResumeWorker(store).candidates() == [run_id]  # the next worker takes it


def test_a_worker_line_gives_its_advice_as_commands(tmp_path: Path) -> None:
    """A run the worker saw fail said 'resume it with resume_agent(...)' on a terminal: the
    worker's lines now say the nb-durable command, as every other command's do."""
    from tests.fakes import Error, FunctionScenario, MessagesAPIServer

    store = f"sqlite:///{tmp_path / 'runs.db'}"
    with MessagesAPIServer(FunctionScenario(lambda request: Error(400, message="a request the API refuses"))) as server:
        (tmp_path / "t.jsonl").write_text('{"task": "say hello", "run": "refused"}\n')
        done = nb_durable_cli("run", "--batch", "t.jsonl", "--store", store, "--workspace", str(tmp_path), cwd=tmp_path,
                              ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.url)  # fmt: skip
        assert done.returncode == 0, done.stderr
        worker = nb_durable_cli("worker", "--once", "--store", store, cwd=tmp_path, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.url)
    assert worker.returncode == 0, worker.stderr
    line = next(line for line in worker.stdout.splitlines() if line.startswith("refused: failed"))
    assert f"nb-durable resume refused --store {store}" in line and "resume_agent" not in line, line


def test_a_worker_whose_key_is_refused_stops_after_the_run_that_met_it(tmp_path: Path) -> None:
    """A worker started with a wrong key took every queued run in turn and recorded each one
    failed (401), the whole queue left for a person to resume one by one."""
    from tests.fakes import Error, FunctionScenario, MessagesAPIServer

    store = f"sqlite:///{tmp_path / 'runs.db'}"
    lines = "".join(f'{{"task": "say hello", "run": "r{i}"}}\n' for i in range(3))
    (tmp_path / "t.jsonl").write_text(lines)
    refused = FunctionScenario(lambda request: Error(401, message="invalid x-api-key"))
    with MessagesAPIServer(refused) as server:
        done = nb_durable_cli("run", "--batch", "t.jsonl", "--store", store, "--workspace", str(tmp_path), cwd=tmp_path,
                              ANTHROPIC_API_KEY="sk-wrong", ANTHROPIC_BASE_URL=server.url)  # fmt: skip
        assert done.returncode == 0, done.stderr
        worker = nb_durable_cli("worker", "--once", "--store", store, cwd=tmp_path, ANTHROPIC_API_KEY="sk-wrong", ANTHROPIC_BASE_URL=server.url)
    assert worker.returncode == 1, (worker.stdout, worker.stderr)
    statuses = sorted(s.status for s in list_runs(store))
    assert statuses == ["failed", "queued", "queued"], statuses
    failed = next(s.run_id for s in list_runs(store) if s.status == "failed")
    said = f"the Messages API refused this worker's credentials (401) on run {failed}, so it takes no more runs"
    assert said in worker.stderr and f"nb-durable resume {failed}" in worker.stderr, worker.stderr


@pytest.mark.postgres
def test_a_worker_s_advice_names_its_store_without_the_password(tmp_path: Path) -> None:
    """A worker on PostgreSQL whose key was refused said 'nb-durable resume r0': typed as
    printed, that looked in the default folder and found no such run."""
    import shlex

    from tests.fakes import Error, FunctionScenario, MessagesAPIServer
    from tests.pg import postgres_url

    url = postgres_url().replace("postgres@", "postgres:s3cret@")  # the server trusts 127.0.0.1
    (tmp_path / "t.jsonl").write_text('{"task": "say hello", "run": "r0"}\n')
    with MessagesAPIServer(FunctionScenario(lambda request: Error(401, message="invalid x-api-key"))) as server:
        done = nb_durable_cli("run", "--batch", "t.jsonl", "--store", url, "--workspace", str(tmp_path), cwd=tmp_path,
                              ANTHROPIC_API_KEY="sk-wrong", ANTHROPIC_BASE_URL=server.url)  # fmt: skip
        assert done.returncode == 0, done.stderr
        worker = nb_durable_cli("worker", "--once", "--store", url, cwd=tmp_path, ANTHROPIC_API_KEY="sk-wrong", ANTHROPIC_BASE_URL=server.url)
    assert worker.returncode == 1, (worker.stdout, worker.stderr)
    assert "s3cret" not in worker.stdout + worker.stderr
    command = f"nb-durable resume r0 --store {shlex.quote(url.replace(':s3cret@', '@'))}"
    left_out = "(the store's password is left out of that command: set PGPASSWORD"
    line = next(line for line in worker.stdout.splitlines() if line.startswith("r0: failed"))
    assert command in line and left_out in line, line
    assert command in worker.stderr and left_out in worker.stderr, worker.stderr
    assert read_summary("r0", url).status == "failed"


def test_a_worker_given_a_store_name_no_store_has_exits_at_once_without_its_banner(tmp_path: Path) -> None:
    """'postgresq://...' (a typo) took the worker for an outage: it printed its ready banner and
    tried again every poll, for ever, on a name no retry could ever open."""
    (tmp_path / "folder.db").mkdir()  # a path of the wrong kind waits out no outage either: it
    (tmp_path / "afile").write_text("not a folder")  # said it made the store, then idled for ever
    said = {
        "postgresq://ops:pw@127.0.0.1:5432/runs": "unknown store scheme 'postgresq://'",
        "sqlite:runs.db": "'sqlite:runs.db' is a store URL without its '//'",
        "folder.db": "is a folder, not a SQLite file",
        "afile": "afile is a file, not a runs folder",
        f"jsonl://{tmp_path / 'afile'}": "afile is a file, not a runs folder",
    }
    for store, why in said.items():
        worker = nb_durable_cli("worker", "--store", store, "--poll", "0.1", cwd=tmp_path, timeout=60)
        assert worker.returncode == 2, (worker.stdout, worker.stderr)
        assert worker.stdout == "" and why in worker.stderr and "pw" not in worker.stderr, (worker.stdout, worker.stderr)


@pytest.mark.postgres
def test_a_worker_on_a_postgresql_database_or_schema_the_server_lacks_exits_2_saying_what_to_do(tmp_path: Path) -> None:
    """A database that does not exist was waited for as an outage: a warning, then a try every
    poll, for ever. So was a schema the URL names that does not exist: a worker makes the tables
    of an empty schema (a new store), never the schema itself. Both are the URL's mistake."""
    from tests.pg import postgres_url, server

    url = postgres_url().replace("postgres@", "postgres:s3cret@")  # the server trusts 127.0.0.1
    no_database = url.split("?")[0].rsplit("/", 1)[0] + "/nosuch_db"
    no_schema = url.split("?")[0] + "?options=-csearch_path%3Dnosuch_schema"
    said = {
        no_database: [f"host 127.0.0.1, port {server().port}, database nosuch_db", "has no database nosuch_db",
                      f"create it (createdb -h 127.0.0.1 -p {server().port} -U postgres nosuch_db)"],
        no_schema: ["of the connection's search_path (nosuch_schema) exists in that database", "CREATE SCHEMA"],
    }  # fmt: skip
    for store, words in said.items():
        worker = nb_durable_cli("worker", "--store", store, "--poll", "0.1", cwd=tmp_path, timeout=60)
        assert worker.returncode == 2, (worker.stdout, worker.stderr)
        assert worker.stdout == "" and "cannot list the runs" not in worker.stderr, (worker.stdout, worker.stderr)
        assert all(w in worker.stderr for w in words) and "s3cret" not in worker.stderr, worker.stderr
    empty = nb_durable_cli("worker", "--once", "--store", url, cwd=tmp_path, timeout=60)  # a new store: made, as before
    assert empty.returncode == 0 and "no store was there: made empty" in empty.stdout, (empty.stdout, empty.stderr)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_worker_takes_any_concurrency_its_flag_takes(kind: str, tmp_path: Path) -> None:
    """--concurrency past 2**63 - 1 was asked of the store as the claim's limit: SQLite's
    OverflowError traceback, PostgreSQL's "bigint out of range"."""
    store = make_store_url(kind, tmp_path)
    huge = str(10**20)
    worker = nb_durable_cli("worker", "--once", "--concurrency", huge, "--store", store, cwd=tmp_path, timeout=60)
    assert worker.returncode == 0 and f": {huge} at a time" in worker.stdout, (worker.stdout, worker.stderr)
    assert worker.stdout.endswith(": 0 run(s) taken, 0 completed\n") and worker.stderr == "", (worker.stdout, worker.stderr)


def test_a_worker_on_a_store_not_there_yet_says_so_in_its_first_line(tmp_path: Path) -> None:
    """A worker may start before the first submit, so it makes its store; on a mistyped name it
    then idled on a store nobody queues into, its banner the same as on the right one. A folder
    was said "made empty" and not made: runs then said there was no store there."""
    for name in ("mistyped.db", "mistyped-folder"):
        first = nb_durable_cli("worker", "--once", "--store", name, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert f"on {name}: 1 at a time (no store was there: made empty, it waits for runs queued into it; is the name right?)" in first.stdout
        listed = nb_durable_cli("runs", "--store", name, cwd=tmp_path)
        assert listed.returncode == 0 and listed.stdout == f"no runs in {name}\n", (listed.stdout, listed.stderr)
        again = nb_durable_cli("worker", "--once", "--store", name, cwd=tmp_path)
        assert "no store was there" not in again.stdout and f"on {name}: 1 at a time\n" in again.stdout, again.stdout
    # One it cannot make (its folder is not there) was said "made empty" before it said it could not open it.
    unmade = nb_durable_cli("worker", "--once", "--store", "no-folder/runs.db", cwd=tmp_path)
    assert unmade.returncode == 2 and "cannot open the SQLite store no-folder/runs.db" in unmade.stderr, (unmade.stdout, unmade.stderr)
    assert unmade.stdout.endswith("on no-folder/runs.db: 1 at a time\n"), unmade.stdout


@pytest.mark.postgres
def test_a_worker_on_a_postgresql_schema_with_no_store_says_so_in_its_first_line_and_not_of_a_server_down(tmp_path: Path) -> None:
    """On PostgreSQL it made the tables in a mistyped schema without a word (the check asked
    only SQLite files and folders); a server it cannot reach is no store missing, and says so
    itself, so its banner adds nothing then."""
    from tests.pg import postgres_url

    url = postgres_url()
    first = nb_durable_cli("worker", "--once", "--store", url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "1 at a time (no store was there: made empty, it waits for runs queued into it; is the name right?)" in first.stdout
    again = nb_durable_cli("worker", "--once", "--store", url, cwd=tmp_path)
    assert again.returncode == 0 and "no store was there" not in again.stdout, again.stdout
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        nobody = f"postgresql://postgres@127.0.0.1:{free.getsockname()[1]}/postgres"
    down = nb_durable_cli("worker", "--once", "--store", nobody, cwd=tmp_path, timeout=120)
    assert "no store was there" not in down.stdout, (down.stdout, down.stderr)


def test_a_worker_that_loses_a_run_s_lease_says_workers_take_it_again(tmp_path: Path) -> None:
    """Its line passed on the lease error's advice to a person ('open the run again'), though
    workers take the run again by themselves once its lease is free."""
    store = str(tmp_path / "runs")
    run_id = submit("say hello", store=store, run_id="lost", workspace=str(tmp_path), demo=True)
    held: list[EventLog] = []

    class Superseded(ResumeWorker):
        def _before_step(self, position: int, view: Any) -> None:
            if not held:  # a writer of another thread takes the run: this one's lease is gone
                taker = threading.Thread(target=lambda: held.append(EventLog(run_id, store)))
                taker.start()
                taker.join()
            super()._before_step(position, view)

    taken = Superseded(store).take(run_id)
    held[0].close()
    assert taken.outcome == "locked", taken
    assert taken.detail.endswith("Workers take it again at their next look, as soon as its lease is free."), taken.detail


def test_the_last_line_counts_runs_another_writer_took_apart_from_runs_passed_over() -> None:
    # A run whose lease another writer took between the look and the take was not passed over:
    # the lines above said "locked", and the last line must not call it something else.
    from nb_durable.agent.fleet.taken import Taken
    from nb_durable.cli.worker_command import tally

    taken = [
        Taken("a", "completed"), Taken("b", "locked", "held by vm:1"), Taken("c", PASSED_OVER, "no key"),
        Taken("d", "locked", "held by vm:2"), Taken("e", "interrupted"),
    ]  # fmt: skip
    assert tally(taken) == "2 run(s) taken, 1 completed, 1 passed over, 2 taken by another writer (said above)"
    assert tally([Taken("a", "completed")]) == "1 run(s) taken, 1 completed"


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """The worker command takes SIGTERM and SIGINT (and puts back the default on the first):
    this process's own handlers are put back after the test."""
    kept = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)


def test_a_worker_signalled_while_starting_says_it_stopped_before_taking_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], signals_kept: None
) -> None:
    """SIGTERM during start-up (the SDK's import takes a second) printed "stopping; runs in
    flight stop at their next step" and then the ready line, as if it went on to take runs."""
    from nb_durable.cli import main

    store = str(tmp_path / "runs.db")
    EventLog("r", store).close()
    started = worker_module.preload  # type: ignore[attr-defined]

    def signalled_while_importing() -> None:  # the signal comes while the SDK loads, as a service manager's may
        os.kill(os.getpid(), signal.SIGTERM)
        started()

    monkeypatch.setattr(worker_module, "preload", signalled_while_importing)
    assert main(["worker", "--store", store, "--poll", "0.1"]) == 0
    said = capsys.readouterr()
    assert said.out == f"nb-durable worker {socket.gethostname()}:{os.getpid()}: stopped while starting, before taking any run\n"
    assert said.err == "", "no 'stopping; runs in flight': there were none, and it never was ready"


def test_a_worker_signalled_as_it_says_it_is_ready_says_stopping_after_that_line(tmp_path: Path, signals_kept: None) -> None:
    """A signal in the middle of the ready line is said after it, never before (on a terminal,
    where stdout and stderr are one screen)."""
    from nb_durable.cli import main

    store = str(tmp_path / "runs.db")
    EventLog("r", store).close()
    screen: list[str] = []

    class Screen:
        def write(self, text: str) -> int:
            if " at a time" in text:
                os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here, inside the print
            screen.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    streams = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = Screen()
    try:
        assert main(["worker", "--store", store, "--poll", "0.1"]) == 0
    finally:
        sys.stdout, sys.stderr = streams
    name = f"{socket.gethostname()}:{os.getpid()}"
    assert "".join(screen).splitlines() == [
        f"nb-durable worker {name} on {store}: 1 at a time",
        f"nb-durable worker {name}: stopping; runs in flight stop at their next step",
        f"nb-durable worker {name}: 0 run(s) taken, 0 completed",
    ]


def test_a_run_another_writer_took_since_the_look_is_said_taken_by_it_not_passed_over(tmp_path: Path) -> None:
    """Two workers on a JSONL folder (whose looks claim nothing) both looked at a queued run: the one
    that came second said "passed over: no longer needs a worker", and counted it passed over."""
    store = str(tmp_path / "runs")
    run_id = submit("say hello", store=store, run_id="raced", workspace=str(tmp_path), demo=True)
    held: list[EventLog] = []
    taker = threading.Thread(target=lambda: held.append(EventLog(run_id, store)))
    taker.start()
    taker.join()
    try:
        run_step(held[0], "settings:0", lambda: {})  # the other writer goes on: the run is running
        taken = ResumeWorker(store).take(run_id)
    finally:
        held[0].close()
    assert taken.outcome == "locked", taken
    assert taken.detail.startswith(f"another writer (pid {os.getpid()} on host "), taken.detail
    assert taken.detail.endswith("took it first and is running it"), taken.detail
