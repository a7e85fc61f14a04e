"""The durable agent loop with a scripted model and the real tools in a temporary workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nb_durable import DivergenceError, InDoubtError, read_run
from nb_durable.agent import (
    Approval,
    DisplayWarning,
    Observer,
    RunHooks,
    RunView,
    StepView,
    continue_agent,
    resume_agent,
    run_agent,
    run_id_for,
    views_of,
)
from nb_durable.agent.models.messages import api_error, text_message, tool_use_message
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.models.scripted import ScriptedModel
from nb_durable.agent.tools import ToolRegistry, builtin_tools, tool
from nb_durable.core.stores import check_run_id
from nb_durable.errors import (
    DecisionNeededError,
    ModelCallError,
    RetriesExhaustedError,
    SettingError,
    SettingsMismatchError,
)

FAST = RetryPolicy(max_attempts=3, base_delay=0.0, jitter=0.0)


class Recorder(Observer):
    def __init__(self) -> None:
        self.steps: list[StepView] = []
        self.runs: list[RunView] = []

    def step_changed(self, step: StepView) -> None:
        self.steps.append(step)

    def run_changed(self, run: RunView) -> None:
        self.runs.append(run)

    def states(self, step_id: str) -> list[str]:
        """The step's states in order, repeats (streamed text) folded."""
        out: list[str] = []
        for s in self.steps:
            if s.step_id == step_id and (not out or out[-1] != s.state):
                out.append(s.state)
        return out




def go(workspace: Path, replies: list[Any], **kwargs: Any) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(replies)
    kwargs.setdefault("store", str(workspace.parent / "runs"))
    kwargs.setdefault("retry", FAST)
    kwargs.setdefault("run_id", "t")
    hooks = RunHooks(sleep=lambda s: None, **{k: kwargs.pop(k) for k in ("observer", "approve", "ask") if k in kwargs})
    result = run_agent("tidy up the notes", client=model, model="claude-test-1", workspace=workspace, hooks=hooks, **kwargs)
    return result, model


def three_turns() -> list[Any]:
    return [
        tool_use_message([("list_dir", {"path": "."}, "toolu_list")], text="Looking."),
        tool_use_message(
            [("read_file", {"path": "notes.txt"}, "toolu_read"), ("write_file", {"path": "todo.txt", "content": "milk\n"}, "toolu_write")]
        ),
        text_message("Wrote todo.txt with one item."),
    ]


def test_a_multi_turn_run_records_every_step_and_rebuilds_the_conversation(workspace: Path) -> None:
    seen = Recorder()
    result, model = go(workspace, three_turns(), observer=seen)
    assert result.status == "completed" and result.text == "Wrote todo.txt with one item."
    assert (result.turns, result.live_steps, result.replayed_steps) == (3, 6, 0)
    assert (workspace / "todo.txt").read_text() == "milk\n"
    record = read_run("t", workspace.parent / "runs")
    assert [s.step_id for s in record.steps] == [
        "model:0",
        "tool:0:0:toolu_list",
        "model:1",
        "tool:1:0:toolu_read",
        "tool:1:1:toolu_write",
        "model:2",
    ]
    third = model.requests[2]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    results = {b["tool_use_id"]: b for b in third[-1]["content"]}
    assert results["toolu_read"]["content"].startswith("remember the milk")
    assert results["toolu_write"]["is_error"] is False
    assert seen.states("model:0") == ["in_flight", "live"]


def test_replaying_a_finished_run_sends_no_request_and_writes_nothing(workspace: Path) -> None:
    go(workspace, three_turns())
    log = workspace.parent / "runs" / "t.jsonl"
    before = log.read_bytes()
    seen = Recorder()
    result, model = go(workspace, [], observer=seen)
    assert model.requests == []
    assert (result.replayed_steps, result.live_steps) == (6, 0)
    assert result.text == "Wrote todo.txt with one item."
    assert log.read_bytes() == before
    assert {s.state for s in seen.steps} == {"replayed"}
    assert result.cost.paid.total == 0 and result.cost.saved.total > 0


def test_each_step_record_grows_with_its_result_not_with_the_conversation(workspace: Path) -> None:
    turns = [tool_use_message([("read_file", {"path": "notes.txt"}, f"toolu_{i}")]) for i in range(12)]
    go(workspace, [*turns, text_message("done")])
    lines = (workspace.parent / "runs" / "t.jsonl").read_text().splitlines()
    model_lines = [len(line) for line in lines if '"step":"model:' in line and "step_completed" in line]
    assert max(model_lines[1:12]) - min(model_lines[1:12]) < 40, model_lines


