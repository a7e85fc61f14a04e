"""What displays see of a run: frozen views of its steps and of the run, and the observer.

The agent loop describes every step as a ``StepView`` each time its state changes (in
flight, streaming text, retrying 2/5, live, replayed, failed, in doubt) and the whole run
as a ``RunView``. A display (the notebook timeline, the CLI's progress lines) implements
``Observer`` and redraws from views; it never reads the log or the loop's state. The same
views are built from a recorded run by ``views_of``, so ``%agent_show`` draws exactly
what a live run drew.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..core.history import StepRecord
from ..core.runs import RunRecord
from .cost import Cost, Price, Usage, price_for

__all__ = [
    "Observer",
    "Observers",
    "RunView",
    "StepKind",
    "StepState",
    "StepView",
    "message_text",
    "parse_step_id",
    "views_of",
]

StepKind = Literal["model", "tool", "approval"]
StepState = Literal["replayed", "live", "in_flight", "retrying", "failed", "in_doubt", "skipped", "recorded"]
"""replayed: served from the log this session. live: ran and was recorded this session.
in_flight: running now. retrying: the last attempt failed and another is scheduled.
failed: the step raised. in_doubt: an external tool was cut off and its outcome is unknown.
skipped: in doubt, settled as outcome unknown. recorded: shown from the log, not run."""


@dataclass(frozen=True, slots=True)
class StepView:
    """One step as a display shows it."""

    step_id: str
    kind: StepKind
    turn: int
    state: StepState
    title: str
    input: Any = None
    output: str = ""
    is_error: bool = False
    usage: Usage | None = None
    ms: float | None = None
    attempt: int = 0
    max_attempts: int = 0
    error: str = ""
    decision: str = ""
    stop_reason: str | None = None

    def but(self, **changes: Any) -> StepView:
        """This view with some fields changed."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as a display's header shows it."""

    run_id: str
    status: str
    task: str = ""
    model: str = ""
    model_kind: str = ""
    location: str = ""
    steps: int = 0
    replayed: int = 0
    live: int = 0
    turns: int = 0
    elapsed: float = 0.0
    cost: Cost = field(default_factory=Cost)
    text: str = ""
    stop_reason: str | None = None
    error: str = ""

    def but(self, **changes: Any) -> RunView:
        """This view with some fields changed."""
        return replace(self, **changes)


class Observer:
    """Hears a run's progress; every method is a no-op here, override what you show."""

    def run_changed(self, run: RunView) -> None:
        """The run's header changed (status, counts, cost)."""

    def step_changed(self, step: StepView) -> None:
        """A step appeared or changed state; views with the same ``step_id`` replace each other."""


class Observers(Observer):
    """Several observers heard as one, in order."""

    def __init__(self, *observers: Observer) -> None:
        self.observers = observers

    def run_changed(self, run: RunView) -> None:
        for observer in self.observers:
            observer.run_changed(run)

    def step_changed(self, step: StepView) -> None:
        for observer in self.observers:
            observer.step_changed(step)


def parse_step_id(step_id: str) -> tuple[StepKind, int]:
    """The kind and turn of an agent step id: model:3, tool:3:0:toolu_x, approval:3:0:toolu_x."""
    kind, _, rest = step_id.partition(":")
    turn = rest.split(":", 1)[0]
    if kind not in ("model", "tool", "approval") or not turn.isdigit():
        raise ValueError(f"{step_id!r} is not an agent step id")
    return kind, int(turn)  # type: ignore[return-value]


def message_text(message: dict[str, Any]) -> str:
    """The text blocks of a Message (as JSON), joined."""
    return "".join(b.get("text", "") for b in message.get("content") or [] if b.get("type") == "text")


def view_of_record(record: StepRecord, state: StepState, tool_inputs: dict[str, Any]) -> StepView:
    """The view of a recorded agent step."""
    kind, turn = parse_step_id(record.step_id)
    decision = ", ".join(f"{d.decision} by {d.by}" for d in record.decisions)
    # The attempt a view shows: for a step that succeeded after retries, the one that worked.
    attempts = len(record.attempts) + (1 if record.attempts and record.state == "completed" else 0)
    error = record.attempts[-1].message if record.attempts else ""
    base = StepView(record.step_id, kind, turn, state, kind, ms=record.ms, attempt=attempts, error=error, decision=decision)
    if record.state == "in_doubt":
        base = base.but(state="in_doubt")
    elif record.state == "skipped":
        base = base.but(state="skipped")
    elif record.state != "completed":
        base = base.but(state="failed")
    result = record.result
    if kind == "model":
        message = (result or {}).get("message") or {}
        return base.but(
            title=f"model turn {turn}",
            output=message_text(message),
            usage=Usage.of(message) if message else None,
            stop_reason=message.get("stop_reason"),
        )
    tool_use_id = record.step_id.split(":", 3)[-1]
    name, tool_input = tool_inputs.get(tool_use_id, ("tool", None))
    if kind == "approval":
        approved = bool((result or {}).get("approved"))
        verdict = "approved" if approved else "denied"
        return base.but(
            title=f"approval for {name}",
            input=tool_input,
            output=f"{verdict} by {(result or {}).get('by', '?')}" if result else "",
            is_error=bool(result) and not approved,
        )
    return base.but(
        title=name,
        input=tool_input,
        output=str((result or {}).get("content", "")),
        is_error=bool((result or {}).get("is_error")),
    )


def tool_inputs_of(messages: Iterable[dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    """tool_use id -> (name, input), from recorded model replies."""
    out: dict[str, tuple[str, Any]] = {}
    for message in messages:
        for block in message.get("content") or []:
            if block.get("type") == "tool_use":
                out[block["id"]] = (block.get("name", "tool"), block.get("input"))
    return out


def views_of(record: RunRecord, prices: dict[str, Price] | None = None) -> tuple[RunView, list[StepView]]:
    """A recorded run as a display draws it, without running anything."""
    settings = record.summary.settings
    replies = [
        s.result.get("message") or {}
        for s in record.steps
        if s.step_id.startswith("model:") and isinstance(s.result, dict)
    ]
    inputs = tool_inputs_of(replies)
    steps = [view_of_record(s, "recorded", inputs) for s in record.steps if _is_agent_step(s.step_id)]
    price = price_for(str(settings.get("model", "")), prices)
    cost = Cost()
    for view in steps:
        if view.usage is not None:
            cost = cost.add(view.usage, price, replayed=False)
    for event in record.events:
        # Each session that ran live recorded what its replay saved when it finished.
        session = getattr(event, "output", None)
        if event.kind == "run_finished" and isinstance(session, dict) and isinstance(session.get("cost"), dict):
            saved = session["cost"].get("saved") or {}
            cost = cost.add(Usage(*(int(saved.get(n) or 0) for n in Usage.__slots__)), price, replayed=True)
    output = record.summary.output if isinstance(record.summary.output, dict) else {}
    run = RunView(
        run_id=record.run_id,
        status=record.summary.status,
        task=str(settings.get("task", "")),
        model=str(settings.get("model", "")),
        model_kind=str(settings.get("model_kind", "")),
        location=record.summary.location,
        steps=len(steps),
        turns=sum(1 for v in steps if v.kind == "model"),
        elapsed=(record.summary.updated_at or 0) - (record.summary.started_at or 0),
        cost=cost,
        text=str(output.get("text", "")),
        stop_reason=output.get("stop_reason"),
        error=record.summary.error or "",
    )
    return run, steps


def _is_agent_step(step_id: str) -> bool:
    try:
        parse_step_id(step_id)
    except ValueError:
        return False
    return True
