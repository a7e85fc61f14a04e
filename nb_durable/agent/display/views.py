"""What displays see of a run: ``RunView``, the header, built by ``run_view_of`` alone.

A live session (``run.session``) and a recorded run (``views_of``) build their header the
same way: a ``Tally`` of the run's ended steps (how many, how each was met, their cost) in a
scope (``this session``: paid now, saved by this replay; ``all sessions``: every step paid
once), with the run's status, task and model. A step's own view is ``step_views``' (its
names are importable from here too). Displays redraw from views; they never read the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...core.events import STEP_COMPLETED, Event, RunStarted
from ...core.runs import RunRecord
from ...core.status import Status
from ...core.steps import StepRecord
from ...errors import SimulatedCrash
from ..money.cost import Cost, broken_stream, dollars
from ..money.prices import Price, price_for
from .step_ids import StepId, StepKind
from .step_views import (
    IN_DOUBT,
    SKIPPED_OUTCOME,
    StepState,
    StepView,
    ToolCall,
    decided,
    message_text,
    pending_view,
    state_word,
    thinking_text,
    tool_calls_of,
    unfinished,
    view_of,
)

__all__ = [
    "SKIPPED_OUTCOME",
    "ALL_SESSIONS",
    "SESSION",
    "RunView",
    "StepId",
    "StepKind",
    "StepState",
    "StepView",
    "Tally",
    "ToolCall",
    "decided",
    "ended_by",
    "ended_status",
    "error_said",
    "many",
    "message_text",
    "pending_view",
    "run_view_of",
    "starting_view",
    "tree_words",
    "state_word",
    "thinking_text",
    "tool_calls_of",
    "unfinished",
    "view_of",
    "views_of",
]


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as a display's header shows it."""

    run_id: str
    status: Status
    task: str = ""
    model: str = ""
    model_kind: str = ""
    location: str = ""
    detail: str = ""
    """For a run that stopped short (truncated, refused, ...): what happened and what to do."""
    steps: int = 0
    replayed: int = 0
    live: int = 0
    turns: int = 0
    elapsed: float = 0.0
    cost: Cost = field(default_factory=Cost)
    text: str = ""
    stop_reason: str | None = None
    error: str = ""
    scope: str = ""
    """Whose steps and cost these are: ``this session`` (a live run: paid now, saved by this
    replay) or ``all sessions`` (a recorded run: every step paid once, every replay's savings)."""
    unfinished: str = ""
    """Once a session ended: its steps the log holds unfinished, in words (``1 cut off``)."""
    parent_run: str = ""
    """For a child run: the run whose step started it, and that step (its ``run_started``)."""
    parent_step: str = ""
    trace: tuple[tuple[str, str], ...] = ()
    """For a child run started in a traced session: the trace context its start recorded, as
    (name, value) pairs (a view stays a hashable value)."""
    children: int = 0
    """For a run that started child runs (``agent.delegation``): how many. Its ``cost`` is then
    its whole tree's (every run below it too), and ``own`` what its own log records."""
    own: Cost = field(default_factory=Cost)
    """What the run's own log records it cost, when ``children`` says ``cost`` is the tree's."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))  # a status given as its text

    def but(self, **changes: Any) -> RunView:
        """This view with some fields changed."""
        return replace(self, **changes)


def many(count: int, noun: str) -> str:
    """A count as a person reads it: ``1 step``, ``2 steps``, ``0 child runs``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def tree_words(run: RunView) -> str:
    """``$0.0120 own · $0.0400 with 2 child runs``: a parent's own paid dollars beside its tree's
    (its children's and every run below them), said so by every view of a parent ('' for a run
    with no children), so no figure of a tree is left to be taken for the other."""
    if not run.children:
        return ""
    simulated = run.cost.simulated
    runs = many(run.children, "child run")
    return f"{dollars(run.own.paid_dollars, simulated=simulated)} own · {dollars(run.cost.paid_dollars, simulated=simulated)} with {runs}"


SESSION, ALL_SESSIONS = "this session", "all sessions"
"""The two scopes of a run's view (``RunView.scope``)."""


