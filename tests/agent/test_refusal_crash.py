"""A refused turn moved to the fallback model, the process killed between the two lines that
record the move (a decision, and the ``settings:N`` step that carries it), through the real SDK
against the loopback Messages API.

The decision was written first: a resume found the step unfinished and completed it empty, so
the timeline said "model -> fallback because refused" of a step that changed nothing, and the
refusing model was asked (and paid) again before the run moved on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from tests.fakes import FunctionScenario, MessagesAPIServer, reply
from tests.fakes.messages_api.scenario import refusal

MODEL, FALLBACK = "claude-test-1", "claude-test-2"

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def test_a_refusal_switch_killed_between_its_two_lines_resumes_on_the_fallback(workspace: Path) -> None:
    store = workspace.parent / "runs"

    def answer(request: Any) -> Any:
        return refusal(category="cyber") if request.body["model"] == MODEL else reply("Done safely.")

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
        done = run_agent("Do it.", run_id="r", client=client, model=MODEL, store=str(store), workspace=workspace,
                         fallback_models=(FALLBACK,))  # fmt: skip
        assert done.status == "completed"
        # What a process killed after the first line the point wrote leaves behind.
        log = store / "r.jsonl"
        lines = log.read_text().splitlines(keepends=True)
        first = next(i for i, line in enumerate(lines) if json.loads(line).get("step") == "settings:1")
        log.write_text("".join(lines[: first + 1]))
        before = len(server.requests)
        result = resume_agent("r", client=client, store=str(store))
        asked = [str(r.body["model"]) for r in server.requests[before:] if r.endpoint == "messages"]
    assert (result.status, result.text) == ("completed", "Done safely.")
    assert asked == [FALLBACK]  # the refusing model is not asked again
    point = next(s for s in read_run("r", str(store)).steps if s.step_id == "settings:1")
    assert point.result["changes"] == {"model": FALLBACK} and point.result["action"] == "reask"