def test_settings_are_recorded_so_resume_needs_only_the_run_id(workspace: Path) -> None:
    replies = three_turns()
    model = ScriptedModel(replies[:1])
    with pytest.raises(ModelCallError):
        run_agent("tidy up the notes", run_id="t", client=model, model="claude-test-1", workspace=workspace, store=str(workspace.parent / "runs"), retry=FAST)
    settings = read_run("t", workspace.parent / "runs").summary.settings
    assert settings["task"] == "tidy up the notes" and settings["model"] == "claude-test-1"
    assert {t["name"] for t in settings["tools"]} == {"list_dir", "read_file", "write_file", "run_bash"}
    assert settings["workspace"] == str(workspace.resolve())
    rest = ScriptedModel(replies[1:])
    result = resume_agent("t", client=rest, store=str(workspace.parent / "runs"))
    assert result.status == "completed" and result.replayed_steps == 2
    assert len(rest.requests) == 2, "the completed turn was not asked again"


def test_other_settings_under_the_same_id_are_a_settings_mismatch(workspace: Path) -> None:
    go(workspace, three_turns())
    with pytest.raises(SettingsMismatchError, match="model differ") as caught:
        run_agent("tidy up the notes", run_id="t", client=ScriptedModel([]), model="claude-other", workspace=workspace, store=str(workspace.parent / "runs"))
    # Not a divergence posing at step 0: it names the settings that differ, and is a usage mistake.
    assert not isinstance(caught.value, DivergenceError)
    assert caught.value.changed == ("model",) and caught.value.run_id == "t"
    assert caught.value.exit_code == 2 and caught.value.user_mistake
    assert "recorded model='claude-test-1', asked for model='claude-other'" in str(caught.value)


def test_a_settings_mismatch_shows_numbers_as_numbers(workspace: Path) -> None:
    """It quoted them as strings: recorded max_tokens='16000'."""
    go(workspace, three_turns())
    with pytest.raises(SettingsMismatchError) as caught:
        run_agent("tidy up the notes", run_id="t", client=ScriptedModel([]), model="claude-test-1", max_tokens=12000, workspace=workspace, store=str(workspace.parent / "runs"))
    assert "(max_tokens differs: recorded max_tokens=16000, asked for max_tokens=12000)" in str(caught.value)


def test_transient_failures_are_retried_and_every_attempt_is_recorded(workspace: Path) -> None:
    seen = Recorder()
    replies = [api_error(529, retry_after=0.01), api_error(429), *three_turns()]
    result, _ = go(workspace, replies, observer=seen, retry=RetryPolicy(max_attempts=3, base_delay=0, jitter=0))
    assert result.status == "completed"
    step = read_run("t", workspace.parent / "runs").steps[0]
    assert [(a.attempt, a.status, a.delay) for a in step.attempts] == [(1, 529, 0.01), (2, 429, 0.0)]
    retrying = [s for s in seen.steps if s.state == "retrying"]
    assert [(s.attempt, s.max_attempts) for s in retrying] == [(1, 3), (2, 3)]


def test_exhausted_retries_fail_the_run_and_resume_continues_at_that_step(workspace: Path) -> None:
    replies = [three_turns()[0], api_error(529), api_error(529)]
    with pytest.raises(RetriesExhaustedError, match=r"kept failing after 2 attempts.*resume it with resume_agent\('\w+'\) when"):
        go(workspace, replies, retry=RetryPolicy(max_attempts=2, base_delay=0, jitter=0))
    summary = read_run("t", workspace.parent / "runs").summary
    assert summary.status == "failed"
    rest = ScriptedModel(three_turns()[1:])
    result = resume_agent("t", client=rest, store=str(workspace.parent / "runs"))
    assert result.status == "completed" and len(rest.requests) == 2


def test_a_401_fails_clearly_and_the_run_resumes_after_the_fix(workspace: Path) -> None:
    with pytest.raises(ModelCallError) as info:
        go(workspace, [api_error(401)])
    assert info.value.status == 401 and "Then resume it with resume_agent('t');" in str(info.value)
    (attempt,) = read_run("t", workspace.parent / "runs").steps[0].attempts
    assert (attempt.status, attempt.delay, attempt.error) == (401, None, "ModelError")
    result = resume_agent("t", client=ScriptedModel(three_turns()), store=str(workspace.parent / "runs"))
    assert result.status == "completed"


