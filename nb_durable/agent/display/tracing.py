"""OpenTelemetry traces of agent runs: one span per run, one per step (``pip install 'nb-durable[otel]'``).

``TraceObserver`` is an ``Observer``: display only. It hears the same step and run views as
the timeline, so it can never change what is recorded, and a failure of its own becomes a
``DisplayWarning``, never the step's. A step span says whether the step was replayed, ran
live, or is in doubt (or skipped as outcome unknown), with its idempotency key, its tokens and
its cost (a replayed step's as saved, so step spans add up to what the run span says was paid);
the run span carries the run's totals and how it ended. A step is one span: a view of a step
whose span has ended (shown again as it is re-said) changes nothing. While a live step runs its
span is the current one, so the anthropic SDK's own span of the request (the SDK traces its
calls when OpenTelemetry is installed) nests under it. Each thread keeps its own run, so one
observer can watch the runs of a worker's threads.

A child run (``agent.delegation``) runs on a thread of its own, where no span is current: the
observer ``child`` hands it starts the child's run span under the span of the parent's
``delegate`` step that started it, by that span's context, so the whole tree is one trace at
any depth, with children of one turn side by side. That step's span opens as the child's start
is about to be recorded (``child_trace``), so the start records its W3C ``traceparent``: a
session that draws the child without its parent's (a worker's, in another process, hours
later) starts the child's run span under that step all the same, as a remote parent. The
span has long ended by then, as it has when the parent's own session runs the child: the
child's run is that step's work, which goes on after it (one parent, so a parent and not a
link, which OpenTelemetry keeps for a span with many causes, such as a batch). Error text on
a span is cut to ``ERROR_CHARS``.

``opentelemetry`` is imported when a ``TraceObserver`` is made, never by ``import nb_durable``.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Mapping
from typing import Any

from ...core.context import current_step
from ...core.log import idempotency_key
from ..money.cost import Price, Usage
from ..run.hooks import Observer
from ..run.stopping import StopSignal
from .views import RunView, StepId, StepView

__all__ = ["ERROR_CHARS", "SCOPE", "TraceObserver"]

SCOPE = "nb_durable"
"""The instrumentation scope of nb_durable's spans."""

ERROR_CHARS = 1000
"""The most characters of error text a span carries (a status, a retry's event): a model error
can run to thousands (an HTML error page), which backends cut or drop at limits of their own.
The whole text stays in the run's log."""

_OPEN = ("in_flight", "waiting", "retrying", "in_doubt")
"""States a step can leave again: its span stays open (an in-doubt step may still be settled)."""


class _Thread(threading.local):
    run: Any = None
    run_id: str = ""
    model: str = ""
    steps: dict[str, tuple[Any, Any]]
    ended: set[str]
    children: list[str]

    def __init__(self) -> None:
        self.steps = {}
        self.ended = set()
        self.children = []


