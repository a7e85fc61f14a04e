"""OpenTelemetry traces of delegated runs: a child run's spans in its parent's trace.

Proven here, with the real OpenTelemetry SDK (its in-memory exporter) and real delegated runs:

* Two children of one turn, running at once on threads of their own: each child's
  ``nb_durable.run`` span is a child of the span of the parent's ``delegate`` step that started
  it (which names the child), in the parent's trace, with its own step spans; the anthropic
  SDK's span of each child request nests under that child's model step, not under the step the
  parent's thread has current; and the parent's run span, which bills the tree as its header
  does, is what the step spans of the whole trace say was paid.
* A child crashed at its step 3 and resumed with its parent: its run span is under the
  parent's replayed ``delegate`` step, its first two steps replayed (tokens and dollars saved,
  none spent), the rest live; the child that had finished is not run, so it draws nothing.
* A fork's own copy of a child (its delegate step's record names the source's child) is under
  the fork's step.
* With ``delegate_depth=2`` a grandchild's run span is under its parent's ``delegate`` step,
  whose run is under the top run's: one trace, three levels.
* A child's start records the W3C ``traceparent`` of the ``delegate`` step that started it; a
  worker that resumes the child alone (its parent's process died) starts the child's run span
  under that step, in the first session's trace, its replayed and live steps under it. A child
  whose start recorded none (an untraced session, a log of an earlier version) is a trace of
  its own that still names its parent run and step. An observer whose ``child_trace`` fails is
  a warning: the start is recorded without a trace context and the run goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from nb_durable import fork
from nb_durable.agent import (
    AnthropicModel,
    DemoModel,
    RunHooks,
    ToolRegistry,
    builtin_tools,
    resume_agent,
    run_agent,
    tool,
)
from nb_durable.agent.delegation.tree import descendants
from nb_durable.agent.display.tracing import TraceObserver
from nb_durable.agent.fleet.worker import ResumeWorker
from nb_durable.agent.models.demo import DEMO_TASK, prepare_demo_workspace
from nb_durable.agent.run.crash import CrashPoint
from nb_durable.agent.run.hooks import DisplayWarning, Observer
from nb_durable.core.events import RunStarted
from nb_durable.core.runs import read_run
from nb_durable.core.stores import open_store
from nb_durable.errors import SimulatedCrash
from nb_durable.testing import ScriptedModel, text_message, tool_use_message
from tests.agent.delegation import tree_agent
from tests.fakes import FunctionScenario, MessagesAPIServer, reply, tool_use


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def ours(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("nb_durable.")]


def run_span(finished: list[ReadableSpan], run_id: str) -> ReadableSpan:
    (found,) = [s for s in finished if s.name == "nb_durable.run" and attrs(s)["nb_durable.run_id"] == run_id]
    return found


def steps_of(finished: list[ReadableSpan], run_id: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name.startswith("nb_durable.step") and attrs(s)["nb_durable.run_id"] == run_id]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def started_by(finished: list[ReadableSpan], child: str) -> ReadableSpan:
    """The span of the delegate step that started run ``child``."""
    (found,) = [s for s in finished if attrs(s).get("nb_durable.child_run_id") == child]
    assert attrs(found)["nb_durable.step.kind"] == "delegate"
    return found


def loopback(scenario: Callable[[Any], Any]) -> Any:
    return MessagesAPIServer(FunctionScenario(scenario))


def test_children_of_one_turn_run_at_once_each_under_the_step_that_started_it(
    tmp_path: Path, workspace: Path, spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = spans
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # the SDK traces through the registered provider
    both_there = threading.Barrier(2, timeout=10)

    @tool(effect="idempotent")
    def record_entry(entry: str) -> str:
        """Record one entry in the team ledger."""
        both_there.wait()  # each child's call waits for the other's: the two run at once
        return f"recorded {entry!r}"

    with loopback(tree_agent.scenario) as server:
        result = run_agent(
            tree_agent.PARENT, run_id="fix", client=AnthropicModel(api_key="sk-test", base_url=server.url), model="claude-test-1",
            tools=ToolRegistry([*builtin_tools(), record_entry]), delegate=True, store=str(tmp_path / "runs"), workspace=workspace,
            hooks=RunHooks(observer=TraceObserver(provider)),
        )  # fmt: skip
    assert result.status == "completed", result.detail
    finished = ours(exporter)
    parent = run_span(finished, "fix")
    assert parent.parent is None
    assert {s.context.trace_id for s in exporter.get_finished_spans()} == {parent.context.trace_id}, "one trace"
    children = ["fix.delegate-0-0-toolu_find", "fix.delegate-0-1-toolu_test"]
    runs = [run_span(finished, child) for child in children]
    for child, span in zip(children, runs, strict=True):
        start = started_by(finished, child)
        assert parent_id(start) == parent.context.span_id and attrs(start)["nb_durable.run_id"] == "fix"
        assert parent_id(span) == start.context.span_id
        assert attrs(span)["nb_durable.parent.run_id"] == "fix"
        assert attrs(span)["nb_durable.parent.step_id"] == attrs(start)["nb_durable.step.id"]
        assert attrs(span)["nb_durable.run.status"] == "completed"
        steps = steps_of(finished, child)
        assert [attrs(s)["nb_durable.step.kind"] for s in steps] == ["model", "tool", "model"]
        assert all(parent_id(s) == span.context.span_id and attrs(s)["nb_durable.step.state"] == "live" for s in steps)
        assert [attrs(s)["nb_durable.idempotency_key"] for s in steps] == [f"{child}:{attrs(s)['nb_durable.step.id']}" for s in steps]
    first, second = runs
    assert first.start_time is not None and second.start_time is not None and first.end_time is not None
    assert second.start_time < first.end_time, "the two children's spans overlap"

    model_steps = {s.context.span_id: s for s in finished if attrs(s).get("nb_durable.step.kind") == "model"}
    sdk = [s for s in exporter.get_finished_spans() if s.instrumentation_scope is not None and s.instrumentation_scope.name.startswith("com.anthropic")]
    assert len(sdk) == len(model_steps) == 6
    for request in sdk:
        step = model_steps[parent_id(request)]
        assert attrs(step)["nb_durable.run_id"] == attrs(request)["gen_ai.conversation.id"], "under its own run's step"

    # The parent's header bills the tree: what every step span of the trace says was paid.
    paid = sum(attrs(s).get("nb_durable.cost_usd", 0) for s in finished if s.name.startswith("nb_durable.step"))
    assert attrs(parent)["nb_durable.cost.paid_usd"] == pytest.approx(paid) and paid > 0
    assert attrs(parent)["gen_ai.usage.input_tokens"] == sum(
        attrs(s).get("gen_ai.usage.input_tokens", 0) for s in finished if s.name.startswith("nb_durable.step")
    )


def test_a_child_resumed_after_a_crash_shows_its_replayed_steps(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    work = prepare_demo_workspace(tmp_path / "work")
    common: dict[str, Any] = {"client": DemoModel(latency=0), "store": str(tmp_path / "runs")}
    with pytest.raises(SimulatedCrash, match=r"at step 3 of child run demo\.delegate-0-1-"):
        run_agent(DEMO_TASK, run_id="demo", workspace=str(work), delegate=True, hooks=RunHooks(child_crash=CrashPoint.parse("2.3")),
                  **common)  # fmt: skip
    done = resume_agent("demo", hooks=RunHooks(observer=TraceObserver(provider)), **common)
    assert done.status == "completed", done.detail
    finished = ours(exporter)
    parent = run_span(finished, "demo")
    (crashed,) = [s for s in finished if s.name == "nb_durable.run" and s is not parent]  # the finished child runs nothing
    child = attrs(crashed)["nb_durable.run_id"]
    assert child.startswith("demo.delegate-0-1-")
    start = started_by(finished, child)
    assert attrs(start)["nb_durable.step.state"] == "replayed" and parent_id(start) == parent.context.span_id
    assert parent_id(crashed) == start.context.span_id and crashed.context.trace_id == parent.context.trace_id
    steps = steps_of(finished, child)
    states = [attrs(s)["nb_durable.step.state"] for s in steps]
    assert states[:2] == ["replayed", "replayed"] and set(states[2:]) == {"live"}, states
    assert attrs(crashed)["nb_durable.run.replayed_steps"] == 2
    replayed_model = [attrs(s) for s in steps[:2] if attrs(s)["nb_durable.step.kind"] == "model"]
    assert replayed_model and all(
        a["nb_durable.step.replayed"] and a["nb_durable.tokens.replay_saved"] > 0 and "gen_ai.usage.input_tokens" not in a
        for a in replayed_model
    )
    assert attrs(crashed)["nb_durable.tokens.replay_saved"] == sum(
        attrs(s).get("nb_durable.tokens.replay_saved", 0) for s in steps
    )


def test_a_fork_s_own_copy_of_a_child_is_under_the_fork_s_step(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    # The fork's delegate step records its source's child; the child that goes on is the fork's copy.
    provider, exporter = spans
    store = str(tmp_path / "runs")
    script = ScriptedModel([tool_use_message([("delegate", {"task": "Count the files."})])])
    with pytest.raises(SimulatedCrash):  # killed as the child's first model call starts
        run_agent("Split the work.", client=script, store=store, workspace=str(tmp_path), delegate=True, run_id="p",
                  hooks=RunHooks(child_crash=CrashPoint.parse("1.1")))  # fmt: skip
    with fork("p", "f", at=2, root=store):
        pass
    with open_store(store) as opened:
        (mine,) = descendants(opened, "f")
    done = resume_agent("f", client=ScriptedModel([text_message("four files"), text_message("done")]), store=store,
                        hooks=RunHooks(observer=TraceObserver(provider)))  # fmt: skip
    assert done.status == "completed", done.detail
    finished = ours(exporter)
    start = started_by(finished, mine)
    assert attrs(start)["nb_durable.run_id"] == "f" and parent_id(run_span(finished, mine)) == start.context.span_id


def test_a_grandchild_is_a_third_level_of_the_same_trace(
    tmp_path: Path, workspace: Path, spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = spans
    top, middle, bottom = "Plan the work.", "Do the middle part.", "Do the bottom part."

    def scenario(request: Any) -> Any:
        task, turn = tree_agent._task(request), request.turn or 0
        if task == top and turn == 0:
            return reply(tool_use("delegate", {"task": middle}, id="toolu_mid"))
        if task == middle and turn == 0:
            return reply(tool_use("delegate", {"task": bottom}, id="toolu_bot"))
        return reply(f"{task} done")

    with loopback(scenario) as server:
        result = run_agent(
            top, run_id="top", client=AnthropicModel(api_key="sk-test", base_url=server.url), model="claude-test-1",
            tools=ToolRegistry(builtin_tools()), delegate=True, delegate_depth=2, store=str(tmp_path / "runs"),
            workspace=workspace, hooks=RunHooks(observer=TraceObserver(provider)),
        )  # fmt: skip
    assert result.status == "completed", result.detail
    finished = ours(exporter)
    above = run_span(finished, "top")
    for run_id in ("top.delegate-0-0-toolu_mid", "top.delegate-0-0-toolu_mid.delegate-0-0-toolu_bot"):
        below = run_span(finished, run_id)
        start = started_by(finished, run_id)
        assert parent_id(start) == above.context.span_id and parent_id(below) == start.context.span_id
        assert attrs(below)["nb_durable.parent.run_id"] == attrs(above)["nb_durable.run_id"]
        assert [attrs(s)["nb_durable.step.state"] for s in steps_of(finished, run_id)] == ["live"] * len(steps_of(finished, run_id))
        above = below
    assert {s.context.trace_id for s in finished} == {run_span(finished, "top").context.trace_id}



def _crashed_tree(tmp_path: Path, observer: Observer) -> tuple[str, str]:
    """A demo tree whose process died at step 3 of its second child, drawn by ``observer``:
    the store, and that child's id."""
    work = prepare_demo_workspace(tmp_path / "work")
    store = str(tmp_path / "runs")
    with pytest.raises(SimulatedCrash, match=r"at step 3 of child run demo\.delegate-0-1-"):
        run_agent(DEMO_TASK, run_id="demo", workspace=str(work), delegate=True, client=DemoModel(latency=0), store=store,
                  hooks=RunHooks(observer=observer, child_crash=CrashPoint.parse("2.3")))  # fmt: skip
    with open_store(store) as opened:
        (child,) = [c for c in descendants(opened, "demo") if read_run(c, opened).summary.status != "completed"]
    return store, child


