"""A stalled stream is a transient failure: after ``stall_timeout`` seconds without an event the
attempt is recorded as failed and asked again, through the real SDK against a loopback stream
that goes silent after its first events (the connection held open, as a stuck upstream holds it),
or that keeps sending pings and nothing else (pings are not progress).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.loop import run_agent
from nb_durable.agent.run.outcomes import AgentResult
from nb_durable.core.runs import read_run
from tests.fakes import MessagesAPIServer, Stall, reply

MODEL = "claude-test-1"


pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def _through_a_stall(workspace: Path, stall: Stall, run_id: str) -> tuple[AgentResult, list[str], float]:
    """A run whose first reply stalls as ``stall`` says (the stall limit 0.5 s), then comes whole."""
    with MessagesAPIServer([[stall, reply("Done after the stall.")]]) as server:
        started = time.monotonic()
        result = run_agent(
            "Say done.",
            run_id=run_id,
            client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=60),
            model=MODEL,
            store=str(workspace.parent / "runs"),
            workspace=workspace,
            retry=RetryPolicy(max_attempts=3, base_delay=0.01, jitter=0.0),
            hooks=RunHooks(sleep=lambda s: None),
            stall_timeout=0.5,
        )
        took = time.monotonic() - started
        outcomes = [r.outcome for r in server.requests]
    (attempt,) = read_run(run_id, str(workspace.parent / "runs")).steps[0].attempts
    assert attempt.error == "TransientModelError" and "stalled: no event for 0.5 s" in attempt.message
    assert attempt.delay is not None  # retried, as any transient failure is
    return result, outcomes, took


def test_a_stalled_stream_is_retried_after_the_stall_timeout(workspace: Path) -> None:
    result, outcomes, took = _through_a_stall(workspace, Stall(seconds=30), "stall")
    assert result.status == "completed" and result.text == "Done after the stall."
    assert outcomes == ["stalled", "reply"]
    assert took < 20  # the SDK's own timeout (60 s here) was never waited out


@pytest.mark.parametrize("after", [0, 3], ids=["nothing-but-pings", "pings-after-the-start"])
def test_a_stream_that_only_pings_is_a_stall_counted_from_its_last_event_of_progress(workspace: Path, after: int) -> None:
    # Each ping resets the read timeout: only the reader, counting from the last event that
    # is not a ping, can tell a stuck generation from a slow one.
    result, outcomes, took = _through_a_stall(workspace, Stall(seconds=10, after=after, pings=0.05), "pings")
    assert result.status == "completed" and result.text == "Done after the stall."
    assert outcomes == ["stalled", "reply"]
    assert 0.5 <= took < 5  # the stall limit, never the 10 s the pings went on for


def test_a_stream_slower_than_the_limit_between_events_is_not_a_stall(workspace: Path) -> None:
    with MessagesAPIServer([reply("Slow but steady words arrive one by one.", event_delay=0.05)]) as server:
        result = run_agent(
            "Say something.",
            run_id="steady",
            client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=60),
            model=MODEL,
            store=str(workspace.parent / "runs"),
            workspace=workspace,
            hooks=RunHooks(sleep=lambda s: None),
            stall_timeout=0.5,
        )
        assert [r.outcome for r in server.requests] == ["reply"]
    assert result.status == "completed"


def test_stalls_count_toward_a_fallback_switch(workspace: Path) -> None:
    from tests.fakes import Action, FunctionScenario, RecordedRequest

    def answer(request: RecordedRequest) -> Action:
        return Stall(seconds=30) if request.body.get("model") == MODEL else reply("Answered by the fallback.")

    with MessagesAPIServer(FunctionScenario(answer)) as server:
        result = run_agent(
            "Say done.",
            run_id="stalled-over",
            client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=60),
            model=MODEL,
            store=str(workspace.parent / "runs"),
            workspace=workspace,
            retry=RetryPolicy(max_attempts=5, base_delay=0.01, jitter=0.0),
            hooks=RunHooks(sleep=lambda s: None),
            stall_timeout=0.3,
            fallback_models=("claude-test-2",),
            fallback_after=2,
        )
    assert result.status == "completed" and result.text == "Answered by the fallback."
    (step,) = read_run("stalled-over", str(workspace.parent / "runs")).steps
    assert [d.decision for d in step.decisions] == ["model -> claude-test-2 because overloaded: 2 x stalled"]
