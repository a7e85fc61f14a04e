"""SIGKILL at every event boundary of a parent with two parallel children, then resume.

A real agent process (``tree_agent.py``, forked by the fork server, the real SDK against this
process's loopback API) is killed as soon as the tree's logs hold k events, for every k up to
the size of an uninterrupted tree, and resumed until it completes. After each trial: each
child exists once, each step of every run is recorded once, each ledger entry happened once,
the parent's transcript equals the uninterrupted run's, and the bill of the tree (``show``'s
roll-up) equals the usage summed from the children's logs themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.delegation.tree import child_ids, with_children
from nb_durable.agent.display.views import views_of
from nb_durable.agent.fleet.worker import STOPPED_BY_WORKER, ResumeWorker
from nb_durable.agent.money.cost import Usage
from nb_durable.core.log import EventLog
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.errors import RunNotFoundError
from tests import forkserver
from tests.agent.agent_worker import ledger_entries
from tests.agent.delegation import tree_agent
from tests.conftest import subprocess_env
from tests.fakes import Delay, FunctionScenario, MessagesAPIServer
from tests.waiting import wait_until

WORKER = Path(tree_agent.__file__)
CHILDREN = ["fix.delegate-0-0-toolu_find", "fix.delegate-0-1-toolu_test"]


def _slow(request: Any) -> Any:
    # Each model call takes a moment, so that a kill lands near the event that triggered it.
    return Delay(0.03, tree_agent.scenario(request))


@contextlib.contextmanager
def _tree_api(monkeypatch: pytest.MonkeyPatch, child_delay: float, parent_delay: float = 0.0) -> Iterator[tuple[MessagesAPIServer, dict[str, str]]]:
    """The tree agent's Messages API, children answering ``child_delay`` s late, as this process's
    API too; yields the server and the environment a child process needs to reach it."""

    def scenario(request: Any) -> Any:
        child = request.messages and request.messages[0]["content"] in tree_agent.REPORTS
        return Delay(child_delay if child else parent_delay, tree_agent.scenario(request))

    with MessagesAPIServer(FunctionScenario(scenario)) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        yield server, env


def _events(store: str) -> int:
    with open_store(store) as opened:
        total = 0
        for run_id in opened.run_ids():
            with contextlib.suppress(RunNotFoundError):  # a run just created, its first line not yet written
                total += opened.load(run_id).data.count(b"\n")
        return total


def _session(store: str, folder: Path, env: dict[str, str], tools: str = "ledger") -> subprocess.Popen[bytes]:
    return forkserver.Popen(
        [sys.executable, str(WORKER), store, str(folder / "work"), str(folder / "ledger"), "fix", tools],
        env=subprocess_env(**env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _transcript(store: str) -> list[tuple[str, Any]]:
    """The parent's steps as the conversation holds them (a reply's id and usage left out: the
    server's prompt cache, shared by the trials, changes what a call reads from cache)."""
    out = []
    for step in read_run("fix", store).steps:
        result = step.result
        if step.step_id.startswith("model:"):
            message = result["message"]
            result = {k: message.get(k) for k in ("content", "stop_reason", "model")}
        out.append((step.step_id, json.dumps(result, sort_keys=True)))
    return out


def _trial(store: str, folder: Path, env: dict[str, str], kill_at: int | None) -> int:
    """Run the tree to completion, SIGKILLing the first session at ``kill_at`` events; the sessions."""
    (folder / "work").mkdir(parents=True, exist_ok=True)
    sessions = 0
    if kill_at is not None:
        # Left by ``with``: a session killed, not read to its end, leaves its stdout pipe to close.
        with _session(store, folder, env) as proc:
            sessions += 1
            wait_until(lambda: _events(store) >= kill_at or proc.poll() is not None, f"{kill_at} events", timeout=60, every=0.002)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
    for _ in range(4):
        proc = _session(store, folder, env)
        sessions += 1
        try:
            out, _ = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()  # a session stuck past its time: ended, its pipe closed, not left to the next test
            proc.communicate()
            raise
        if proc.returncode == 0:
            return sessions
    raise AssertionError(f"the tree did not complete after {sessions} sessions: {out.decode()[-3000:]}")