class TraceObserver(Observer):
    """Draws each run as OpenTelemetry spans (display only: what is recorded never changes)."""

    def __init__(self, tracer_provider: Any = None, *, prices: Mapping[str, Price] | None = None) -> None:
        """Spans go to ``tracer_provider`` (default: the one registered with OpenTelemetry)."""
        try:
            from opentelemetry import context, trace
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError:
            raise ImportError(
                "traces need OpenTelemetry: pip install 'nb-durable[otel]' (opentelemetry-api, and "
                "opentelemetry-sdk with an exporter to send the spans somewhere)"
            ) from None
        self._trace = trace
        self._context = context
        self._w3c = TraceContextTextMapPropagator()
        self._tracer = trace.get_tracer(SCOPE, tracer_provider=tracer_provider)
        self._prices = prices
        self._fresh(None, {})

    def _fresh(self, parent: Any, said: dict[str, str]) -> None:
        """Start with no run: its span to start in context ``parent`` (None: the thread's
        current one), saying ``said`` (a child's parent run and step)."""
        self._here = _Thread()
        self._parent, self._said = parent, said
        self._lock = threading.Lock()
        self._started: dict[str, tuple[Any, str, str]] = {}
        """Child run id -> the span context of the step that started it, that step's run and id:
        written on the parent's thread, read on the child's."""

    def child(self, run_id: str, step_id: str, stop: StopSignal | None) -> Observer:
        with self._lock:
            started = self._started.get(run_id)
        below = copy.copy(self)  # the same tracer and prices; a run and threads of its own
        if started is None:  # its start was not drawn here: where its record says (``run_changed``)
            below._fresh(None, {"nb_durable.parent.step_id": step_id})
        else:
            span_context, parent, step = started
            context = self._trace.set_span_in_context(self._trace.NonRecordingSpan(span_context))
            below._fresh(context, {"nb_durable.parent.run_id": parent, "nb_durable.parent.step_id": step})
        return below

    # -- runs -------------------------------------------------------------------------------

    def child_trace(self, run_id: str, step_id: str) -> dict[str, str]:
        if self._here.run is None:
            return {}
        span = self._open(step_id, StepId.parse(step_id).kind, in_flight=False)[0]
        carrier: dict[str, str] = {}
        self._w3c.inject(carrier, context=self._trace.set_span_in_context(span))
        # The step's ids and sampling alone: a tracestate is any vendor's, so not the log's to keep.
        return {"traceparent": carrier["traceparent"]} if "traceparent" in carrier else {}

    def run_changed(self, run: RunView) -> None:
        here = self._here
        if here.run is None or here.run_id != run.run_id:
            self._end_run(None)
            parent, said = self._parent, self._said
            if parent is None and run.parent_run:  # a child not started here: where its start says
                parent = self._recorded(run.trace)
                said = {"nb_durable.parent.run_id": run.parent_run, "nb_durable.parent.step_id": run.parent_step}
            here.run = self._tracer.start_span(
                "nb_durable.run",
                context=parent,
                attributes={
                    "nb_durable.run_id": run.run_id, "gen_ai.request.model": run.model, "nb_durable.model_kind": run.model_kind,
                    **said,
                },
            )  # fmt: skip
            here.run_id, here.model = run.run_id, run.model
        if not run.status.going:
            self._end_run(run)

    def _recorded(self, trace: tuple[tuple[str, str], ...]) -> Any:
        """The context a child run's start recorded; None (the thread's current one) if it holds
        none that is valid (started untraced, or by a version that recorded none)."""
        context = self._w3c.extract(dict(trace))
        return context if self._trace.get_current_span(context).get_span_context().is_valid else None

    def _end_run(self, run: RunView | None) -> None:
        here = self._here
        if here.run is None:
            return
        for step_id in list(here.steps):
            self._end_step(step_id)
        if run is not None:
            cost = run.cost
            here.run.set_attributes(
                {
                    "nb_durable.run.status": run.status,
                    "nb_durable.run.steps": run.steps,
                    "nb_durable.run.replayed_steps": run.replayed,
                    "nb_durable.run.live_steps": run.live,
                    "nb_durable.run.turns": run.turns,
                    "gen_ai.usage.input_tokens": cost.paid.prompt_tokens,
                    "gen_ai.usage.output_tokens": cost.paid.output_tokens,
                    "nb_durable.cost.paid_usd": cost.paid_dollars,
                    "nb_durable.cost.replay_saved_usd": cost.saved_dollars,
                    "nb_durable.tokens.replay_saved": cost.saved.total,
                    "nb_durable.cost.simulated": cost.simulated,
                }
            )
            if run.status != "completed":
                here.run.set_status(self._trace.Status(self._trace.StatusCode.ERROR, _capped(run.error or run.status)))
        with self._lock:  # its children have ended with it: a child started after it has no parent
            for child in here.children:
                self._started.pop(child, None)
        span, here.run, here.run_id, here.ended, here.children = here.run, None, "", set(), []
        span.end()  # last: a processor that raises there must not leave the run open for the next

    # -- steps ------------------------------------------------------------------------------

    def step_changed(self, step: StepView) -> None:
        here = self._here
        if here.run is None:
            return
        opened = here.steps.get(step.step_id)
        if opened is None and step.step_id in here.ended:
            return  # its span has ended: views of one step replace each other, they are not new steps
        if opened is None:
            opened = self._open(step.step_id, step.kind, in_flight=step.state == "in_flight")
        span = opened[0]
        if step.child and step.child not in here.children:
            span.set_attribute("nb_durable.child_run_id", step.child)
            with self._lock:
                self._started[step.child] = (span.get_span_context(), here.run_id, step.step_id)
            here.children.append(step.child)
        if step.state == "retrying":
            span.add_event("retry", {"attempt": step.attempt, "error": _capped(step.error)})
        self._describe(span, step)
        if step.state not in _OPEN:
            self._end_step(step.step_id)

    def _open(self, step_id: str, kind: str, *, in_flight: bool) -> tuple[Any, Any]:
        """The span of step ``step_id`` of this thread's run, started now; an ``in_flight`` step
        running here is the current span while it runs."""
        here = self._here
        span = self._tracer.start_span(
            f"nb_durable.step {kind}",
            context=self._trace.set_span_in_context(here.run),
            attributes={"nb_durable.run_id": here.run_id, "nb_durable.step.id": step_id, "nb_durable.step.kind": kind},
        )
        running = current_step()
        key = running.key if running is not None else idempotency_key(here.run_id, step_id)
        span.set_attribute("nb_durable.idempotency_key", key)
        token = None
        if in_flight and running is not None:
            # The SDK's span of this very request becomes a child of the step's.
            token = self._context.attach(self._trace.set_span_in_context(span))
        opened = here.steps[step_id] = (span, token)
        return opened

    def _describe(self, span: Any, step: StepView) -> None:
        state = step.state
        span.set_attributes(
            {
                "nb_durable.step.state": state,
                "nb_durable.step.replayed": state == "replayed",
                "nb_durable.step.live": state in ("live", "in_flight", "retrying"),
                "nb_durable.step.in_doubt": state in ("in_doubt", "skipped"),
                "nb_durable.step.turn": step.turn,
            }
        )
        if step.attempt:
            span.set_attribute("nb_durable.step.attempts", step.attempt)
        if step.ms is not None:
            span.set_attribute("nb_durable.step.ms", step.ms)
        if step.usage is not None:
            self._priced(span, step.usage, step)
        if state == "failed" or step.is_error:
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, _capped(step.error or "the tool reported an error")))

    def _priced(self, span: Any, usage: Usage, step: StepView) -> None:
        # Priced as the run prices it (views.Tally): by the model that answered, if it can be.
        price = step.price(self._here.model, self._prices)
        said: dict[str, Any] = {
            "gen_ai.response.model": step.model or step.asked or self._here.model,
            "nb_durable.cost.simulated": price.simulated,
        }
        if step.state == "replayed":
            # Saved, as the run span counts it: gen_ai.usage.* says tokens spent, and backends add it up.
            said.update({"nb_durable.tokens.replay_saved": usage.total, "nb_durable.cost.replay_saved_usd": price.dollars(usage)})
        else:
            said.update(
                {
                    "gen_ai.usage.input_tokens": usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": usage.output_tokens,
                    "nb_durable.usage.cache_read_input_tokens": usage.cache_read_input_tokens,
                    "nb_durable.usage.cache_creation_input_tokens": usage.cache_creation_input_tokens,
                    "nb_durable.cost_usd": price.dollars(usage),
                }
            )
        span.set_attributes(said)

    def _end_step(self, step_id: str) -> None:
        span, token = self._here.steps.pop(step_id)
        self._here.ended.add(step_id)
        if token is not None:
            # Before the span ends: a processor that raises there must not leave it current for good.
            with contextlib.suppress(Exception):  # a step cut off elsewhere in the context stack
                self._context.detach(token)
        span.end()


def _capped(text: str) -> str:
    """``text`` in at most ``ERROR_CHARS`` characters, saying how much was cut."""
    if len(text) <= ERROR_CHARS:
        return text
    kept = ERROR_CHARS - 80  # room for the note, which says at most 9,999,999,999 characters
    return f"{text[:kept]}... [{len(text) - kept:,} more characters; the run's log has the whole error]"
