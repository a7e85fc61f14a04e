"""A child whose model calls outlast their retries (an outage) stops the tree, and a resume of
the parent once the service is back resumes that child from its last step.

Told to the parent's model as an error result, the outage made the model delegate again (a new
child, every step paid again) or give up, and a resume of the parent could not reach the child:
its delegate call was answered. A child the API refuses (a wrong model name) is still the
model's to fix, as an error result (``test_bad_delegate_input``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nb_durable import open_store
from nb_durable.agent import AnthropicModel, RunHooks, resume_agent, run_agent
from nb_durable.agent.display.views import views_of
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.core.runs import read_run
from nb_durable.errors import RetriesExhaustedError
from tests.fakes import FunctionScenario, MessagesAPIServer
from tests.fakes.messages_api import RecordedRequest, reply, tool_use
from tests.fakes.messages_api.scenario import Error

PARENT = "Split the work."
CHILD = "List the files."
RUN = "tree"
CHILD_ID = "tree.delegate-0-0-toolu_one"


def test_a_child_outage_stops_the_tree_and_the_parents_resume_goes_on_with_that_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outage = {"on": False}

    def scenario(request: RecordedRequest) -> Any:
        if request.messages[0]["content"] == PARENT:
            if request.turn == 0:
                return reply(tool_use("delegate", {"task": CHILD}, id="toolu_one"))
            return reply(f"The child said: {request.messages[-1]['content'][0]['content']}")
        if request.turn == 0:
            outage["on"] = True  # the child's first call is answered; the service goes down after it
            return reply(tool_use("list_dir", {"path": "."}, id="toolu_ls"))
        return Error(529) if outage["on"] else reply("two files")

    store = str(tmp_path / "runs")
    values: dict[str, Any] = {
        "store": store, "workspace": str(tmp_path), "delegate": True, "model": "claude-test-1",
        "retry": RetryPolicy(max_attempts=2, base_delay=0.0, jitter=0.0),
    }  # fmt: skip
    with MessagesAPIServer(FunctionScenario(scenario)) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        with pytest.raises(RetriesExhaustedError) as stopped:
            run_agent(PARENT, client=AnthropicModel(), run_id=RUN, hooks=RunHooks(sleep=lambda s: None), **values)
        message = str(stopped.value)
        assert message.startswith(f"run {RUN!r} stopped: its child run {CHILD_ID!r} kept failing to reach the model (")
        assert f"resume it with resume_agent({RUN!r})" in message and "the child goes on from its last step" in message
        parent_asked = [r for r in server.requests if r.messages and r.messages[0]["content"] == PARENT]
        assert len(parent_asked) == 1, "the parent's model was not told: its delegate call stays unanswered"
        assert read_run(RUN, store).summary.status == "failed"
        # Read from the log later (show, %agent_show), the child says what to do: resume its parent.
        child, _ = views_of(read_run(CHILD_ID, store))
        assert child.status == "failed" and f"resume its parent with resume_agent({RUN!r}), which resumes it" in child.error

        outage["on"] = False
        child_first = len([r for r in server.requests if r.messages and r.messages[0]["content"] == CHILD and r.turn == 0])
        result = resume_agent(RUN, client=AnthropicModel(), store=store, hooks=RunHooks(sleep=lambda s: None))
        assert result.status == "completed" and result.text == "The child said: two files"
        again = len([r for r in server.requests if r.messages and r.messages[0]["content"] == CHILD and r.turn == 0])
        assert again == child_first, "the child's answered first call was replayed, not asked again"
    with open_store(store) as runs:
        assert sorted(runs.run_ids()) == [RUN, CHILD_ID], "no second child was started"
    assert read_run(CHILD_ID, store).summary.status == "completed"