@pytest.mark.parametrize(
    ("stop", "expected_status", "note"),
    [
        ("end_turn", "completed", ""),
        ("stop_sequence", "completed", ""),
        ("max_tokens", "truncated", "cut off at max_tokens"),
        ("refusal", "refused", "declined"),
        ("model_context_window_exceeded", "context_full", "context window"),
    ],
)
def test_every_final_stop_reason_has_its_own_outcome(workspace: Path, stop: str, expected_status: str, note: str) -> None:
    result, _ = go(workspace, [text_message("Partial answer", stop_reason=stop)])
    assert (result.status, result.stop_reason) == (expected_status, stop)
    assert result.text == "Partial answer"
    assert note in result.detail
    assert read_run(result.run_id, str(workspace.parent / "runs")).summary.status == expected_status


def test_pause_turn_sends_the_conversation_back_to_continue(workspace: Path) -> None:
    result, model = go(workspace, [text_message("thinking...", stop_reason="pause_turn"), text_message("done")])
    assert result.text == "done"
    assert model.requests[1]["messages"][-1]["role"] == "assistant"


def test_a_tool_call_cut_off_at_max_tokens_is_answered_not_run(workspace: Path) -> None:
    cut = tool_use_message([("write_file", {"path": "x.txt"}, "toolu_cut")])
    cut["stop_reason"] = "max_tokens"
    _, model = go(workspace, [cut, text_message("ok")])
    answer = model.requests[1]["messages"][-1]["content"][0]
    assert answer["tool_use_id"] == "toolu_cut" and answer["is_error"] and "cut off" in answer["content"]
    assert not (workspace / "x.txt").exists()


def test_unknown_tools_and_bad_input_become_error_results_the_model_can_act_on(workspace: Path) -> None:
    replies = [
        tool_use_message([("teleport", {"to": "mars"}, "toolu_a"), ("read_file", {"path": 42}, "toolu_b")]),
        text_message("ok"),
    ]
    _, model = go(workspace, replies)
    answers = {b["tool_use_id"]: b for b in model.requests[1]["messages"][-1]["content"]}
    assert answers["toolu_a"]["is_error"] and "no tool named 'teleport'" in answers["toolu_a"]["content"]
    assert answers["toolu_b"]["is_error"] and "path" in answers["toolu_b"]["content"]


def interrupted_tool_run(workspace: Path, calls: list[str]) -> ToolRegistry:
    registry = ToolRegistry(builtin_tools())

    @registry.tool(effect="external")
    def charge(amount: int) -> str:
        """Charge a card."""
        calls.append(f"charge {amount}")
        if len(calls) == 1:
            raise KeyboardInterrupt  # the process dies while the effect runs
        return f"charged {amount}"

    replies = [tool_use_message([("charge", {"amount": 5}, "toolu_pay")]), text_message("paid")]
    with pytest.raises(KeyboardInterrupt):
        go(workspace, replies, tools=registry)
    assert read_run("t", workspace.parent / "runs").summary.status == "in_doubt"
    return registry


@pytest.mark.parametrize("policy", ["skip", "rerun", "fail", "ask"])
def test_an_external_tool_cut_off_follows_the_in_doubt_policy(workspace: Path, policy: str) -> None:
    calls: list[str] = []
    registry = interrupted_tool_run(workspace, calls)
    asked: list[str] = []
    model = ScriptedModel([text_message("done")] * 2)
    store = str(workspace.parent / "runs")

    def ask(record: Any, tool_input: Any) -> Any:
        asked.append(record.step_id)
        return "skip"

    if policy == "fail":
        with pytest.raises(InDoubtError):
            resume_agent("t", client=model, tools=registry, store=store, in_doubt="fail")
        assert read_run("t", store).summary.status == "in_doubt"
        return
    result = resume_agent("t", client=model, tools=registry, store=store, in_doubt=policy, hooks=RunHooks(ask=ask))  # type: ignore[arg-type]
    answer = model.requests[0]["messages"][-1]["content"][0]
    if policy == "rerun":
        assert calls == ["charge 5", "charge 5"] and answer["content"] == "charged 5"
    else:
        assert calls == ["charge 5"]
        assert answer["is_error"] and "unknown" in answer["content"]
    assert result.status == "completed"
    if policy == "ask":
        assert asked == ["tool:0:0:toolu_pay"]
        again = resume_agent("t", client=ScriptedModel([]), tools=registry, store=store, in_doubt="ask", hooks=RunHooks(ask=ask))
        assert again.status == "completed" and asked == ["tool:0:0:toolu_pay"], "the decision was recorded"