def _store(kind: str, folder: Path) -> str:
    if kind == "postgres":
        from tests.pg import postgres_url

        return postgres_url()
    return str(folder / "runs.db") if kind == "sqlite" else str(folder / "runs")


def _checked(store: str, folder: Path, reference: list[tuple[str, Any]], ref_steps: dict[str, list[str]]) -> None:
    with open_store(store) as opened:
        assert sorted(opened.run_ids()) == ["fix", *CHILDREN], "each child exists once"
        assert child_ids(opened, "fix") == CHILDREN
        for run_id in ["fix", *CHILDREN]:
            record = read_run(run_id, opened)
            assert record.summary.status == "completed", (run_id, record.summary.error)
            completed = [e.step for e in record.events if e.kind == "step_completed"]  # type: ignore[attr-defined]
            assert len(completed) == len(set(completed)), f"{run_id}: a step recorded twice"
            assert [s.step_id for s in record.steps] == ref_steps[run_id]
        assert _transcript(store) == reference, "the parent's transcript is the uninterrupted run's"
        children_usage = 0
        for child in CHILDREN:
            for step in read_run(child, opened).steps:
                if step.step_id.startswith("model:"):
                    children_usage += Usage.of(step.result["message"]).total
        parent_view = views_of(read_run("fix", opened))[0]
        tree_view, below = with_children(parent_view, opened)
        assert below == 2
        assert tree_view.cost.paid.total - parent_view.cost.paid.total == children_usage > 0
    entries = ledger_entries(folder / "ledger")
    assert sorted(e for _, e in entries) == ["found the bug", "wrote the test"], "each effect once"


@pytest.mark.slow(240)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_sigkill_at_every_event_of_a_tree_resumes_to_the_uninterrupted_tree(tmp_path: Path, kind: str) -> None:
    with MessagesAPIServer(FunctionScenario(_slow)) as server:
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test-key"}
        ref = tmp_path / "reference"
        ref_store = _store(kind, ref)
        assert _trial(ref_store, ref, env, None) == 1
        reference = _transcript(ref_store)
        ref_steps = {r: [s.step_id for s in read_run(r, ref_store).steps] for r in ["fix", *CHILDREN]}
        total = _events(ref_store)
        assert total >= 25
        every = 1 if kind == "jsonl" else 3
        landed = 0
        for k in range(1, total, every):
            folder = tmp_path / f"k{k}"
            store = _store(kind, folder)
            sessions = _trial(store, folder, env, k)
            landed += sessions > 1
            _checked(store, folder, reference, ref_steps)
        assert landed >= (total - 1) // every - 2, "most kills landed before the tree completed"


@pytest.mark.slow(60)
@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_worker_resumes_a_tree_whose_process_died(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, concurrency: int) -> None:
    with _tree_api(monkeypatch, 0.5) as (server, env):
        store = str(tmp_path / "runs")
        (tmp_path / "work").mkdir()
        with _session(store, tmp_path, env, "builtin") as proc:
            # Killed while both children wait for their first reply: three orphans, one tree.
            wait_until(lambda: sum(1 for r in server.requests if r.messages[0]["content"] in tree_agent.REPORTS) == 2, "both children asking")
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        worker = ResumeWorker(store, concurrency=concurrency, poll=0.05)
        taken = worker.run(once=True)
        assert taken, "the worker took the orphans"
        with open_store(store) as opened:
            assert sorted(opened.run_ids()) == ["fix", *CHILDREN]
            for run_id in ["fix", *CHILDREN]:
                record = read_run(run_id, opened)
                assert record.summary.status == "completed", (run_id, record.summary.error, taken)
                starts = [e for e in record.events if e.kind == "run_started"]
                assert len(starts) == 1
            text = read_run("fix", opened).summary.output["text"]
        assert text == f"Done. {tree_agent.REPORTS[tree_agent.FIND]} | {tree_agent.REPORTS[tree_agent.TEST]}"