@dataclass(frozen=True, slots=True)
class Tally:
    """What a run's ended steps add up to: how many, how each was met, its turns and its cost."""

    steps: int = 0
    replayed: int = 0
    live: int = 0
    turns: int = 0
    cost: Cost = field(default_factory=Cost)

    def counted(
        self, step: StepView, model: str, prices: Mapping[str, Price] | None = None, *, copied: bool = False
    ) -> Tally:
        """With one more ended step. A replayed step's usage is saved; any other's was paid
        (live now, or when it ran, for a step shown from the log), priced by the model that
        answered it, else the one it asked (``model``: the run's, when its result does not say:
        ``StepView.price``), unless a fork ``copied`` it (the run it came from paid). A step
        settled in doubt is counted, but neither replayed nor live. What its broken streams
        reported (``StepView.broken``) was paid, whenever they broke, unless a fork copied it:
        a replay never asks them again, so it saves nothing of them."""
        cost = self.cost
        if step.usage is not None and not (copied and step.state != "replayed"):
            cost = cost.add(step.usage, step.price(model, prices), replayed=step.state == "replayed")
        cost = cost if copied else _with_broken(cost, step, model, prices)
        return Tally(
            self.steps + 1,
            self.replayed + (step.state == "replayed"),
            self.live + (step.state == "live"),
            self.turns + (step.kind == "model" and not step.no_reply),
            cost,
        )


    def ended(self, records: Sequence[StepRecord], model: str, prices: Mapping[str, Price] | None = None) -> Tally:
        """With the steps of a session's log that never completed, which no step's end counted
        (``unfinished``): counted among its steps, with what their broken streams reported."""
        left = [r for r in records if r.state != "completed" and StepId.is_agent_step(r.step_id)]
        cost = self.cost
        for record in left:
            cost = _with_broken(cost, view_of(record), model, prices)
        return replace(self, steps=self.replayed + self.live + len(left), cost=cost)


def _with_broken(cost: Cost, step: StepView, model: str, prices: Mapping[str, Price] | None) -> Cost:
    """``cost`` and what the step's broken streams reported using (``StepView.broken``)."""
    for usage in step.broken:
        cost = cost.add_broken(*broken_stream(usage, model, prices))
    return cost


def run_view_of(
    run_id: str,
    settings: Mapping[str, Any],
    tally: Tally,
    *,
    status: Status,
    scope: str,
    location: str = "",
    elapsed: float = 0.0,
    output: Mapping[str, Any] | None = None,
    error: str = "",
    started: RunStarted | None = None,
) -> RunView:
    """How a run looks in a display's header: the one builder, for a recorded run and a live one.

    ``settings`` are the run's recorded settings (its task and model), ``tally`` what its
    steps add up to in ``scope``, ``output`` what its session ended with (its text and stop
    reason), ``started`` its start (a child's parent and trace context). A run that stopped
    short gives its error as the detail: what to do next.
    """
    output = output or {}
    parent = (started.parent if started is not None else None) or {}
    return RunView(
        run_id,
        status,
        task=str(settings.get("task", "")),
        model=str(settings.get("model", "")),
        model_kind=str(settings.get("model_kind", "")),
        location=location,
        detail=error if status.stopped_short else "",
        steps=tally.steps,
        replayed=tally.replayed,
        live=tally.live,
        turns=tally.turns,
        elapsed=elapsed,
        cost=tally.cost,
        text=str(output.get("text", "")),
        stop_reason=output.get("stop_reason"),
        error=error,
        scope=scope,
        parent_run=str(parent.get("run_id") or ""),
        parent_step=str(parent.get("step") or ""),
        trace=tuple((str(k), str(v)) for k, v in ((started.trace if started is not None else None) or {}).items()),
    )


def starting_view(run_id: str, settings: Mapping[str, Any]) -> RunView:
    """A run about to go on, before its session has shown anything: its id, task and model."""
    return run_view_of(run_id, settings, Tally(), status=Status.RUNNING, scope=SESSION)


def ended_status(error: BaseException, run: RunView) -> Status:
    """What a display shows of a session that raised ``error`` before it could show its end:
    ``crashed`` (a simulated crash), ``not run`` (it never got to a step: unknown, locked, a
    bad setting), else ``failed``. A status the session did show stays."""
    if run.status.ended:
        return run.status
    if isinstance(error, SimulatedCrash):
        return Status.CRASHED
    return Status.NOT_RUN if run.steps == 0 else Status.FAILED


def error_said(error: BaseException) -> str:
    """An error a session ended with, as every display says it: ``Type: message``."""
    return f"{type(error).__name__}: {error}"


