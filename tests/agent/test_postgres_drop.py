"""A PostgreSQL writer's connection drops mid-step and a worker looks at the run in the gap: no
step is recorded twice, no log is forked, and the first writer stops saying what happened.

The lease is the session's advisory lock, so a drop frees it until the writer's next write
takes it back (``core/stores/postgres/reconnect.py``). Proven here with the real pieces: the
first writer is ``run_agent`` on a thread of this process (the real SDK against the loopback
Messages API), its session ended by the server (``pg_terminate_backend``, what a restart or a
network cut does to it), and ``nb-durable worker`` a process of its own on the same server.

A writer of the worker's own host that lives on is left the run (``agent.fleet.live_writers``),
and so is one on another host whose session ended as the server restarted: its tool runs once
and its model call is paid once, each recorded by the writer that made it. A writer on another
host (this process named so) whose session alone ended cannot be told from a dead one, and the
worker takes the run meanwhile, as it takes any run whose writer died:

* An external tool (``run_bash`` appending to a ledger) in flight at the drop: the worker
  settles it as in doubt (skip, its default) and never runs it; the first writer's command
  finishes once, and its result, written after the worker completed the run, is refused: the
  ledger has one line, the log holds the first writer's lines, then the worker's, and says the
  tool's outcome is unknown. A worker that leaves the run (``--in-doubt fail``) writes nothing,
  and the first writer takes its lease back and completes it.
* A model call in flight at the drop: the worker sends it again (a model call has no effect
  but its cost), and the first writer's reply, arriving while the worker holds the run, is
  refused. The API is paid twice, and the log says so: two intents, then one reply, the
  worker's; the first writer's error names the worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.live_writers import LiveWriters
from nb_durable.agent.fleet.taken import PASSED_OVER
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.core import holders
from nb_durable.core.events import StepCompleted, StepStarted
from nb_durable.core.runs import read_run
from nb_durable.core.stores.postgres import PostgresStore
from nb_durable.errors import LeaseLostError
from tests import forkserver
from tests.agent.test_worker import HOST, first_text, workspace
from tests.agent.worker_runs import run_of, start
from tests.conftest import nb_durable_cli, subprocess_env
from tests.core.test_postgres import backend_holding, terminate
from tests.fakes import Action, Delay, MessagesAPIServer, RecordedRequest, Scenario, reply, tool_use
from tests.pg import postgres_url, server
from tests.waiting import wait_until

HOLD = 60.0  # a held reply waits at most this long for the test to release it
LEDGER_COMMAND = "touch started; while [ ! -e gate ]; do sleep 0.05; done; echo x >> ledger.txt"


class Dropping(Scenario):
    """Run ``tool``: a ``run_bash`` that waits for the test's ``gate`` file, then the end. Run
    ``model``: the end, each request's reply held until the test sets its event in ``release``."""

    def __init__(self) -> None:
        self.release = [threading.Event(), threading.Event()]
        self.asked: Counter[str] = Counter()

    def action(self, request: RecordedRequest) -> Action:
        run_id = run_of(first_text(request)) or "?"
        self.asked[run_id] += 1
        if run_id == "model":
            which = min(self.asked[run_id], len(self.release)) - 1
            return Delay(HOLD, reply(f"Done, by writer {which + 1}."), until=self.release[which])
        if request.turn == 0:
            return reply("Recording the entry.", tool_use("run_bash", {"command": LEDGER_COMMAND}, id="toolu_ledger"))
        return reply("Done: the entry may or may not be recorded.")


class FirstWriter:
    """``run_agent`` on a thread, against the store and the API: what it raised, once it ends."""

    def __init__(self, url: str, ws: Path, run_id: str, api: MessagesAPIServer) -> None:
        self.error: BaseException | None = None
        self.ended_at = 0.0
        self._thread = threading.Thread(target=self._run, args=(url, str(ws), run_id, api.url))
        self._thread.start()

    def _run(self, url: str, ws: str, run_id: str, base_url: str) -> None:
        try:
            start(url, ws, run_id, base_url=base_url, api_key="sk-test-first")
        except BaseException as e:  # kept for the test to look at, never lost
            self.error = e
        self.ended_at = time.monotonic()

    def join(self) -> None:
        self._thread.join(90)
        assert not self._thread.is_alive(), "the first writer still runs: it retries forever"

    def alive(self) -> bool:
        return self._thread.is_alive()


@pytest.fixture
def api() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(Dropping()) as s:
        yield s


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first writer (this process) names another host in its lease: to the worker, one it cannot see live or dead."""
    monkeypatch.setattr(holders, "_host", lambda: "elsewhere.example")


LEFT_TO_IT = "lost its lease with its database session and lives on, so it takes the lease back at its next write"
LEFT_AT_RESTART = "lost its lease as the database server restarted, and may live on, so it takes the lease back at its next write"


def lines_of(url: str, run_id: str) -> list[bytes]:
    with PostgresStore(url) as store:
        return store.load(run_id).data.splitlines()


def dropped_mid_tool(tmp_path: Path, api: MessagesAPIServer) -> tuple[str, Path, FirstWriter, list[bytes]]:
    """The first writer's session ended while its ``run_bash`` runs: the URL, workspace, writer and its lines so far."""
    url = postgres_url()
    ws = workspace(tmp_path / "ws")
    first = FirstWriter(url, ws, "tool", api)
    wait_until(lambda: (ws / "started").exists() or not first.alive(), "the first writer's command to start")
    assert first.alive(), first.error
    before = lines_of(url, "tool")  # the tool's intent last
    terminate(backend_holding(url, "tool"))  # the lease goes with the session
    return url, ws, first, before


