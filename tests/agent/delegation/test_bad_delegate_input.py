"""What a delegate call tells the model when no child can do the work: bad input, a failed child.

The model may send ``delegate`` an empty task, no task, or input of the wrong type (the tool
is not strict). Such a call starts no child and answers with an error result that says what
was wrong; the other calls of the turn go on, and a replay refuses the same calls the same
way. Before, the child's settings raised ``SettingError`` out of the parent's session, and
since the model's reply was recorded, every resume raised it again: the run was stuck.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import AnthropicModel, run_agent
from nb_durable.core.stores import open_store
from tests.fakes import FunctionScenario, MessagesAPIServer
from tests.fakes.messages_api import RecordedRequest, Reply, reply, tool_use
from tests.fakes.messages_api.scenario import Error

PARENT = "Split the work."
CHILD = "List the files."


def _scenario(request: RecordedRequest) -> Reply:
    if request.messages[0]["content"] == PARENT:
        if request.turn == 0:
            return reply(
                tool_use("delegate", {"task": "  "}, id="toolu_blank"),
                tool_use("delegate", {"tools": ["list_dir"]}, id="toolu_none"),
                tool_use("delegate", {"task": CHILD, "max_tokens": True}, id="toolu_type"),
                tool_use("delegate", {"task": CHILD}, id="toolu_good"),
            )
        results = request.messages[-1]["content"]
        return reply(" | ".join(f"{r['is_error']}: {r['content']}" for r in results))
    return reply("two files")


def test_bad_delegate_input_starts_no_child_and_tells_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "runs")
    with MessagesAPIServer(FunctionScenario(_scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        values: dict[str, Any] = {"store": store, "workspace": str(tmp_path), "delegate": True, "run_id": "split", "model": "claude-test-1"}
        result = run_agent(PARENT, client=AnthropicModel(), **values)
        assert result.status == "completed", result.detail
        blank, none, typed, good = result.text.split(" | ")
        assert blank == (
            "True: Invalid input for delegate: task is empty: say what the child should do. "
            "No child run was started; fix the input and call delegate again."
        )
        assert none.startswith("True: Invalid input for delegate: ") and "'task'" in none
        assert typed.startswith("True: Invalid input for delegate: ") and "max_tokens" in typed
        assert good == "False: two files"
        with open_store(store) as opened:
            assert sorted(opened.run_ids()) == ["split", "split.delegate-0-3-toolu_good"]
        asked = len(server.requests)

        again = run_agent(PARENT, client=AnthropicModel(), **values)
        assert (again.status, again.text, again.live_steps) == ("completed", result.text, 0)
        assert len(server.requests) == asked, "the replay refuses the same calls and asks nothing"


def test_a_child_that_fails_is_reported_as_its_recorded_ending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's model was told the child's error in the words meant for a person, "Then
    resume it with resume_agent(...)": advice that cannot reach this call, whose result is final."""

    def scenario(request: RecordedRequest) -> Any:
        if request.messages[0]["content"] == PARENT:
            if request.turn == 0:
                return reply(tool_use("delegate", {"task": CHILD, "model": "claude-nope"}, id="toolu_nope"))
            return reply(str(request.messages[-1]["content"][0]["content"]))
        return Error(404, message="model: claude-nope")

    with MessagesAPIServer(FunctionScenario(scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        result = run_agent(PARENT, client=AnthropicModel(), store=str(tmp_path / "runs"), workspace=str(tmp_path),
                           delegate=True, run_id="nope", model="claude-test-1")  # fmt: skip
    assert result.status == "completed", result.detail
    assert result.text == (
        "The child run 'nope.delegate-0-0-toolu_nope' did not complete: it ended failed (the Messages API refused "
        "the request with 404 (not_found_error): model: claude-nope. To fix: not found: check the model name)."
    )


def _ask_for(request: dict[str, Any]) -> Any:
    def scenario(asked: RecordedRequest) -> Reply:
        if asked.messages[0]["content"] == PARENT:
            if asked.turn == 0:
                return reply(tool_use("delegate", request, id="toolu_ask"))
            return reply(str(asked.messages[-1]["content"][0]["content"]))
        return reply("two files")

    return scenario


def test_a_delegate_call_naming_tools_the_run_lacks_says_which_it_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The child got the tools that matched, here none, and nobody was told.
    with MessagesAPIServer(FunctionScenario(_ask_for({"task": CHILD, "tools": ["list_dir", "browse"]}))) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        result = run_agent(PARENT, client=AnthropicModel(), store=str(tmp_path / "runs"), workspace=str(tmp_path),
                           delegate=True, run_id="ask", model="claude-test-1")  # fmt: skip
    assert result.text == (
        "Invalid input for delegate: tools names 'browse', which this run does not have (it has: delegate, list_dir, "
        "read_file, run_bash, write_file). No child run was started; fix the input and call delegate again."
    )


def test_a_call_an_earlier_version_started_despite_its_input_replays_as_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before input was checked, a call with a field the schema does not allow started its child:
    # the log records that start, and a replay must take it, not refuse the call (a divergence).
    from nb_durable.agent.delegation.spawn import Delegation

    values: dict[str, Any] = {"store": str(tmp_path / "runs"), "workspace": str(tmp_path), "delegate": True, "run_id": "old",
                              "model": "claude-test-1"}  # fmt: skip
    with MessagesAPIServer(FunctionScenario(_ask_for({"task": CHILD, "urgent": True}))) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        with monkeypatch.context() as earlier:
            earlier.setattr(Delegation, "_refusal", lambda self, given: None)
            first = run_agent(PARENT, client=AnthropicModel(), **values)
        assert (first.status, first.text) == ("completed", "two files")
        asked = len(server.requests)
        again = run_agent(PARENT, client=AnthropicModel(), **values)
    assert (again.status, again.text, again.live_steps) == ("completed", "two files", 0)
    assert len(server.requests) == asked