def ended_by(error: BaseException, run: RunView) -> RunView:
    """``run`` as a display shows a session that raised ``error`` before it could show its end:
    ``ended_status``, and ``error_said``, in every front end alike."""
    return run.but(status=ended_status(error, run), error=error_said(error))


def failed_said(run_id: str, status: Status, error: str, parent: str = "") -> str:
    """A run's recorded error as a display of its log says it: a failed run's says what to do when
    it does not itself (the log keeps the cause, such as the API's answer; the session that failed
    said the rest, and a later reader of the log must not be left without it). A child run
    (``parent``) goes on with its tree, when its parent is resumed."""
    if status is not Status.FAILED or not error or "resume_agent(" in error:
        return error
    how = f"resume its parent with resume_agent({parent!r}), which resumes it" if parent else f"resume it with resume_agent({run_id!r})"
    return f"{error.rstrip('. ')}. Once the cause is fixed or has passed, {how}: its recorded steps do not repeat."


def _copied(events: Sequence[Event], started: RunStarted) -> Callable[[StepRecord], bool]:
    """Whether a step's result was copied by a fork, by ``RunStarted.copied_result``'s rule."""
    result_at = {getattr(e, "step", None): e.seq for e in events if e.kind == STEP_COMPLETED}
    return lambda step: step.step_id in result_at and started.copied_result(step.position, result_at[step.step_id])


def views_of(
    record: RunRecord, prices: Mapping[str, Price] | None = None, *, since: float | None = None
) -> tuple[RunView, list[StepView]]:
    """A recorded run as a display draws it, without running anything; ``since`` (epoch
    seconds): its cost counts only the steps and sessions that ended from then on."""
    settings = record.summary.settings
    replies = [
        s.result.get("message") or {}
        for s in record.steps
        if s.step_id.startswith("model:") and isinstance(s.result, dict)
    ]
    calls = tool_calls_of(replies, settings.get("sources"))
    max_attempts = int((settings.get("retry") or {}).get("max_attempts") or 0)
    records = [s for s in record.steps if StepId.is_agent_step(s.step_id)]
    steps = [view_of(s, call=calls.get(StepId.parse(s.step_id).tool_use_id), max_attempts=max_attempts) for s in records]
    status = Status(record.summary.status)
    if status.going:
        # Its writer lives: a step with no outcome yet is running, or asks a person, not cut off;
        # nor is it in doubt, which would say that a resume decides what it did.
        going: StepState = "waiting" if status is Status.WAITING else "in_flight"
        steps = [
            v.but(state=going, error="" if v.error == IN_DOUBT else v.error) if v.state in ("cut_off", "in_doubt") else v
            for v in steps
        ]
    model = str(settings.get("model", ""))
    tally = Tally()
    started = record.events[0] if record.events else None
    copied = _copied(record.events, started) if isinstance(started, RunStarted) else None
    for step, view in zip(records, steps, strict=True):
        if since is None or (step.completed_at or 0) >= since:
            tally = tally.counted(view, model, prices, copied=copied is not None and copied(step))
    for event in record.events:
        # Each session that ran live recorded what its replay saved when it finished.
        session = getattr(event, "output", None)
        if since is not None and event.ts < since:
            continue
        if event.kind == "run_finished" and isinstance(session, dict) and isinstance(session.get("cost"), dict):
            tally = replace(tally, cost=tally.cost.with_session_saving(session["cost"], price_for(model, prices)))
    summary = record.summary
    run = run_view_of(
        record.run_id,
        settings,
        tally,
        status=Status(summary.status),
        scope=ALL_SESSIONS,
        location=summary.location,
        elapsed=(summary.updated_at or 0) - (summary.started_at or 0),
        output=summary.output if isinstance(summary.output, dict) else None,
        error=failed_said(record.run_id, Status(summary.status), summary.error or "", summary.child_of or ""),
        started=started if isinstance(started, RunStarted) else None,
    )
    asking = summary.asking
    if asking is not None and StepId.is_agent_step(asking.step_id) and asking.step_id not in {v.step_id for v in steps}:
        # An approval is recorded once answered; until then the lease says what is asked: its
        # row waits here as it does on the asking run's own timeline.
        asked = StepId.parse(asking.step_id)
        steps.append(pending_view(asked, calls.get(asked.tool_use_id)).but(state="waiting"))
    return run, steps
