"""What a storm through a chain of fallback models looks like, live and recorded.

Each model of the chain gets the retry policy's attempts of its own (``call_with_retries``),
so a row's ``n/m`` counts the attempts of the model asked now: never past ``m``, which would
read as a policy overrun, nor at ``m`` while a fallback still has all of its own. The row of a
switch says which model was overloaded and how, not an attempt count.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.display.progress import TextProgress
from nb_durable.agent.display.views import views_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import resume_agent, run_agent
from nb_durable.core.runs import read_run
from nb_durable.errors import RetriesExhaustedError
from nb_durable.jupyter.render import render_step
from tests.fakes import MessagesAPIServer, OverloadStorm, reply

MODEL = "claude-test-1"
FALLBACK = "claude-test-2"
LAST = "claude-test-3"
RETRY = RetryPolicy(max_attempts=4, base_delay=0.01, jitter=0.0)

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def go(server: MessagesAPIServer, workspace: Path, out: io.StringIO, fallbacks: tuple[str, ...], rows: type[TextProgress] = TextProgress) -> Any:
    """The run through ``server``'s storm, its rows drawn by ``rows`` into ``out``."""
    return run_agent(
        "Say hello.",
        run_id="storm",
        client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10),
        model=MODEL,
        store=str(workspace.parent / "runs"),
        workspace=workspace,
        retry=RETRY,
        fallback_models=fallbacks,
        fallback_after=2,
        hooks=RunHooks(sleep=lambda s: None, observer=rows(out, width=160, live=False)),
    )


def retry_lines(out: io.StringIO) -> list[str]:
    return [" ".join(line.split()[4:]) for line in out.getvalue().splitlines() if line.lstrip().startswith("retrying")]


def test_each_model_of_the_chain_counts_its_own_attempts_and_the_switch_says_why(workspace: Path) -> None:
    out = io.StringIO()
    overloaded = "the Messages API answered 529 (overloaded): Overloaded"
    # The fallback is overloaded too, past the two failures that move it on: the last answers.
    with MessagesAPIServer(OverloadStorm([reply("Hello.")], [MODEL, FALLBACK])) as server:
        result = go(server, workspace, out, (FALLBACK, LAST))
    assert result.status == "completed"
    assert retry_lines(out) == [
        f"1/4 after {overloaded}",
        f"2/4 after {overloaded}",
        f"switched to {FALLBACK}: {MODEL} was overloaded (2 x 529)",
        f"1/4 after {overloaded}",
        f"2/4 after {overloaded}",
        f"switched to {LAST}: {FALLBACK} was overloaded (2 x 529)",
    ]
    _, steps = views_of(read_run("storm", str(workspace.parent / "runs")))
    assert steps[0].attempt == 5  # the step's own count, which says "after 4 retries": every failed attempt


def test_a_storm_past_the_chain_shows_the_last_model_s_attempts_not_the_step_s(workspace: Path) -> None:
    out = io.StringIO()
    store = str(workspace.parent / "runs")
    with MessagesAPIServer(OverloadStorm([reply("Hello.")], [MODEL, FALLBACK])) as server:
        with pytest.raises(RetriesExhaustedError):
            go(server, workspace, out, (FALLBACK,))
        # Two on the first model, then the fallback's four of its own: 1/4 to 4/4, never 5/4 or 6/4.
        assert [line.split()[0] for line in retry_lines(out)] == ["1/4", "2/4", "switched", "1/4", "2/4", "3/4"]
        _, steps = views_of(read_run("storm", store))
        assert (steps[0].state, steps[0].attempt, steps[0].max_attempts) == ("failed", 4, 4)
        assert "(attempt 4/4)" in render_step(steps[0])
        # Resumed mid-storm: the new session's attempts are numbered from 1 again, and counted so.
        with pytest.raises(RetriesExhaustedError):
            client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
            resume_agent("storm", client=client, store=store, hooks=RunHooks(sleep=lambda s: None))
    _, steps = views_of(read_run("storm", store))
    assert (steps[0].state, steps[0].attempt) == ("failed", 4)


def test_a_row_with_no_attempt_to_count_says_retrying_alone(workspace: Path) -> None:
    out = io.StringIO()
    seen: list[str] = []

    class Rows(TextProgress):
        def step_changed(self, step: Any) -> None:
            if step.state == "retrying" and not step.attempt:
                seen.append(render_step(step))
            super().step_changed(step)

    with MessagesAPIServer(OverloadStorm([reply("Hello.")], [MODEL])) as server:
        result = go(server, workspace, out, (FALLBACK,), rows=Rows)
    assert result.status == "completed" and len(seen) == 1
    assert ">retrying<" in seen[0] and "0/4" not in seen[0] and "(attempt" not in seen[0]