def _orphaned_tree(tmp_path: Path, server: MessagesAPIServer, env: dict[str, str]) -> str:
    """A tree whose process was SIGKILLed while both children waited for their first reply."""
    store = str(tmp_path / "runs")
    (tmp_path / "work").mkdir()
    with _session(store, tmp_path, env, "builtin") as proc:  # its stdout pipe closed on the way out
        wait_until(lambda: sum(1 for r in server.requests if r.messages[0]["content"] in tree_agent.REPORTS) == 2, "both children asking")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    return store


@pytest.mark.slow(30)
def test_a_worker_s_stop_reaches_the_children_and_the_next_worker_finishes_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _tree_api(monkeypatch, 0.8) as (server, env):
        store = _orphaned_tree(tmp_path, server, env)
        asked = len(server.requests)
        worker = ResumeWorker(store, concurrency=1, poll=0.05)
        done: list[Any] = []
        thread = threading.Thread(target=lambda: done.extend(worker.run(once=True)))
        thread.start()
        wait_until(lambda: len(server.requests) >= asked + 1, "the worker's tree asking the model again")
        worker.stop()
        thread.join(60)
        assert not thread.is_alive(), "a worker's stop never hangs on a tree"
        with open_store(store) as opened:
            parent = read_run("fix", opened).summary
            assert parent.status == "interrupted" and (parent.error or "").startswith(STOPPED_BY_WORKER), parent.error
            stopped = [read_run(c, opened).summary for c in CHILDREN]
            assert all(s.status != "completed" for s in stopped), [s.status for s in stopped]
        # The next worker's passes finish the tree (a run the stopped worker claimed a moment
        # ago is left out of a claim until that claim's hold is up, so one pass may not reach it).
        taken: list[Any] = []
        again = ResumeWorker(store, concurrency=1, poll=0.05)

        def finished() -> bool:
            taken.extend(again.run(once=True))
            with open_store(store) as opened:
                return all(read_run(r, opened).summary.status == "completed" for r in ["fix", *CHILDREN])

        wait_until(finished, "the next worker finishing the tree", timeout=60, every=0.2, seen=lambda: taken)


@pytest.mark.slow(30)
def test_a_worker_never_starts_a_child_whose_parent_a_person_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _tree_api(monkeypatch, 0.5, parent_delay=0.5) as (server, env):
        store = _orphaned_tree(tmp_path, server, env)
        # A person stops the parent: its log says so; its children died with its process.
        with EventLog("fix", store) as log:
            log.finish_run("interrupted", error="stopped by the user")
        worker = ResumeWorker(store, concurrency=2, poll=0.05)
        assert worker.candidates() == []
        asked = len(server.requests)
        assert worker.run(once=True) == [] and len(server.requests) == asked


_RESUME_ONE = """
import sys
from nb_durable.agent import ToolRegistry, builtin_tools, resume_agent
print(resume_agent(sys.argv[2], tools=ToolRegistry(builtin_tools()), store=sys.argv[1]).status, flush=True)
"""


@pytest.mark.slow(30)
def test_a_parent_waits_for_a_child_another_process_is_resuming(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with _tree_api(monkeypatch, 1.0) as (server, env):
        store = _orphaned_tree(tmp_path, server, env)
        other = forkserver.Popen(
            [sys.executable, "-c", _RESUME_ONE, store, CHILDREN[0]], env=subprocess_env(**env), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        with open_store(store) as opened:
            wait_until(lambda: opened.holder(CHILDREN[0]) is not None, "the other process holding the first child", alive=[other])
        result = tree_agent.session(store, str(tmp_path / "work"), str(tmp_path / "ledger"), "fix", tools="builtin")
        out, _ = other.communicate(timeout=60)
        assert out.decode().strip().endswith("completed"), out
        assert result.status == "completed", result.detail
        with open_store(store) as opened:
            for run_id in ["fix", *CHILDREN]:
                record = read_run(run_id, opened)
                assert record.summary.status == "completed"
                completed = [e.step for e in record.events if e.kind == "step_completed"]  # type: ignore[attr-defined]
                assert len(completed) == len(set(completed)), f"{run_id}: a step recorded twice"
        # The first child was resumed by the other process alone: this one only read its ending.
        asked = [r for r in server.requests if r.messages[0]["content"] == tree_agent.FIND and r.turn == 1]
        assert len(asked) == 1, "one process asked the first child's second turn"
