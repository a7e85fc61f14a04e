"""OpenTelemetry traces of runs (``TraceObserver``), read back with the SDK's in-memory exporter.

Proven here, with the real OpenTelemetry SDK and the scripted model:

* A live run is one ``nb_durable.run`` span (status, step counts, tokens and cost) with a child
  span per step: its id, kind, state ``live``, idempotency key ``<run_id>:<step_id>``, and for
  model steps the tokens and the cost the run's price gives them.
* Running it again replays it: every step span says ``replayed``, and the run span counts the
  tokens saved; no step is live.
* A run interrupted inside ``run_bash`` (an external effect) ends with its tool span in doubt
  and its run span ``in_doubt`` (status error); resumed with the skip policy, the step span says
  ``skipped`` and in doubt.
* Tracing never changes what is recorded: the same run with and without the observer leaves
  the same events (kinds, steps, results).
* The anthropic SDK's own span of a live request (against the loopback Messages API) is a child
  of the model step's span, and names the run as its ``gen_ai.conversation.id``.
* A replayed step's tokens and dollars are said as saved, never as spent: summed over the step
  spans, ``gen_ai.usage.*`` and ``nb_durable.cost_usd`` equal what the run span says was paid.
* A step is one span however often its ended view is shown again (a model step that gave up
  after its retries is shown failed twice), and a span processor that raises as a span ends
  leaves no step span current on the thread.
* Error text on a span (a status, a retry's event) is cut to ``ERROR_CHARS``, saying so.
* A session ended by what the loop does not settle itself (a simulated crash, a bug in a tool
  of Python's own) still ends its spans, saying how: they used to stay open, never exported,
  with a step span current on the thread for good.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nb_durable.agent import AnthropicModel, RunHooks, resume_agent, run_agent
from nb_durable.agent.display.tracing import ERROR_CHARS, TraceObserver
from nb_durable.agent.display.views import StepView
from nb_durable.agent.models.retry import RetryPolicy
from nb_durable.agent.run.crash import CrashAt
from nb_durable.agent.run.hooks import DisplayWarning, Observers
from nb_durable.core.runs import read_run
from nb_durable.errors import SimulatedCrash, TransientModelError
from nb_durable.testing import ScriptedModel, text_message, tool_use_message
from tests.fakes import MessagesAPIServer, reply, tool_use


def script() -> list[dict[str, Any]]:
    return [
        tool_use_message([("run_bash", {"command": "echo hi"}, "toolu_1")], text="Saying hi."),
        text_message("Done."),
    ]


def by_name(exporter: InMemorySpanExporter) -> tuple[ReadableSpan, list[ReadableSpan]]:
    finished = list(exporter.get_finished_spans())
    (run,) = [s for s in finished if s.name == "nb_durable.run"]
    steps = [s for s in finished if s.name.startswith("nb_durable.step")]
    exporter.clear()
    return run, steps


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_a_live_run_then_its_replay(tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    store = str(tmp_path / "runs")

    def go() -> None:
        run_agent("say hi", run_id="hi", client=ScriptedModel(script()), store=store, workspace=tmp_path,
                  hooks=RunHooks(observer=TraceObserver(provider)))

    go()
    run, steps = by_name(exporter)
    assert attrs(run)["nb_durable.run.status"] == "completed" and attrs(run)["nb_durable.run.live_steps"] == 3
    assert [attrs(s)["nb_durable.step.id"] for s in steps] == ["model:0", "tool:0:0:toolu_1", "model:1"]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in steps)
    assert all(attrs(s)["nb_durable.step.state"] == "live" and not attrs(s)["nb_durable.step.replayed"] for s in steps)
    assert [attrs(s)["nb_durable.idempotency_key"] for s in steps] == [f"hi:{attrs(s)['nb_durable.step.id']}" for s in steps]
    model = attrs(steps[0])
    assert model["gen_ai.usage.input_tokens"] > 0 and model["gen_ai.usage.output_tokens"] > 0
    assert model["nb_durable.cost_usd"] > 0
    assert attrs(run)["nb_durable.cost.paid_usd"] == pytest.approx(sum(attrs(s).get("nb_durable.cost_usd", 0) for s in steps))

    go()  # the same run again: replayed, nothing live
    run, steps = by_name(exporter)
    assert attrs(run)["nb_durable.run.live_steps"] == 0 and attrs(run)["nb_durable.tokens.replay_saved"] > 0
    assert [attrs(s)["nb_durable.step.state"] for s in steps] == ["replayed"] * 3
    assert all(attrs(s)["nb_durable.step.replayed"] for s in steps)


def test_in_doubt_steps_and_what_is_recorded(tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans

    def interrupt_the_tool(position: int, view: StepView) -> None:
        if view.kind == "tool":
            raise KeyboardInterrupt

    def go(store: str, observer: Any) -> None:
        with pytest.raises(KeyboardInterrupt):
            run_agent("say hi", run_id="hi", client=ScriptedModel(script()), store=store, workspace=tmp_path,
                      hooks=RunHooks(observer=observer, before_step=interrupt_the_tool))
        resume_agent("hi", client=ScriptedModel(script()[1:]), store=store, hooks=RunHooks(observer=observer))

    traced, plain = str(tmp_path / "traced"), str(tmp_path / "plain")
    go(traced, TraceObserver(provider))
    go(plain, Observers())
    finished = list(exporter.get_finished_spans())
    runs = [s for s in finished if s.name == "nb_durable.run"]
    assert [attrs(r)["nb_durable.run.status"] for r in runs] == ["in_doubt", "completed"]
    assert runs[0].status.status_code.name == "ERROR"
    tools = [attrs(s) for s in finished if attrs(s).get("nb_durable.step.id") == "tool:0:0:toolu_1"]
    assert [(t["nb_durable.step.state"], t["nb_durable.step.in_doubt"]) for t in tools] == [("in_doubt", True), ("skipped", True)]

    def recorded(store: str) -> list[tuple[Any, ...]]:
        return [(e.kind, getattr(e, "step", None), getattr(e, "result", None), getattr(e, "decision", None))
                for e in read_run("hi", store).events]

    assert recorded(traced) == recorded(plain)


def test_the_sdk_span_nests_under_the_model_step(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = spans
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the SDK traces through the registered provider
    with MessagesAPIServer([reply("Hello.", tool_use("list_dir", {"path": "."}, id="toolu_ls")), reply("Done.")]) as server:
        run_agent("look", run_id="look", client=AnthropicModel(api_key="sk-test", base_url=server.url), model="claude-test-1",
                  store=str(tmp_path / "runs"), workspace=tmp_path, hooks=RunHooks(observer=TraceObserver(provider)))
    finished = list(exporter.get_finished_spans())
    model_steps = {s.context.span_id: s for s in finished if attrs(s).get("nb_durable.step.kind") == "model"}
    sdk = [s for s in finished if s.instrumentation_scope is not None and s.instrumentation_scope.name.startswith("com.anthropic")]
    assert len(model_steps) == 2 and len(sdk) == 2, [s.name for s in finished]
    assert all(s.parent is not None and s.parent.span_id in model_steps for s in sdk)
    assert [attrs(s).get("gen_ai.conversation.id") for s in sdk] == ["look", "look"]  # the run id, for the SDK's spans


def test_a_step_span_prices_a_reply_as_the_run_does(tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    # The scripted model answers as "scripted", a name no price table knows: the run prices its
    # replies by the model asked for (here an override), and so must each step's span.
    from nb_durable.agent.money.prices import Price

    provider, exporter = spans
    prices = {"in-house-model": Price.simple(100.0, 500.0)}
    run_agent("say hi", run_id="priced", client=ScriptedModel(script()), model="in-house-model", store=str(tmp_path / "runs"),
              workspace=tmp_path, hooks=RunHooks(observer=TraceObserver(provider, prices=prices), prices=prices))  # fmt: skip
    run, steps = by_name(exporter)
    paid = attrs(run)["nb_durable.cost.paid_usd"]
    assert paid == pytest.approx(sum(attrs(s).get("nb_durable.cost_usd", 0) for s in steps)) and paid > 0


def test_a_replayed_step_says_its_tokens_were_saved_not_spent(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    # A backend that sums gen_ai.usage.* over spans (as GenAI dashboards do) billed every replay
    # again: the run span said 0 paid, its replayed step spans said every token spent.
    provider, exporter = spans
    store = str(tmp_path / "runs")
    def go() -> tuple[ReadableSpan, list[ReadableSpan]]:
        run_agent("say hi", run_id="hi", client=ScriptedModel(script()), store=store, workspace=tmp_path,
                  hooks=RunHooks(observer=TraceObserver(provider)))  # fmt: skip
        return by_name(exporter)

    _, live = go()
    run, replayed = go()
    assert [attrs(s)["nb_durable.step.state"] for s in replayed] == ["replayed"] * 3
    assert attrs(run)["nb_durable.cost.paid_usd"] == 0
    assert not any(k.startswith("gen_ai.usage.") or k == "nb_durable.cost_usd" for s in replayed for k in attrs(s))
    model = attrs(replayed[0])
    assert model["nb_durable.tokens.replay_saved"] == attrs(live[0])["gen_ai.usage.input_tokens"] + attrs(live[0])["gen_ai.usage.output_tokens"]
    assert model["nb_durable.cost.replay_saved_usd"] == pytest.approx(attrs(live[0])["nb_durable.cost_usd"])
    saved = sum(attrs(s).get("nb_durable.cost.replay_saved_usd", 0) for s in replayed)
    assert saved == pytest.approx(attrs(run)["nb_durable.cost.replay_saved_usd"]) and saved > 0
    assert sum(attrs(s).get("nb_durable.tokens.replay_saved", 0) for s in replayed) == attrs(run)["nb_durable.tokens.replay_saved"]


def test_a_step_shown_again_after_it_ended_is_still_one_span(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    # A model step that gives up after its retries is shown failed twice (by its last attempt,
    # then by the seam that raises): the second view opened a second span of the same step.
    provider, exporter = spans
    overloaded = [TransientModelError("the Messages API answered 529 (overloaded)", status=529) for _ in range(2)]
    with pytest.raises(Exception, match="kept failing"):
        run_agent("say hi", run_id="busy", client=ScriptedModel(overloaded), store=str(tmp_path / "runs"), workspace=tmp_path,
                  retry=RetryPolicy(max_attempts=2), hooks=RunHooks(observer=TraceObserver(provider), sleep=lambda s: None))  # fmt: skip
    run, steps = by_name(exporter)
    assert [(attrs(s)["nb_durable.step.id"], attrs(s)["nb_durable.step.state"]) for s in steps] == [("model:0", "failed")]
    assert [e.name for e in steps[0].events] == ["retry"] and steps[0].status.status_code.name == "ERROR"
    assert attrs(run)["nb_durable.run.status"] == "failed"


class _FailsAtEnd(SpanProcessor):
    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("the exporter's queue is gone")

def test_a_span_that_fails_to_end_leaves_no_step_current(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    # A live step's span is made current so the SDK's span nests under it; a processor that
    # raised as the span ended left it current for good: every later span of the thread (the
    # next runs', the notebook's own) became a child of a step long finished.
    provider, _ = spans
    provider.add_span_processor(_FailsAtEnd())
    with pytest.warns(DisplayWarning, match="the exporter's queue is gone"):
        result = run_agent("say hi", run_id="hi", client=ScriptedModel(script()), store=str(tmp_path / "runs"), workspace=tmp_path,
                           hooks=RunHooks(observer=TraceObserver(provider)))  # fmt: skip
    assert result.status == "completed"
    assert not trace.get_current_span().get_span_context().is_valid, "no span is current after the run"


def test_error_text_on_a_span_is_cut_to_the_limit(tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    # A gateway's HTML error page came back as a 5,000-character model error, put whole on the
    # step's status, its retry event and the run's status.
    provider, exporter = spans
    page = "<html>" + "bad gateway " * 500 + "</html>"
    overloaded = [TransientModelError(f"the Messages API answered 502: {page}", status=502) for _ in range(2)]
    with pytest.raises(Exception, match="kept failing"):
        run_agent("say hi", run_id="busy", client=ScriptedModel(overloaded), store=str(tmp_path / "runs"), workspace=tmp_path,
                  retry=RetryPolicy(max_attempts=2), hooks=RunHooks(observer=TraceObserver(provider), sleep=lambda s: None))  # fmt: skip
    run, (step,) = by_name(exporter)
    said = [step.status.description, run.status.description]
    said += [str((e.attributes or {})["error"]) for e in step.events]
    assert len(said) == 3
    for text in said:
        assert text is not None and len(text) <= ERROR_CHARS, len(text or "")
        assert "the Messages API answered 502: <html>bad gateway" in text and "more characters; the run's log has the whole error" in text


@pytest.mark.parametrize("stop", ["crash", "bug"])
def test_a_session_that_raises_ends_its_spans_and_says_how(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter], stop: str
) -> None:
    provider, exporter = spans

    def bug(position: int, view: StepView) -> None:
        if view.kind == "tool":
            raise ZeroDivisionError("a hook of the caller's own went wrong")

    before_step, raised = (CrashAt(2), SimulatedCrash) if stop == "crash" else (bug, ZeroDivisionError)
    with pytest.raises(raised):
        run_agent("say hi", run_id="hi", client=ScriptedModel(script()), store=str(tmp_path / "runs"), workspace=tmp_path,
                  hooks=RunHooks(observer=TraceObserver(provider), before_step=before_step))  # fmt: skip
    run, steps = by_name(exporter)
    said = attrs(run)["nb_durable.run.status"]
    assert said == ("crashed" if stop == "crash" else "failed"), said
    assert run.status.status_code.name == "ERROR" and raised.__name__ in (run.status.description or "")
    assert [attrs(s)["nb_durable.step.id"] for s in steps] == ["model:0", "tool:0:0:toolu_1"]
    assert not trace.get_current_span().get_span_context().is_valid, "no span is current after the run"