def dropped_mid_model(tmp_path: Path, api: MessagesAPIServer, *, restart: bool = False) -> tuple[str, Dropping, FirstWriter, list[bytes]]:
    """The first writer's session ended (by the server, or with it: ``restart``) while its model
    request waits for its reply: the URL, the API's routes, the writer and its lines so far."""
    url = postgres_url()
    routes = api.scenario
    assert isinstance(routes, Dropping)
    first = FirstWriter(url, workspace(tmp_path / "ws"), "model", api)
    wait_until(lambda: routes.asked["model"] == 1 or not first.alive(), "the first writer's model request")
    before = lines_of(url, "model")
    if restart:
        server().down()
        server().up()
    else:
        terminate(backend_holding(url, "model"))
    return url, routes, first, before


def assert_completed_once(url: str, run_id: str, before: list[bytes]) -> None:
    """Completed, each step's result once, and the log the first writer's lines, then the worker's."""
    record = read_run(run_id, url)
    assert record.summary.status == "completed", (record.summary.status, record.summary.error)
    results = Counter(e.step for e in record.events if isinstance(e, StepCompleted))
    assert set(results.values()) == {1}, f"steps recorded twice: {results}"
    assert lines_of(url, run_id)[: len(before)] == before, "the log was forked: the first writer's lines were changed"
    assert record.summary.resumed_by is not None and record.summary.resumed_by.startswith(f"{HOST}:")


@pytest.mark.postgres
@pytest.mark.slow(8)
@pytest.mark.parametrize("in_doubt", ["skip", "fail"])
@pytest.mark.usefixtures("elsewhere")
def test_a_tool_in_flight_when_the_connection_of_a_writer_on_another_host_drops_runs_once(
    tmp_path: Path, api: MessagesAPIServer, in_doubt: str
) -> None:
    """``skip``: the worker completes the run, the first writer is refused. ``fail``: the worker
    leaves it, and the first writer takes its lease back and completes it."""
    url, ws, first, before = dropped_mid_tool(tmp_path, api)

    looked = nb_durable_cli(
        "worker", "--store", url, "--once", "--in-doubt", in_doubt, ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-test-worker"
    )
    assert looked.returncode == 0, looked.stdout + looked.stderr
    assert read_run("tool", url).summary.status == {"skip": "completed", "fail": "in_doubt"}[in_doubt]

    (ws / "gate").touch()  # the first writer's command ends, and its writer tries to record it
    released = time.monotonic()
    first.join()
    assert first.ended_at - released < 10, "the first writer took its time to give up"
    assert (ws / "ledger.txt").read_text() == "x\n", "the command ran more than once"
    [told] = [r for r in api.requests if r.endpoint == "messages" and r.turn == 1]
    result = told.messages[-1]["content"][0]
    [tool] = [s for s in read_run("tool", url).steps if s.step_id.startswith("tool:")]
    if in_doubt == "fail":
        assert first.error is None, repr(first.error)
        record = read_run("tool", url)
        assert record.summary.status == "completed" and record.summary.resumed_by is None
        assert tool.state == "completed" and not result["is_error"], result
        assert lines_of(url, "tool")[: len(before)] == before
        return
    assert isinstance(first.error, LeaseLostError), repr(first.error)
    said = str(first.error)
    assert said.startswith("run 'tool' lost its lease on the PostgreSQL store"), said
    assert "the connection dropped" in said and "meanwhile the log changed" in said, said
    assert_completed_once(url, "tool", before)
    # The log says nobody knows whether it took effect, and so was the model told.
    assert tool.state == "skipped"
    assert result["is_error"] and "whether it took effect is unknown" in result["content"], result
    assert Counter(r.turn for r in api.requests if r.endpoint == "messages") == {0: 1, 1: 1}


