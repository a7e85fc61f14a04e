"""A streamed reply that broke after ``message_start`` was paid as far as it got: the usage it
reported is recorded with its failed attempt, counted in the run's tokens and dollars (the
session's, ``show``'s and the run index's alike), named in the cost line, and seen by the budget
before the call is tried again. On the real SDK against the loopback Messages API."""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import Any

import pytest

from nb_durable.agent import RunHooks
from nb_durable.agent.display.progress import TextProgress, cost_line
from nb_durable.agent.display.step_views import broken_streams_said, retries_said, usage_text
from nb_durable.agent.display.views import views_of
from nb_durable.agent.models.anthropic import AnthropicModel
from nb_durable.agent.models.base import stall_limit
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.money.budget import _worst_usd
from nb_durable.agent.money.cost import Usage
from nb_durable.agent.money.figures import cost_of_figures
from nb_durable.agent.money.prices import price_for
from nb_durable.agent.run.loop import AgentResult, resume_agent, run_agent
from nb_durable.core.codec import decode_event, encode_event
from nb_durable.core.events import AttemptFailed
from nb_durable.core.index.check import check_index
from nb_durable.core.runs import list_runs, read_run
from nb_durable.errors import TransientModelError
from nb_durable.jupyter.render import render_step
from tests.fakes import Drop, Error, MessagesAPIServer, Stall, StreamError, reply

MODEL = "claude-test-1"  # made up: priced at the fallback price
TASK = "Tidy up the notes."
RETRY = RetryPolicy(max_attempts=5, base_delay=0.01, jitter=0.0)

pytestmark = pytest.mark.usefixtures("no_ambient_anthropic")


def agent(server: MessagesAPIServer, workspace: Path, run_id: str, **settings: Any) -> AgentResult:
    """run_agent on the real SDK against ``server``; waits are recorded, not slept."""
    return run_agent(
        TASK, run_id=run_id, client=AnthropicModel(api_key="test-key", base_url=server.url, timeout=10), model=MODEL,
        store=str(workspace.parent / "runs"), workspace=workspace, retry=RETRY, hooks=RunHooks(sleep=lambda _: None),
        **settings,
    )  # fmt: skip


def messages(server: MessagesAPIServer) -> list[Any]:
    """The server's message requests (not its count_tokens calls)."""
    return [r for r in server.requests if r.endpoint == "messages"]


def broken_attempts(workspace: Path, run_id: str) -> list[AttemptFailed]:
    return [e for e in read_run(run_id, workspace.parent / "runs").events if isinstance(e, AttemptFailed)]


def test_a_stream_broken_after_message_start_is_recorded_and_paid(serve: Any, workspace: Path) -> None:
    server = serve([StreamError("overloaded_error", partial_text="Half an ans"), reply("A whole answer.")])
    result = agent(server, workspace, "broken")
    assert result.status == "completed" and result.text == "A whole answer."
    broken, answered = messages(server)
    # The fake's message_start reports the prompt as the real API does (here mostly written to the cache).
    assert broken.outcome == "stream_error" and Usage.parse(broken.usage).prompt_tokens > 100
    [attempt] = broken_attempts(workspace, "broken")
    assert attempt.usage is not None
    assert {k: attempt.usage[k] for k in broken.usage} == broken.usage  # as the API reported it
    assert (attempt.usage["model"], attempt.usage["asked_model"]) == (MODEL, MODEL)
    price = price_for(MODEL)
    lost, paid = Usage.parse(broken.usage), Usage.parse(answered.usage)
    expected = price.dollars(lost) + price.dollars(paid)
    # The session, `show` (views_of) and the run index count it alike; the index rebuilt from the log agrees.
    shown, steps = views_of(read_run("broken", workspace.parent / "runs"))
    listed = cost_of_figures({s.run_id: s for s in list_runs(workspace.parent / "runs")}["broken"].figures)
    for cost in (result.cost, shown.cost, listed):
        assert cost.paid.total == lost.total + paid.total
        assert cost.paid_dollars == pytest.approx(expected, abs=1e-9)
        assert (cost.broken_streams, cost.broken.total) == (1, lost.total)
        assert cost.broken_dollars == pytest.approx(price.dollars(lost), abs=1e-9)
    assert check_index(str(workspace.parent / "runs")) == []
    line = cost_line(shown.cost, shown.scope)
    assert f"of which ${price.dollars(lost):.4f} in 1 broken stream, as reported before they broke" in line, line
    # The step's row says where those tokens went, beside the answer's own.
    [model_step] = [v for v in steps if v.kind == "model"]
    assert model_step.usage == paid
    said = retries_said(model_step)
    assert said == f"after 1 retry; 1 broken stream reported {usage_text(lost)}", said
    assert html.escape(said) in render_step(model_step, run_model=MODEL)
    printed = io.StringIO()
    TextProgress(printed, width=200, listing=True, live=False).step_changed(model_step)
    assert f"({broken_streams_said(model_step)}) A whole answer." in printed.getvalue(), printed.getvalue()