def test_ask_with_nobody_to_answer_names_the_flags(workspace: Path) -> None:
    registry = interrupted_tool_run(workspace, [])
    with pytest.raises(DecisionNeededError, match="in_doubt='skip'"):
        resume_agent("t", client=ScriptedModel([]), tools=registry, store=str(workspace.parent / "runs"), in_doubt="ask")


def test_commands_that_need_approval_ask_once_and_denials_reach_the_model(workspace: Path) -> None:
    asked: list[str] = []

    def approve(name: str, tool_input: Any, reason: str) -> Approval:
        asked.append(tool_input["command"])
        return Approval(False, "person", "not today")

    replies = [tool_use_message([("run_bash", {"command": "git push --force"}, "toolu_push")]), text_message("ok")]
    _, model = go(workspace, replies, approve_bash=r"git push", approve=approve)
    answer = model.requests[1]["messages"][-1]["content"][0]
    assert answer["is_error"] and "denied" in answer["content"] and "not today" in answer["content"]
    assert asked == ["git push --force"]
    go(workspace, [], approve_bash=r"git push", approve=approve)
    assert asked == ["git push --force"], "replay never asks again"
    decisions = [e for e in read_run("t", workspace.parent / "runs").events if e.kind == "decision"]
    assert [(d.decision, d.by) for d in decisions] == [("denied", "person")]  # type: ignore[attr-defined]


def test_approval_with_nobody_to_ask_fails_the_run_resumably(workspace: Path) -> None:
    replies = [tool_use_message([("run_bash", {"command": "git push"}, "toolu_push")])]
    with pytest.raises(DecisionNeededError, match="approval"):
        go(workspace, replies, approve_bash="git push")
    assert read_run("t", workspace.parent / "runs").summary.status == "failed"


def test_an_interrupt_during_a_model_call_is_recorded_and_resumable(workspace: Path) -> None:
    def interrupt(request: dict[str, Any]) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        go(workspace, [interrupt])
    assert read_run("t", workspace.parent / "runs").summary.status == "interrupted"
    result = resume_agent("t", client=ScriptedModel(three_turns()), store=str(workspace.parent / "runs"))
    assert result.status == "completed"


def test_the_turn_limit_interrupts_and_a_higher_limit_resumes(workspace: Path) -> None:
    loop = [tool_use_message([("list_dir", {"path": "."}, f"toolu_{i}")]) for i in range(3)]
    result, _ = go(workspace, loop, max_turns=2)
    assert result.status == "interrupted"
    assert "limit of 2 turns" in (read_run("t", workspace.parent / "runs").summary.error or "")
    rest = ScriptedModel([loop[2], text_message("done")])
    final = resume_agent("t", client=rest, store=str(workspace.parent / "runs"), max_turns=4)
    assert final.status == "completed" and len(rest.requests) == 2


def test_cost_counts_live_tokens_as_paid_and_replayed_tokens_as_saved(workspace: Path) -> None:
    first, _ = go(workspace, three_turns())
    second, _ = go(workspace, [])
    assert first.cost.paid.total > 0 and first.cost.saved.total == 0
    assert second.cost.saved == first.cost.paid and second.cost.paid.total == 0
    assert second.cost.saved_dollars == pytest.approx(first.cost.paid_dollars)


def test_custom_tools_get_the_idempotency_key(workspace: Path) -> None:
    keys: list[str] = []

    @tool(effect="idempotent")
    def remember(note: str, context: Any) -> str:
        """Remember a note."""
        keys.append(context.key)
        return "ok"

    registry = ToolRegistry([*builtin_tools(), remember])
    go(workspace, [tool_use_message([("remember", {"note": "x"}, "toolu_k")]), text_message("done")], tools=registry)
    assert keys == ["t:tool:0:0:toolu_k"]