def _start_of(store: str, run_id: str) -> RunStarted:
    with open_store(store) as opened:
        started = read_run(run_id, opened).events[0]
    assert isinstance(started, RunStarted)
    return started


def test_a_child_a_worker_resumes_alone_is_in_the_trace_of_the_step_that_started_it(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = spans
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")  # the worker rebuilds the demo model from the log
    store, child = _crashed_tree(tmp_path, TraceObserver(provider))
    first = ours(exporter)
    start = started_by(first, child)
    trace_id = run_span(first, "demo").context.trace_id
    flags = start.context.trace_flags
    assert _start_of(store, child).trace == {"traceparent": f"00-{trace_id:032x}-{start.context.span_id:016x}-{flags:02x}"}
    exporter.clear()

    # The parent's process is gone; a worker (another process, as far as spans go) takes the child alone.
    taken = ResumeWorker(store, observer=TraceObserver(provider)).take(child)
    assert taken.outcome == "completed", taken
    resumed = ours(exporter)
    span = run_span(resumed, child)
    assert span.context.trace_id == trace_id, "in the trace of the session that started it"
    assert span.parent is not None and span.parent.is_remote and parent_id(span) == start.context.span_id
    assert attrs(span)["nb_durable.parent.run_id"] == "demo"
    assert attrs(span)["nb_durable.parent.step_id"] == attrs(start)["nb_durable.step.id"]
    steps = steps_of(resumed, child)
    assert all(parent_id(s) == span.context.span_id and s.context.trace_id == trace_id for s in steps)
    states = [attrs(s)["nb_durable.step.state"] for s in steps]
    assert states[:2] == ["replayed", "replayed"] and set(states[2:]) == {"live"}, states


def test_a_child_whose_start_recorded_no_trace_is_a_trace_of_its_own_naming_its_parent(
    tmp_path: Path, spans: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a child of an untraced session, or of a version before traces were recorded, is.
    provider, exporter = spans
    monkeypatch.setenv("NB_DURABLE_DEMO_LATENCY", "0")
    store, child = _crashed_tree(tmp_path, Observer())
    started = _start_of(store, child)
    assert started.trace is None and "trace" not in started.fields(), "an untraced session records nothing"
    taken = ResumeWorker(store, observer=TraceObserver(provider)).take(child)
    assert taken.outcome == "completed", taken
    span = run_span(ours(exporter), child)
    assert span.parent is None
    assert attrs(span)["nb_durable.parent.run_id"] == "demo"
    assert started.parent is not None and attrs(span)["nb_durable.parent.step_id"] == started.parent["step"]


def test_an_observer_that_fails_to_say_a_trace_context_is_a_warning_and_records_none(tmp_path: Path) -> None:
    class Failing(Observer):
        def child_trace(self, run_id: str, step_id: str) -> dict[str, str]:
            raise RuntimeError("no propagator")

    class Numbers(Observer):
        def child_trace(self, run_id: str, step_id: str) -> Any:
            return {"traceparent": 7}  # not text: it could not be the log's

    for observer, said in ((Failing(), "no propagator"), (Numbers(), "text names and values")):
        script = ScriptedModel([tool_use_message([("delegate", {"task": "Count the files."})]), text_message("four"), text_message("done")])
        store = str(tmp_path / type(observer).__name__)
        with pytest.warns(DisplayWarning, match=f"the start of child run p.delegate-0-0-.*{said}"):
            done = run_agent("Split the work.", client=script, store=store, workspace=str(tmp_path), delegate=True, run_id="p",
                             hooks=RunHooks(observer=observer))  # fmt: skip
        assert done.status == "completed", done.detail
        with open_store(store) as opened:
            (child,) = descendants(opened, "p")
        assert _start_of(store, child).trace is None
