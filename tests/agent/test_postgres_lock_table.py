"""A PostgreSQL server out of shared memory for locks (SQLSTATE 53200, "out of shared memory":
its lock table, max_locks_per_transaction times max_connections entries, is full) is said as
what it is, naming the setting to raise, to a run, to ``nb-durable runs`` and to a worker; a
step's result it refuses is written once the table has room, or kept past the wait.

It was told "The database server ran out of memory: ... give the server more memory (or a lower
work_mem)", which is not what the server's hint says, and a connection it refused for it was
told as "the connection dropped ... Check that the server runs" (or, to a first connection,
"check ... the user, password and database in the URL"). The server here is one of this
module's own (``tests/pg.py``) with the smallest lock table it allows; another application's
session fills the table with advisory locks, as a long migration or a lock-hungry job would.
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from nb_durable.agent import AgentResult, RunHooks
from nb_durable.agent.display.step_views import StepView
from nb_durable.agent.fleet.batch import submit
from nb_durable.agent.fleet.taken import Taken
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.run.hooks import Approval
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.agent.tools import ToolRegistry, tool
from nb_durable.core.events import RunStarted, StepCompleted
from nb_durable.core.log import EventLog
from nb_durable.core.runs import list_runs, read_run, read_summary
from nb_durable.core.stepping import run_step
from nb_durable.core.stores import shown_store
from nb_durable.core.stores.postgres import reconnect
from nb_durable.errors import ServerShortError, StoreWaitWarning
from nb_durable.testing import ScriptedModel, text_message, tool_use_message
from tests import markers
from tests.conftest import nb_durable_cli
from tests.pg import PostgresServer
from tests.waiting import wait_until

pytestmark = pytest.mark.postgres

RAISE_IT = "have max_locks_per_transaction raised on the server (it takes a restart)"
"""What every message says to do (``urls._LOCK_TABLE_FULL``), with the setting the server's hint names."""


@pytest.fixture(scope="module")
def small() -> Iterator[PostgresServer]:
    """A server of this module's own whose lock table is as small as PostgreSQL allows."""
    markers.require("postgres", "a PostgreSQL server of its own")
    pg = PostgresServer(settings={"max_locks_per_transaction": "10", "max_connections": "20"}).start()
    try:
        yield pg
    finally:
        pg.stop()


@contextlib.contextmanager
def lock_table_full(pg: PostgresServer) -> Iterator[int]:
    """Another application's session holding advisory locks until the server has no room for
    one more (the server's own 53200), the number it holds; ended, its locks go with it."""
    hog = psycopg.connect(pg.url(), autocommit=True)
    held = 0
    try:
        with pytest.raises(psycopg.errors.OutOfMemory, match="out of shared memory"):
            while True:
                hog.execute("SELECT pg_advisory_lock(424242, %s)", (held,))
                held += 1
        yield held
    finally:
        hog.close()


def test_a_run_whose_step_the_server_has_no_lock_for_stops_saying_which_setting_to_raise_and_resumes(
    small: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)  # the table stays full past the wait
    url = small.fresh_schema()
    filled = contextlib.ExitStack()
    calls: list[str] = []

    def fill() -> str:
        """Start the other application's job."""
        calls.append("fill")
        if len(calls) == 1:  # a resume that calls it again finds it started
            filled.enter_context(lock_table_full(small))  # the step's own record then finds no lock to take
        return "started"

    tools = ToolRegistry([tool(fill, effect="idempotent")])

    first = ScriptedModel([tool_use_message([("fill", {})]), text_message("done")])
    with filled, pytest.raises(ServerShortError) as stopped, warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWaitWarning)
        run_agent("start the job", client=first, tools=tools, store=url, run_id="job", workspace=str(tmp_path))
    said = str(stopped.value)
    assert said.startswith("cannot record the result of step 'tool:0:0:"), said
    assert "of run 'job' in the PostgreSQL store postgresql://postgres@127.0.0.1:" in said, said
    assert "out of shared memory" in said and RAISE_IT in said, said
    assert "give the server more memory" not in said and "work_mem" not in said, "the advice for another shortage"

    # The lock table has room again: nothing recorded was lost, and the run goes on from its record.
    assert [s.step_id for s in read_run("job", url).steps if s.state == "completed"] == ["model:0"]
    again = ScriptedModel([text_message("done")])  # only the call after the tool's: the first is recorded
    result = resume_agent("job", client=again, tools=tools, store=url)
    assert result.status == "completed" and result.replayed_steps == 1, result
    assert len(first.requests) == 1 and len(again.requests) == 1, "the recorded model call was replayed, not asked again"
    assert calls == ["fill", "fill"], "the call whose result was not recorded is made again (idempotent)"