def test_a_budget_the_broken_streams_spent_stops_the_run_before_the_call_is_tried_again(serve: Any, workspace: Path) -> None:
    probe = serve([StreamError("overloaded_error"), reply("A whole answer.")])
    agent(probe, workspace, "probe")
    request = messages(probe)[0].body
    counted = AnthropicModel(api_key="test-key", base_url=probe.url).count_tokens(request)
    worst = _worst_usd(price_for(MODEL), counted, int(request["max_tokens"]), "5m")
    spent = price_for(MODEL).dollars(Usage.parse(messages(probe)[0].usage))
    # Room for the call, not for the call and the broken stream that came before it.
    server = serve([StreamError("overloaded_error"), reply("A whole answer.")])
    stopped = agent(server, workspace, "budget", max_usd=worst + spent / 2)
    assert stopped.status == "budget_exhausted", stopped.detail
    assert [r.outcome for r in messages(server)] == ["stream_error"]  # never tried again
    assert "model step model:0 was not tried again: its 1 broken stream reported using" in stopped.detail
    assert "Resume with a larger --max-usd" in stopped.detail
    [attempt] = broken_attempts(workspace, "budget")
    assert attempt.usage is not None and attempt.delay is None  # no next attempt was waited for
    assert stopped.cost.broken_streams == 1 and stopped.cost.paid_dollars == pytest.approx(spent, abs=1e-9)
    assert check_index(str(workspace.parent / "runs")) == []
    # A resume asks the budget with what the step it asks again had already spent, before calling.
    client = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
    store = str(workspace.parent / "runs")
    again = resume_agent("budget", client=client, store=store, hooks=RunHooks(sleep=lambda _: None))
    assert again.status == "budget_exhausted" and len(messages(server)) == 1, again.detail
    done = resume_agent("budget", client=client, store=store, max_usd=1.0, hooks=RunHooks(sleep=lambda _: None))
    assert done.status == "completed" and [r.outcome for r in messages(server)] == ["stream_error", "reply"]
    listed = cost_of_figures({s.run_id: s for s in list_runs(store)}["budget"].figures)
    assert listed.broken_streams == 1 and listed.broken_dollars == pytest.approx(spent, abs=1e-9)
    assert check_index(store) == []


def test_every_broken_stream_of_a_step_counts_toward_its_budget(serve: Any, workspace: Path) -> None:
    # No caching, so each attempt reports the same prompt: room for the call and one broken stream, not two.
    probe = serve([StreamError("overloaded_error"), reply("A whole answer.")])
    agent(probe, workspace, "probe", cache_ttl="off")
    request = messages(probe)[0].body
    counted = AnthropicModel(api_key="test-key", base_url=probe.url).count_tokens(request)
    worst = _worst_usd(price_for(MODEL), counted, int(request["max_tokens"]), "off")
    spent = price_for(MODEL).dollars(Usage.parse(messages(probe)[0].usage))
    server = serve([StreamError("overloaded_error"), StreamError("overloaded_error"), reply("A whole answer.")])
    stopped = agent(server, workspace, "twice", cache_ttl="off", max_usd=worst + spent * 1.5)
    assert stopped.status == "budget_exhausted" and [r.outcome for r in messages(server)] == ["stream_error"] * 2
    assert "its 2 broken streams reported using" in stopped.detail, stopped.detail
    assert [a.delay is None for a in broken_attempts(workspace, "twice")] == [False, True]


@pytest.mark.parametrize(
    "action", [StreamError("overloaded_error"), Drop(mid_stream=True), Stall(seconds=5.0), Error(529)], ids=lambda a: a.kind
)
def test_every_way_a_stream_breaks_carries_what_it_reported(serve: Any, action: Any) -> None:
    server = serve([action])
    model = AnthropicModel(api_key="test-key", base_url=server.url, timeout=10)
    request = {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hello " * 40}]}
    with stall_limit(0.3), pytest.raises(TransientModelError) as failed:
        model.create(request)
    reported = messages(server)[0].usage
    if isinstance(action, Error):  # no stream began: nothing was reported, nothing is carried
        assert failed.value.usage is None
    else:
        # The prompt as message_start reported it; of the output, what was reported before the break.
        carried = dict(failed.value.usage or {})
        assert 1 <= carried.pop("output_tokens") <= reported.pop("output_tokens")
        assert carried == {**reported, "model": MODEL, "asked_model": MODEL}


def test_an_attempt_line_without_usage_reads_and_writes_as_before() -> None:
    old = (
        b'{"v":1,"seq":2,"kind":"attempt_failed","ts":1796120713.703,"step":"model:0","attempt":1,'
        b'"error":"TransientModelError","message":"the Messages API answered 529 (overloaded_error) (scripted)",'
        b'"status":529,"delay":0.5,"crc":"5e81d39f"}'
    )  # written by nb_durable 0.1 (tests/fixtures/logs)
    event = decode_event(old)
    assert isinstance(event, AttemptFailed) and event.usage is None and event.status == 529
    assert encode_event(event.seq, event.ts, event.kind, event.fields()) == old + b"\n"
    usage = {"input_tokens": 120, "output_tokens": 1, "model": MODEL, "asked_model": MODEL}
    line = encode_event(3, 1.0, "attempt_failed", {**event.fields(), "usage": usage})
    again = decode_event(line.rstrip(b"\n"))
    assert isinstance(again, AttemptFailed) and again.usage == usage