def test_run_ids_derive_readably_from_the_task() -> None:
    assert run_id_for("Fix the failing tests, please!") == run_id_for("Fix the failing tests, please!")
    assert run_id_for("Fix the failing tests, please!").startswith("fix-the-failing-tests-please-")
    # Long first words (a hash, an identifier) made an id past 128 characters: no run could have it.
    long_id = run_id_for("x" * 300 + " then more")
    assert len(long_id) <= 128 and check_run_id(long_id) == long_id and long_id.startswith("xxx")
    assert run_id_for("x" * 300 + " then more") == long_id != run_id_for("x" * 300 + " then less")
    assert run_id_for("Fix the failing tests") != run_id_for("Fix the failing tests!")
    assert run_id_for("???").startswith("run-")


def test_the_log_holds_only_json(workspace: Path) -> None:
    go(workspace, three_turns())
    for line in (workspace.parent / "runs" / "t.jsonl").read_text().splitlines():
        json.loads(line)


def test_steps_that_needed_retries_say_so_live_replayed_and_recorded(workspace: Path) -> None:
    from nb_durable.agent import views_of
    from nb_durable.jupyter.render import render_page

    go(workspace, [api_error(529), api_error(529), text_message("done")])
    seen = Recorder()
    go(workspace, [], observer=seen)
    (replayed,) = [s for s in seen.steps if s.step_id == "model:0"]
    assert (replayed.state, replayed.attempt) == ("replayed", 3)
    run, steps = views_of(read_run("t", workspace.parent / "runs"))
    assert steps[0].attempt == 3
    assert "after 2 retries" in render_page(run, steps)


def test_a_finished_run_of_any_model_kind_replays_without_its_model(workspace: Path) -> None:
    from nb_durable import RunError

    store = str(workspace.parent / "runs")
    go(workspace, three_turns())
    assert resume_agent("t", store=store).replayed_steps == 6
    with pytest.raises(ModelCallError, match="received request 2"):
        go(workspace, three_turns()[:1], run_id="half")
    with pytest.raises(RunError, match="'scripted' model, which cannot be rebuilt.*client="):
        resume_agent("half", store=store)


# -- one view per step, display outside the record --------------------------------------------


def test_a_finished_steps_live_view_is_its_recorded_view(workspace: Path) -> None:
    seen = Recorder()
    replies = [api_error(529), *three_turns()]
    go(workspace, replies, observer=seen, retry=FAST)
    finals = {s.step_id: s for s in seen.steps if s.state == "live"}
    _, recorded = views_of(read_run("t", workspace.parent / "runs"))
    assert len(recorded) == 6 and set(finals) == {v.step_id for v in recorded}
    for view in recorded:
        live = finals[view.step_id]
        assert live.ms is not None and live.ms == view.ms, view.step_id
        assert live == view.but(state="live"), view.step_id
    retried = finals["model:0"]
    assert (retried.attempt, retried.max_attempts) == (2, FAST.max_attempts)


class Broken(Observer):
    def step_changed(self, step: StepView) -> None:
        raise RuntimeError("the widget fell over")

    def run_changed(self, run: RunView) -> None:
        raise ValueError("the header fell over")


def test_a_broken_display_is_a_warning_and_changes_nothing_recorded(workspace: Path) -> None:
    with pytest.warns(DisplayWarning, match="the widget fell over"):
        result, model = go(workspace, three_turns(), observer=Broken())
    assert result.status == "completed" and len(model.requests) == 3
    record = read_run("t", workspace.parent / "runs")
    assert [e.kind for e in record.events].count("attempt_failed") == 0
    assert all(s.state == "completed" for s in record.steps) and len(record.steps) == 6


def test_before_step_may_stop_a_run_as_a_crash_would(workspace: Path) -> None:
    from nb_durable.agent import CrashAt
    from nb_durable.errors import SimulatedCrash

    model = ScriptedModel(three_turns())
    store = str(workspace.parent / "runs")
    with pytest.raises(SimulatedCrash, match="step 3"):
        run_agent("t", run_id="t", client=model, model="claude-test-1", workspace=workspace, store=store,
                  hooks=RunHooks(before_step=CrashAt(3)))  # fmt: skip
    steps = read_run("t", store).steps
    assert [s.state for s in steps] == ["completed", "completed", "interrupted"]


