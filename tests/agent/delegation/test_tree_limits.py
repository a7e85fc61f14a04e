"""The tree's limits: one budget for the whole tree, a fan-out of parallel children, one stop.

Through the real SDK against the loopback API: a budget spent inside the children comes back
as error results and the parent ends ``budget_exhausted`` (never a hang); the two children of
one turn run at the same time unless ``delegate_fan_out`` is 1; a stop of the parent stops
its children at their next boundary, and a resume finishes the tree; a sibling started after
a crash gets no part of what an earlier sibling, not run yet, holds.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import ToolRegistry, builtin_tools, tool
from nb_durable.agent.delegation import spawn
from nb_durable.agent.delegation.tree import cost_of, descendants
from nb_durable.agent.display.views import views_of
from nb_durable.agent.run.hooks import RunHooks
from nb_durable.agent.run.stopping import RunStopped, StopSignal
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.core.whole_runs.children import start_child
from nb_durable.errors import SimulatedCrash
from tests.agent.agent_worker import start_or_resume
from tests.agent.delegation import tree_agent
from tests.fakes import Delay, FunctionScenario, MessagesAPIServer, reply, tool_use

CHILDREN = ["fix.delegate-0-0-toolu_find", "fix.delegate-0-1-toolu_test"]


def _slow_children(seconds: float) -> Any:
    def scenario(request: Any) -> Any:
        answer = tree_agent.scenario(request)
        child = request.messages and request.messages[0]["content"] in tree_agent.REPORTS
        return Delay(seconds, answer) if child and (request.turn or 0) == 0 else answer

    return scenario


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Any:
    def start(scenario: Any) -> MessagesAPIServer:
        server = MessagesAPIServer(FunctionScenario(scenario))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        servers.append(server)
        return server

    servers: list[MessagesAPIServer] = []
    yield start
    for server in servers:
        server.close()


def test_a_budget_spent_inside_the_children_ends_the_parent_budget_exhausted(api: Any, workspace: Path, tmp_path: Path) -> None:
    api(tree_agent.scenario)
    store = str(tmp_path / "runs")
    # The parent's first turn fits, each child's first turn fits its half of what remains, its
    # second does not; then the tree has spent too much for the parent's second turn.
    result = tree_agent.session(store, str(workspace), str(tmp_path / "ledger"), "fix", max_run_tokens=3500)
    assert result.status == "budget_exhausted", result.detail
    record = read_run("fix", store)
    answers = [s.result for s in record.steps if s.step_id.startswith("tool:")]
    assert len(answers) == 2
    assert answers[0]["is_error"] and "ended budget_exhausted" in answers[0]["content"], answers[0]
    with open_store(store) as opened:
        assert read_run(CHILDREN[0], opened).summary.status == "budget_exhausted"
        for child in CHILDREN:
            assert read_run(child, opened).summary.settings["max_run_tokens"] < 3500 // 2, "half of what remained each"
        spent = views_of(record)[0].cost.paid.total + sum(cost_of(opened, c).paid.total for c in CHILDREN)
    assert 0 < spent <= 3500, "the tree never spends more than the parent was given"


def _overlap(server: MessagesAPIServer) -> bool:
    child_calls = [r for r in server.requests if r.messages and r.messages[0]["content"] in tree_agent.REPORTS and r.turn == 0]
    assert len(child_calls) == 2
    a, b = sorted(child_calls, key=lambda r: r.received_at)
    assert a.finished_at is not None
    return b.received_at < a.finished_at


@pytest.mark.parametrize(("fan_out", "parallel"), [(4, True), (1, False)])
def test_the_children_of_one_turn_run_at_once_up_to_the_fan_out(
    api: Any, workspace: Path, tmp_path: Path, fan_out: int, parallel: bool
) -> None:
    server = api(_slow_children(0.4))
    result = tree_agent.session(str(tmp_path / "runs"), str(workspace), str(tmp_path / "ledger"), "fix", delegate_fan_out=fan_out)
    assert result.status == "completed", result.detail
    assert _overlap(server) is parallel
    # tool_use order, never completion order: the first call's report comes first.
    assert result.text == f"Done. {tree_agent.REPORTS[tree_agent.FIND]} | {tree_agent.REPORTS[tree_agent.TEST]}"


def test_a_stop_of_the_parent_stops_its_children_and_a_resume_finishes_the_tree(
    api: Any, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api(tree_agent.scenario)
    gate, inside = threading.Event(), threading.Semaphore(0)

    @tool(effect="idempotent")
    def record_entry(entry: str) -> str:
        """Record one entry in the team ledger (here: wait until the test has asked for the stop)."""
        inside.release()
        gate.wait(30)
        return f"recorded {entry!r}"

    monkeypatch.setattr(tree_agent, "registry_for", lambda ledger: ToolRegistry([*builtin_tools(), record_entry]))
    store, ledger = str(tmp_path / "runs"), str(tmp_path / "ledger")
    stop = StopSignal()
    ended: dict[str, Any] = {}

    def parent() -> None:
        try:
            ended["result"] = tree_agent.session(store, str(workspace), ledger, "fix", hooks=RunHooks(stop=stop))
        except BaseException as e:  # the stop arrives as RunStopped, a KeyboardInterrupt
            ended["error"] = e

    thread = threading.Thread(target=parent)
    thread.start()
    for _ in CHILDREN:  # both children inside their tool call
        assert inside.acquire(timeout=60)
    stop.request("stopped by the test")
    gate.set()
    thread.join(30)
    assert not thread.is_alive(), "a stopped parent never hangs"
    assert isinstance(ended.get("error"), RunStopped), ended
    with open_store(store) as opened:
        assert read_run("fix", opened).summary.status == "interrupted"
        for child in CHILDREN:
            summary = read_run(child, opened).summary
            assert summary.status == "interrupted" and "parent run was stopped" in (summary.error or ""), summary.error
            assert summary.completed_steps == 2, "the tool call in flight was let finish and recorded, no more"
    again = tree_agent.session(store, str(workspace), ledger, "fix")
    assert again.status == "completed", again.detail


def test_a_child_stopped_because_its_parent_was_says_so_even_once_the_parents_session_has_ended() -> None:
    """The race behind a flaky run of the test above: the stopped parent's session ended (asking
    each child to stop, "its parent's session ended") before the second child reached its
    boundary, and that child recorded the session's end instead of the parent's stop."""
    from nb_durable.agent.delegation.stop import LinkedStop

    parent = StopSignal()
    child = LinkedStop(parent)
    parent.request("stopped by the test")
    child.request("its parent's session ended")
    with pytest.raises(RunStopped, match=r"^its parent run was stopped \(stopped by the test\)$"):
        child.check()
    alone = LinkedStop(StopSignal())
    alone.request("a person stopped this child")
    with pytest.raises(RunStopped, match="^a person stopped this child$"):
        alone.check()


def test_a_sibling_started_after_a_crash_gets_only_what_the_first_has_not_claimed(
    api: Any, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api(tree_agent.scenario)
    store = str(tmp_path / "runs")

    def killed_before_the_second(*args: Any, **kwargs: Any) -> Any:
        if args[2] == CHILDREN[1]:
            raise SimulatedCrash("killed between the starts of the two children")
        return start_child(*args, **kwargs)

    # The first child's start is recorded with half of what remained; the process dies before
    # the second's. The resume must not give the second all that remains: the first (not run
    # yet) still holds its half, and the tree would have half as much again as it was given.
    monkeypatch.setattr(spawn, "start_child", killed_before_the_second)
    with pytest.raises(SimulatedCrash):
        tree_agent.session(store, str(workspace), str(tmp_path / "ledger"), "fix", max_run_tokens=100_000)
    monkeypatch.setattr(spawn, "start_child", start_child)
    result = tree_agent.session(store, str(workspace), str(tmp_path / "ledger"), "fix", max_run_tokens=100_000)
    assert result.status == "completed", result.detail
    with open_store(store) as opened:
        first = next(s for s in read_run("fix", opened).steps if s.step_id == "model:0").result["message"]["usage"]
        given = [read_run(child, opened).summary.settings["max_run_tokens"] for child in CHILDREN]
    before = sum(v for k, v in first.items() if k.endswith("_tokens") and isinstance(v, int))  # the parent's turn that delegated
    assert abs(given[1] - given[0]) <= 1, "each child holds its half of what remained"
    assert before + sum(given) == 100_000, "what the children may spend is what the tree's budget left"


def test_a_grandchild_s_spending_counts_in_the_budget_of_the_run_above_its_parent(api: Any, workspace: Path, tmp_path: Path) -> None:
    """A parent counted what its children's own logs record, not what their children spent: after
    a grandchild spent most of the budget, the parent went on spending as if it had not."""
    top, middle, bottom = "Plan the work.", "Do the middle part.", "Do the bottom part."

    def scenario(request: Any) -> Any:
        task, turn = tree_agent._task(request), request.turn or 0
        if task == top:
            if turn == 0:
                return reply(tool_use("delegate", {"task": middle}, id="toolu_mid"), usage={"input_tokens": 10, "output_tokens": 5})
            return reply(tool_use("list_dir", {"path": "."}, id=f"toolu_ls{turn}"), usage={"input_tokens": 1000, "output_tokens": 5})
        if task == middle and turn == 0:
            return reply(tool_use("delegate", {"task": bottom}, id="toolu_bot"), usage={"input_tokens": 10, "output_tokens": 5})
        if task == middle:
            return reply("middle done", usage={"input_tokens": 10, "output_tokens": 5})
        return reply("bottom done", usage={"input_tokens": 6000, "output_tokens": 5})

    api(scenario)
    store = str(tmp_path / "runs")
    result = start_or_resume(
        top, "top", store, str(workspace), ToolRegistry(builtin_tools()), delegate=True, delegate_depth=2,
        max_run_tokens=10_000, max_turns=40,
    )  # fmt: skip
    assert result.status == "budget_exhausted", result.detail
    with open_store(store) as opened:
        below = descendants(opened, "top")
        assert len(below) == 2, below
        spent = views_of(read_run("top", opened))[0].cost.paid.total + sum(cost_of(opened, c).paid.total for c in below)
    assert spent <= 10_000 + 1000, f"the tree spent {spent:,} tokens of a 10,000 budget"