@pytest.mark.postgres
@pytest.mark.slow(8)
@pytest.mark.usefixtures("elsewhere")
def test_a_model_call_in_flight_when_the_connection_of_a_writer_on_another_host_drops_is_recorded_once_the_worker_s(
    tmp_path: Path, api: MessagesAPIServer
) -> None:
    url, routes, first, before = dropped_mid_model(tmp_path, api)

    env = subprocess_env(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-test-worker")
    worker = forkserver.Popen(
        [sys.executable, "-m", "nb_durable.cli", "worker", "--store", url, "--once"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_until(lambda: routes.asked["model"] == 2, "the worker's model request", alive=(worker,))
        routes.release[0].set()  # the first writer's reply comes while the worker holds the run
        released = time.monotonic()
        first.join()
        routes.release[1].set()
        out, _ = worker.communicate(timeout=60)
    finally:
        for event in routes.release:
            event.set()
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, out
    assert isinstance(first.error, LeaseLostError), repr(first.error)
    assert first.ended_at - released < 10, "the first writer took its time to give up"
    said = str(first.error)
    assert said.startswith("run 'model' lost its lease on the PostgreSQL store"), said
    assert f"meanwhile another writer took the lease: pid {worker.pid} on host {HOST} since " in said, said

    assert_completed_once(url, "model", before)
    [model] = [s for s in read_run("model", url).steps if s.step_id.startswith("model:")]
    assert model.result["message"]["content"][0]["text"] == "Done, by writer 2."
    # Sent twice, recorded once: the log holds both intents, and the one reply.
    started = Counter(e.step for e in read_run("model", url).events if isinstance(e, StepStarted))
    assert started["model:0"] == 2 and routes.asked["model"] == 2


@pytest.mark.postgres
@pytest.mark.slow(8)
def test_a_worker_leaves_a_tool_in_flight_to_its_writer_of_this_host_that_lives_on(tmp_path: Path, api: MessagesAPIServer) -> None:
    url, ws, first, before = dropped_mid_tool(tmp_path, api)

    looked = nb_durable_cli("worker", "--store", url, "--once", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-test-worker")
    assert looked.returncode == 0, looked.stdout + looked.stderr
    assert f"tool: passed over: its writer (pid {os.getpid()} on host {HOST} since " in looked.stdout, looked.stdout
    assert LEFT_TO_IT in looked.stdout, looked.stdout

    (ws / "gate").touch()
    first.join()
    assert first.error is None, repr(first.error)
    assert (ws / "ledger.txt").read_text() == "x\n"
    record = read_run("tool", url)
    assert record.summary.status == "completed" and record.summary.resumed_by is None, record.summary
    [tool] = [s for s in record.steps if s.step_id.startswith("tool:")]
    assert tool.state == "completed"
    assert lines_of(url, "tool")[: len(before)] == before


@pytest.mark.postgres
@pytest.mark.slow(8)
@pytest.mark.parametrize(
    ("where", "said"), [("this host", LEFT_TO_IT), ("another host, the server restarted", LEFT_AT_RESTART)], ids=["this host", "restarted"]
)
def test_a_worker_leaves_a_model_call_in_flight_to_a_writer_that_may_live_on_paid_once(
    tmp_path: Path, api: MessagesAPIServer, monkeypatch: pytest.MonkeyPatch, where: str, said: str
) -> None:
    # A session that ended with the server says nothing of its process, wherever it runs.
    restart = where != "this host"
    if restart:
        monkeypatch.setattr(holders, "_host", lambda: "elsewhere.example")
    url, routes, first, _ = dropped_mid_model(tmp_path, api, restart=restart)
    try:
        looked = nb_durable_cli("worker", "--store", url, "--once", ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="sk-test-worker")
        assert looked.returncode == 0, looked.stdout + looked.stderr
        assert "model: passed over: its writer (pid " in looked.stdout and said in looked.stdout, looked.stdout
    finally:
        routes.release[0].set()  # the first writer's reply comes, and it takes its lease back to record it
    first.join()
    assert first.error is None, repr(first.error)
    record = read_run("model", url)
    assert record.summary.status == "completed" and record.summary.resumed_by is None, record.summary
    [model] = [s for s in record.steps if s.step_id.startswith("model:")]
    assert model.result["message"]["content"][0]["text"] == "Done, by writer 1."
    started = Counter(e.step for e in record.events if isinstance(e, StepStarted))
    assert started["model:0"] == 1 and routes.asked["model"] == 1, (started, routes.asked)


HOLDS = "import sys, time; from nb_durable import EventLog; log = EventLog(sys.argv[1], sys.argv[2]); log.writer; print('held', flush=True); time.sleep(120)"
"""A writer that opens a run, then never writes: a kernel whose run stopped while the server was down."""


@pytest.mark.postgres
@pytest.mark.slow(8)
def test_a_live_writer_that_never_writes_again_holds_its_run_no_longer_than_the_grace(tmp_path: Path) -> None:
    url = postgres_url()
    run_id = submit("say hello", store=url, workspace=str(workspace(tmp_path / "ws")), demo=True)
    holder = forkserver.Popen([sys.executable, "-c", HOLDS, run_id, url], env=subprocess_env(), text=True, stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        terminate(backend_holding(url, run_id))
        worker = ResumeWorker(url, live_writers=LiveWriters(grace=1.0))
        first = worker.take(run_id)
        assert first.outcome == PASSED_OVER and LEFT_TO_IT in first.detail, first
        assert f"pid {holder.pid} on host {HOST}" in first.detail, first
        time.sleep(1.1)
        assert worker.take(run_id).outcome == "completed"
    finally:
        holder.kill()
        holder.wait()