def test_nb_durable_runs_on_a_server_out_of_lock_table_says_so_not_to_check_the_url(small: PostgresServer, tmp_path: Path) -> None:
    url = small.fresh_schema()
    submit("say hello", store=url, run_id="queued", workspace=str(tmp_path), demo=True)
    with lock_table_full(small):
        done = nb_durable_cli("runs", "--store", url, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stderr
    assert said.startswith("nb-durable: cannot connect to the PostgreSQL store postgresql://postgres@127.0.0.1:"), said
    assert "out of shared memory" in said and RAISE_IT in said, said
    assert "user, password and database in the URL" not in said and "Check that the server runs" not in said, said
    assert "queued" in nb_durable_cli("runs", "--store", url, cwd=tmp_path).stdout, "listed once the table has room"


@pytest.mark.slow(8)
def test_a_worker_waits_out_a_full_lock_table_saying_so_once_then_takes_its_run(
    small: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    url = small.fresh_schema()
    run_id = submit("say hello", store=url, workspace=str(tmp_path), demo=True)
    said: list[str] = []
    taken: list[Taken] = []
    worker = ResumeWorker(store=url, poll=0.2, report=taken.append, warn=said.append)
    thread = threading.Thread(target=worker.run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StoreWaitWarning)  # a store opened anew says it waits: the worker's lines say the rest
        with lock_table_full(small):
            thread.start()
            wait_until(lambda: worker.polls == 0 and len(said) >= 1, "the worker to say it cannot list the runs", seen=lambda: said)
            time.sleep(1.0)  # several polls meanwhile: said once
            assert len(said) == 1 and not taken, said
        wait_until(lambda: bool(taken), "the worker to take the run once the lock table has room", timeout=60, seen=lambda: said)
        worker.stop()
        thread.join(30)
    assert said[0].startswith("cannot list the runs of postgresql://postgres@127.0.0.1:"), said
    assert "out of shared memory" in said[0] and RAISE_IT in said[0] and "trying again every 0.2 s" in said[0], said
    assert said[1:] == [f"can list the runs of {shown_store(url)} again"], said
    assert [(t.run_id, t.outcome) for t in taken] == [(run_id, "completed")], taken
    assert read_summary(run_id, url).status == "completed"


def ledger_send(small: PostgresServer, ledger: Path, filled: contextlib.ExitStack, free_after: float | None = None) -> Callable[[str], str]:
    """A tool with an external effect (a line in ``ledger``) whose first call then fills the lock
    table (another application's job: ``filled`` ends it), so its own result meets a full table;
    freed ``free_after`` seconds later, if given."""
    started: list[bool] = []

    def send(text: str) -> str:
        """Send a message."""
        with ledger.open("a") as f:
            f.write(f"{text}\n")
        if not started:
            started.append(True)
            filled.enter_context(lock_table_full(small))
            if free_after is not None:
                threading.Timer(free_after, filled.close).start()
        return f"sent {text}"

    return send


def test_a_step_result_the_full_lock_table_refuses_is_written_once_it_frees(
    small: PostgresServer, tmp_path: Path
) -> None:
    """A step's result the server refused for a full lock table failed the run at once: the
    message was sent, and a resume found it in doubt (or sent it again)."""
    url = small.fresh_schema()
    ledger = tmp_path / "ledger.txt"
    model = ScriptedModel([tool_use_message([("send", {"text": "hello"})]), text_message("done")])
    with contextlib.ExitStack() as filled, warnings.catch_warnings(record=True) as seen:
        tools = ToolRegistry([tool(ledger_send(small, ledger, filled, free_after=2.0), effect="external")])
        warnings.simplefilter("always", StoreWaitWarning)
        result = run_agent("send it", client=model, tools=tools, store=url, run_id="sends", workspace=str(tmp_path))
    assert result.status == "completed", result
    assert ledger.read_text() == "hello\n", "the message was sent once"
    steps = read_run("sends", url).steps
    assert [s.state for s in steps] == ["completed"] * 3 and len({s.step_id for s in steps}) == 3, steps
    said = [str(w.message) for w in seen if issubclass(w.category, StoreWaitWarning)]
    assert len(said) == 2 and " answers again after " in said[1], said  # the wait, then its end
    assert said[0].startswith("the server of run 'sends' in the PostgreSQL store postgresql://postgres@127.0.0.1:"), said
    assert "is out of shared memory (out of shared memory); trying again to write to it for up to" in said[0], said


def test_a_step_result_refused_past_the_wait_is_kept_and_recorded_when_the_step_runs_again(
    small: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the wait ends, the result is not lost: running the step again with the same log
    records it, and the effect does not run again."""
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    url = small.fresh_schema()
    ledger = tmp_path / "ledger.txt"
    with contextlib.ExitStack() as filled, EventLog("sends", url) as log:
        send = ledger_send(small, ledger, filled)
        run_step(log, "first", lambda: "kept")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWaitWarning)
            with pytest.raises(ServerShortError) as refused:
                run_step(log, "send", lambda: send("hello"), effect="external")
        said = str(refused.value)
        assert said.startswith("cannot record the result of step 'send' of run 'sends' in the PostgreSQL store postgresql://"), said
        assert "its server is out of shared memory (out of shared memory), and still was after 1 s of trying again" in said, said
        assert RAISE_IT in said and "the result its external effect returned is kept" in said, said
        filled.close()  # the other application's job ends: its locks go
        assert run_step(log, "send", lambda: send("hello"), effect="external") == "sent hello"
    assert ledger.read_text() == "hello\n", "the message was sent once"
    assert [(s.step_id, s.state, s.result) for s in read_run("sends", url).steps] == [
        ("first", "completed", "kept"), ("send", "completed", "sent hello")
    ]


def test_a_child_s_start_the_full_lock_table_refuses_is_written_with_its_parent_s_step_once_it_frees(
    small: PostgresServer,
) -> None:
    """The one transaction writing a parent's step and its child's start (``append_pair``),
    refused for a full lock table, failed the parent at once."""
    url = small.fresh_schema()
    with EventLog("p", url) as parent, EventLog("p.spawn", url) as child, contextlib.ExitStack() as filled:
        run_step(parent, "a", lambda: "a done")
        filled.enter_context(lock_table_full(small))
        threading.Timer(1.5, filled.close).start()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StoreWaitWarning)
            parent.writer.append_with(
                StepCompleted, {"step": "spawn", "hash": None, "result": {"child": "p.spawn"}, "ms": 0.0},
                child.writer, RunStarted, {"run_id": "p.spawn", "settings": {}, "parent": {"run_id": "p", "step": "spawn"}},
            )  # fmt: skip
    assert [(s.step_id, s.state) for s in read_run("p", url).steps] == [("a", "completed"), ("spawn", "completed")]
    assert read_run("p.spawn", url).summary.parent == "p"


def asking_run(small: PostgresServer, tmp_path: Path, url: str, free_after: float) -> tuple[AgentResult, list[str], list[str]]:
    """Run ``asks``, whose ``run_bash`` needs a person's approval; as the approval starts, another
    application's job fills the lock table, freed ``free_after`` seconds later. The approver waits
    for it to free, reads how the listing shows the run, then approves. Returns the result, what
    the listing said while the approver was asked, and the ``StoreWaitWarning``s."""
    freed = threading.Event()
    seen: list[str] = []

    def approval_starts(position: int, view: StepView) -> None:
        if view.step_id.startswith("approval:"):
            filled.enter_context(lock_table_full(small))  # the run's "asking" mark meets a full table

            def free() -> None:
                filled.close()
                freed.set()

            threading.Timer(free_after, free).start()

    def approve(name: str, tool_input: Any, reason: str) -> Approval:
        assert freed.wait(30), "the other application's job did not end"
        summary = {s.run_id: s for s in list_runs(url)}["asks"]
        seen.append(f"{summary.status} {summary.asking.step_id if summary.asking else None}")
        return Approval(True, by="the test")

    replies = [tool_use_message([("run_bash", {"command": "echo pushed"}, "toolu_push")]), text_message("Pushed.")]
    with contextlib.ExitStack() as filled, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StoreWaitWarning)
        result = run_agent(
            "push it", client=ScriptedModel(replies), store=url, run_id="asks", workspace=str(tmp_path),
            approve_bash="echo", hooks=RunHooks(approve=approve, before_step=approval_starts),
        )  # fmt: skip
    return result, seen, [str(w.message) for w in caught if issubclass(w.category, StoreWaitWarning)]


def test_a_run_s_asking_mark_the_full_lock_table_refuses_is_written_once_it_frees(
    small: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark the server refused for a full lock table was dropped at once: the run, waiting for
    a person's answer, was listed as running by ``nb-durable runs``, a worker's listing, the index."""
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 5.0)  # the table frees well within it
    url = small.fresh_schema()
    result, seen, said = asking_run(small, tmp_path, url, free_after=1.5)
    assert seen == ["waiting approval:0:0:toolu_push"], "the run waits for the person's answer: listed as waiting, on it"
    assert result.status == "completed", result
    assert {s.run_id: s.status for s in list_runs(url)} == {"asks": "completed"}, "the mark went with the answer"
    assert not [s for s in said if "mark" in s], said


def test_a_run_s_asking_mark_refused_past_the_wait_says_so_and_the_run_still_asks(
    small: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the wait, the mark is not the run's to fail on (a person is still asked), but a
    listing then says running while the run waits: that is said, not kept silent."""
    monkeypatch.setattr(reconnect, "RECONNECT_SECONDS", 1.0)
    url = small.fresh_schema()
    result, seen, said = asking_run(small, tmp_path, url, free_after=2.5)
    assert result.status == "completed", "the person was asked, and answered, all the same"
    assert seen == ["running None"], "no mark: listed as running (what the warning says)"
    gave_up = [s for s in said if "mark" in s]
    assert len(gave_up) == 1, said
    assert gave_up[0].startswith("cannot mark run 'asks' as waiting in the PostgreSQL store postgresql://"), gave_up
    assert "is out of shared memory (out of shared memory), and still was after 1 s of trying again" in gave_up[0], gave_up
    assert RAISE_IT in gave_up[0] and "listed as running" in gave_up[0], gave_up