def test_a_step_with_no_outcome_is_cut_off_once_its_run_stopped_and_in_flight_while_it_goes(workspace: Path) -> None:
    from nb_durable.agent import CrashAt
    from nb_durable.core.log import EventLog
    from nb_durable.errors import SimulatedCrash

    store = str(workspace.parent / "runs")
    with pytest.raises(SimulatedCrash):
        run_agent("t", run_id="t", client=ScriptedModel(three_turns()), model="claude-test-1", workspace=workspace,
                  store=store, hooks=RunHooks(before_step=CrashAt(3)))  # fmt: skip
    _, views = views_of(read_run("t", store))
    assert [v.state for v in views] == ["recorded", "recorded", "cut_off"]  # never "failed": nothing failed
    with EventLog("t", store):  # a live writer holds the run: the step is running
        _, views = views_of(read_run("t", store))
    assert [v.state for v in views] == ["recorded", "recorded", "in_flight"]


def test_nobody_to_ask_names_the_run_not_the_step(workspace: Path) -> None:
    from nb_durable.errors import NobodyToAskError

    registry = interrupted_tool_run(workspace, [])

    def no_stdin(record: Any, tool_input: Any) -> Any:
        raise NobodyToAskError("this notebook cannot ask for input")

    with pytest.raises(DecisionNeededError, match="cannot ask for input") as caught:
        resume_agent("t", client=ScriptedModel([]), tools=registry, store=str(workspace.parent / "runs"),
                     in_doubt="ask", hooks=RunHooks(ask=no_stdin))  # fmt: skip
    assert caught.value.run_id == "t"
    assert "tool:0:0:toolu_pay" in str(caught.value)


def test_an_empty_task_or_follow_up_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    """run_agent("") ran the agent on nothing (only the CLI refused it), and an empty follow-up
    was a bare ValueError: the rule is the task setting's now, said the same by every front end."""
    store = str(tmp_path / "runs")
    for blank in ("", "  \n "):
        with pytest.raises(SettingError, match="task must say what the agent should do \\(it is empty\\)") as refused:
            run_agent(blank, client=ScriptedModel([]), store=store, workspace=tmp_path, run_id="blank")
        assert refused.value.outcome == "usage"
    assert not (tmp_path / "runs" / "blank.jsonl").exists()
    run_agent("say hi", client=ScriptedModel([text_message("hi")]), store=store, workspace=tmp_path, run_id="said")
    with pytest.raises(SettingError, match="message must say what the agent should do next \\(it is empty\\)"):
        continue_agent("said", " ", client=ScriptedModel([]), store=store)
    assert read_run("said", store).summary.steps == 1


def test_one_tag_or_fallback_model_given_as_a_str_is_one_not_its_letters(tmp_path: Path) -> None:
    """``tags="nightly"`` was refused with "tags must be non-empty strings, not 'nightly'",
    which it is: a list was wanted, and the message could not say so."""
    from nb_durable import list_runs

    store = str(tmp_path / "runs")
    done = run_agent(
        "say hi", client=ScriptedModel([text_message("hi")]), store=store, workspace=tmp_path, run_id="r",
        tags="nightly", fallback_models="claude-other-1",
    )  # fmt: skip
    assert done.status == "completed"
    (found,) = list_runs(store, tags="nightly")
    assert found.settings["tags"] == ["nightly"] and found.settings["fallback_models"] == ["claude-other-1"]


def test_a_setting_of_the_wrong_kind_of_value_is_refused_by_name_before_the_run_starts(tmp_path: Path) -> None:
    """``retry={...}`` (a dict for a ``RetryPolicy``) was taken unchecked and failed inside the
    run with an AttributeError; a mapping setting given a list did the same."""
    store = str(tmp_path / "runs")
    with pytest.raises(SettingError, match=r"retry must be a RetryPolicy \(such as RetryPolicy\(\)\), not \{'max_attempts': 2\}"):
        run_agent("say hi", client=ScriptedModel([]), store=store, workspace=tmp_path, run_id="r", retry={"max_attempts": 2})
    with pytest.raises(SettingError, match=r"endpoint must be a mapping \(a dict\)"):
        run_agent("say hi", client=ScriptedModel([]), store=store, workspace=tmp_path, run_id="r", endpoint=["x"])
    assert not (tmp_path / "runs" / "r.jsonl").exists()
    done = run_agent("say hi", client=ScriptedModel([text_message("hi")]), store=store, workspace=tmp_path, run_id="r", retry=FAST)
    assert done.status == "completed"
