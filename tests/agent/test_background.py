"""Background runs: a handle at once, stop at a step boundary, decisions answered from another thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from nb_durable import read_run
from nb_durable.agent import RunHooks, resume_agent, run_agent
from nb_durable.agent.fleet.background_runs import background, background_run, stop_all
from nb_durable.agent.fleet.decisions import PendingDecision
from nb_durable.agent.models.messages import text_message, tool_use_message
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.run.stopping import RunStopped
from nb_durable.errors import RunNotRunningError
from tests.fakes.hooked import Hooked


def _until(check: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out waiting")


def _start(workspace: Path, replies: list[Any], **kwargs: Any) -> Any:
    kwargs.setdefault("store", str(workspace.parent / "runs"))
    kwargs.setdefault("run_id", "bg")
    return background(run_agent, "work in the background", client=ScriptedModel(replies), model="claude-test-1", workspace=workspace, **kwargs)


def _decisions(run_id: str, store: str) -> list[tuple[str, str, str, str]]:
    return [(step.step_id, d.decision, d.by, d.note) for step in read_run(run_id, store).steps for d in step.decisions]


def test_a_background_run_returns_at_once_and_its_wait_gives_the_foreground_result(workspace: Path) -> None:
    gate = threading.Event()
    replies = [tool_use_message([("list_dir", {"path": "."})]), text_message("Listed.")]
    model = Hooked(replies, lambda request: gate.wait(10))
    store = str(workspace.parent / "runs")
    handle = background(run_agent, "list", client=model, model="claude-test-1", workspace=workspace, store=store, run_id="quick")
    assert handle.status == "running" and handle.result is None  # returned before the first model call ended
    gate.set()
    result = handle.wait(20)
    assert result.status == "completed" and result.text == "Listed." and handle.status == "completed"
    assert read_run("quick", store).summary.status == "completed"


def test_stop_kills_a_running_command_and_records_the_step_in_doubt(workspace: Path) -> None:
    replies = [tool_use_message([("run_bash", {"command": "echo started > began.txt; sleep 30; echo done > ended.txt"})]), text_message("x")]
    handle = _start(workspace, replies)
    _until((workspace / "began.txt").exists)
    stopped_at = time.monotonic()
    handle.stop()
    with pytest.raises(RunStopped):
        handle.wait(20)
    assert time.monotonic() - stopped_at < 10  # the sleep 30 was killed, not waited for
    assert not (workspace / "ended.txt").exists()
    summary = read_run("bg", str(workspace.parent / "runs")).summary
    assert summary.status == "in_doubt" and summary.holder is None
    assert handle.status == "in_doubt"


def test_stop_between_steps_records_interrupted_and_resume_goes_on(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    replies = [
        tool_use_message([("write_file", {"path": "a.txt", "content": "a"})]),
        tool_use_message([("write_file", {"path": "b.txt", "content": "b"})]),
        text_message("Both written."),
    ]
    asked = threading.Event()
    release = threading.Event()

    def hold_the_second_call(request: Mapping[str, Any]) -> None:
        if len(request["messages"]) == 3:  # the second model call: stop while it is in flight
            asked.set()
            release.wait(10)

    model = Hooked(replies, hold_the_second_call)
    handle = background(run_agent, "write", client=model, model="claude-test-1", workspace=workspace, store=store, run_id="bg")
    _until(asked.is_set)
    handle.stop("stopped by a test")
    release.set()
    with pytest.raises(RunStopped, match="stopped by a test"):
        handle.wait(20)
    # The model call in flight was let finish and recorded; its tool did not run.
    assert (workspace / "a.txt").exists() and not (workspace / "b.txt").exists()
    record = read_run("bg", store)
    assert record.summary.status == "interrupted" and record.summary.error == "stopped by a test"
    result = resume_agent("bg", store=store, client=ScriptedModel(replies[2:]))
    assert result.status == "completed" and (workspace / "b.txt").read_text() == "b"
    assert result.replayed_steps == 3  # model, tool, model: the paid call was not asked again


def test_an_approval_waits_for_an_answer_from_another_thread_and_is_recorded_with_who_and_why(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    replies = [
        tool_use_message([("run_bash", {"command": "echo pushed > pushed.txt"})]),
        tool_use_message([("run_bash", {"command": "echo again > again.txt"})]),
        text_message("Done."),
    ]
    tools_hooks = RunHooks()
    handle = _start(workspace, replies, approve_bash="echo", hooks=tools_hooks)
    first: PendingDecision = _until(lambda: handle.pending and handle.pending[0])
    assert handle.status == "waiting" and first.kind == "approval" and first.tool == "run_bash"
    assert first.step_id.startswith("approval:0:0")
    with pytest.raises(ValueError, match="approve, deny"):
        first.decide("rerun")
    assert first.approve(by="ada (button)", note="looks right")
    assert not first.deny()  # the first answer wins
    second: PendingDecision = _until(lambda: handle.pending and handle.pending[0] is not first and handle.pending[0])
    second.deny(by="ada (button)", note="not twice")
    assert handle.wait(20).status == "completed"
    assert (workspace / "pushed.txt").exists() and not (workspace / "again.txt").exists()
    decisions = _decisions("bg", store)
    assert ("approved", "ada (button)", "looks right") in [d[1:] for d in decisions]
    assert ("denied", "ada (button)", "not twice") in [d[1:] for d in decisions]
    # Replay never asks again: a foreground resume with nobody to ask replays both answers.
    again = run_agent("work in the background", client=ScriptedModel([]), model="claude-test-1", workspace=workspace, store=store, run_id="bg", approve_bash="echo")
    assert again.status == "completed" and again.live_steps == 0


def test_stop_while_waiting_for_approval_ends_the_wait_and_the_run_is_interrupted(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    replies = [tool_use_message([("run_bash", {"command": "echo hi > hi.txt"})]), text_message("x")]
    handle = _start(workspace, replies, approve_bash="echo")
    _until(lambda: handle.pending)
    handle.stop()
    with pytest.raises(RunStopped):
        handle.wait(20)
    assert read_run("bg", store).summary.status == "interrupted"
    assert not (workspace / "hi.txt").exists()


def test_an_in_doubt_step_is_settled_by_a_pending_decision_with_its_note(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    replies = [tool_use_message([("run_bash", {"command": "echo one >> count.txt; sleep 30"})]), text_message("Counted.")]
    handle = _start(workspace, replies)
    _until((workspace / "count.txt").exists)
    handle.stop()
    with pytest.raises(RunStopped):
        handle.wait(20)
    resumed = background(resume_agent, "bg", store=store, client=ScriptedModel(replies[1:]), in_doubt="ask")
    question: PendingDecision = _until(lambda: resumed.pending and resumed.pending[0])
    assert question.kind == "in_doubt" and question.choices == ("rerun", "skip", "fail")
    question.skip(by="ada (button)", note="it printed once; do not count twice")
    assert resumed.wait(20).status == "completed"
    assert (workspace / "count.txt").read_text() == "one\n"
    assert ("skip", "ada (button)", "it printed once; do not count twice") in [d[1:] for d in _decisions("bg", store)]


def test_two_background_runs_go_on_at_once_each_with_its_own_lease(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    (workspace / "a").mkdir()
    (workspace / "b").mkdir()
    slow = [tool_use_message([("run_bash", {"command": "sleep 1; echo x > out.txt"})]), text_message("ok")]
    one = background(run_agent, "one", client=ScriptedModel(slow), model="m", workspace=workspace / "a", store=store, run_id="one")
    two = background(run_agent, "two", client=ScriptedModel(slow), model="m", workspace=workspace / "b", store=store, run_id="two")
    def both_held() -> bool:
        try:
            return all(read_run(r, store).summary.holder for r in ("one", "two"))
        except LookupError:  # a run not opened yet
            return False

    assert _until(both_held)
    assert one.wait(20).status == two.wait(20).status == "completed"
    assert background_run("two") is two


def test_background_run_lookup_says_what_goes_on() -> None:
    with pytest.raises(RunNotRunningError, match="no background thread"):
        background_run("never-started")


def test_stop_all_records_every_run_going_on_as_stopped(workspace: Path) -> None:
    store = str(workspace.parent / "runs")
    replies = [tool_use_message([("run_bash", {"command": "touch began; sleep 30"})]), text_message("x")]
    handle = _start(workspace, replies, run_id="exiting")
    _until((workspace / "began").exists)
    stop_all()
    assert handle.done
    summary = read_run("exiting", store).summary
    assert summary.holder is None and summary.status == "in_doubt"
    assert "exiting" in (summary.error or "")


def test_an_unexpected_exception_is_kept_on_the_handle_and_recorded(workspace: Path) -> None:
    store = str(workspace.parent / "runs")

    def bug(request: Mapping[str, Any]) -> None:
        raise ZeroDivisionError("a bug in a model adapter")

    handle = background(run_agent, "t", client=Hooked([], bug), model="m", workspace=workspace, store=store, run_id="bug")
    with pytest.raises(ZeroDivisionError):
        handle.wait(20)
    assert isinstance(handle.error, ZeroDivisionError) and handle.status == "failed"
    summary = read_run("bug", store).summary
    assert summary.status == "failed" and "ZeroDivisionError: a bug in a model adapter" in (summary.error or "")


def test_a_listener_that_comes_after_the_question_still_hears_it(workspace: Path) -> None:
    # The notebook starts the run's thread, then listens; a resume that replays fast asks first.
    store = str(workspace.parent / "runs")
    replies = [tool_use_message([("run_bash", {"command": "echo hi > hi.txt"})]), text_message("Done.")]
    handle = _start(workspace, replies, approve_bash="echo")
    asked: PendingDecision = _until(lambda: handle.pending and handle.pending[0])
    heard: list[tuple[PendingDecision, bool]] = []
    handle.decisions.listen(lambda p: heard.append((p, p.decided)))
    assert heard == [(asked, False)], "the question waiting before the listener came was not told to it"
    asked.approve(by="ada (button)")
    assert handle.wait(20).status == "completed"
    assert heard == [(asked, False), (asked, True)]
    assert ("approved", "ada (button)", "") in [d[1:] for d in _decisions("bg", store)]


def test_when_done_callbacks_run_once_before_wait_returns(workspace: Path) -> None:
    heard: list[str] = []
    release = threading.Event()
    model = Hooked([text_message("ok")], lambda request: release.wait(10))
    handle = background(run_agent, "t", client=model, model="m", workspace=workspace, store=str(workspace.parent / "runs"), run_id="cb")
    def slow_display(h: Any) -> None:
        time.sleep(0.2)
        heard.append("early")

    handle.when_done(slow_display)
    release.set()
    handle.wait(20)
    assert heard == ["early"], "a waiter sees what the callbacks did"
    handle.when_done(lambda h: heard.append("late"))
    assert heard == ["early", "late"]


def test_a_run_recorded_with_the_first_wording_is_still_told_its_stopped_call_died(workspace: Path) -> None:
    """A log whose settings say wording 1 (as every log from before the setting does) keeps the
    old words for a call a stop cut off, so replaying it sends what its sessions sent."""
    from nb_durable.agent.models.messages import tool_use_message as use
    from nb_durable.agent.settings import AgentSettings

    assert AgentSettings.from_json({"task": "x"}).wording == 1, "absent means the first wording"
    store = str(workspace / "runs")
    model = ScriptedModel([use([("run_bash", {"command": "sleep 30"}, "toolu_1")]), text_message("Done.")])
    handle = background(run_agent, "t", client=model, model="claude-test-1", workspace=workspace, store=store,
                        run_id="old-words", wording=1)  # fmt: skip

    def cut_in() -> bool:
        try:
            return any(s.step_id.startswith("tool:") for s in read_run("old-words", store).steps)
        except LookupError:  # nothing recorded yet
            return False

    _until(cut_in)
    handle.stop("stopped by ada with the Stop button")
    with pytest.raises(KeyboardInterrupt):
        handle.wait(20)
    resumed = resume_agent("old-words", client=model, store=store, in_doubt="skip")
    assert resumed.status == "completed"
    [result] = model.requests[-1]["messages"][-1]["content"]
    assert result["content"].startswith("The process running this run_bash call died before its result was recorded")
