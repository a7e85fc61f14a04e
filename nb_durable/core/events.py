"""The events of a run's log, as values: six kinds, each a frozen dataclass.

A run is one ordered stream of events: ``run_started`` (the settings a resume needs),
``step_started`` (the intent of a step with effects, written before the effect),
``step_completed`` (a step's result), ``attempt_failed`` (an attempt that raised, and the wait
before the next), ``decision`` (how an in-doubt step or an approval was settled, and by whom)
and ``run_finished``. Each kind's ``fields()`` gives its own fields in log order; how those
become a line's bytes is ``codec``'s business alone (see docs/design.md, "The log format").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import UnionType
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

__all__ = [
    "ATTEMPT_FAILED",
    "DECISION",
    "EFFECTS",
    "EVENT_CLASSES",
    "EVENT_KINDS",
    "RUN_FINISHED",
    "RUN_OUTCOMES",
    "RUN_STARTED",
    "STEP_COMPLETED",
    "STEP_STARTED",
    "AttemptFailed",
    "Decision",
    "Effect",
    "Event",
    "RunFinished",
    "RunOutcome",
    "RunStarted",
    "StepCompleted",
    "StepStarted",
    "shape_error",
    "wrong_field",
]

RUN_STARTED = "run_started"
STEP_STARTED = "step_started"
STEP_COMPLETED = "step_completed"
ATTEMPT_FAILED = "attempt_failed"
DECISION = "decision"
RUN_FINISHED = "run_finished"
EVENT_KINDS = frozenset(
    {RUN_STARTED, STEP_STARTED, STEP_COMPLETED, ATTEMPT_FAILED, DECISION, RUN_FINISHED}
)

Effect = Literal["pure", "idempotent", "external"]
"""What running a step does to the world: nothing, the same thing twice, or something new."""
EFFECTS: tuple[Effect, ...] = ("pure", "idempotent", "external")

RunOutcome = Literal[
    "completed", "failed", "interrupted", "truncated", "refused", "context_full", "budget_exhausted",
    "bad_tool_input", "unknown_stop",
]
"""How a run ended. Only "completed" means the work ended as intended; every other outcome is
resumable once its cause is fixed (a higher limit, another model, a larger budget)."""
RUN_OUTCOMES: tuple[RunOutcome, ...] = get_args(RunOutcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One recorded event of a run; ``seq`` is its position in the run's log."""

    kind: ClassVar[str] = ""
    seq: int
    ts: float

    def fields(self) -> dict[str, Any]:
        """The kind's own fields in log order (``step`` first), None values left out."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(Event):
    """The run began; ``settings`` hold all a resume needs to rebuild it."""

    kind: ClassVar[str] = RUN_STARTED
    run_id: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    forked_from: Mapping[str, Any] | None = None
    parent: Mapping[str, Any] | None = None
    """For a child run: the run and step that started it (``{"run_id", "step"}``)."""
    trace: Mapping[str, Any] | None = None
    """For a child run started in a traced session: the W3C trace context of the step that
    started it (``{"traceparent"}``), so a session in any process can trace the child in that
    step's trace. For display alone: no replay, hash or fork reads it."""

    @property
    def copied(self) -> int:
        """How many of the run's first steps a fork copied from another run (0 if not a fork):
        that run paid for them, so they are not this one's to count as paid."""
        at = (self.forked_from or {}).get("at")
        return at if isinstance(at, int) and not isinstance(at, bool) and at > 0 else 0

    @property
    def copied_lines(self) -> int | None:
        """How many of a fork's first lines were copied (its start counted), so a result line past
        them is the fork's own, though its step was copied in flight; None for a fork made before
        forks said it (its first ``copied`` steps' results count as copied) and for any other run."""
        lines = (self.forked_from or {}).get("lines")
        return lines if isinstance(lines, int) and not isinstance(lines, bool) and lines > 0 else None

    def copied_result(self, position: int, seq: int) -> bool:
        """Whether the result line ``seq`` of step ``position`` is one a fork copied (its source
        paid for it), not the run's own: the one rule of the run index and of every display."""
        lines = self.copied_lines
        return position < self.copied if lines is None else seq < lines

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "settings": self.settings}
        if self.forked_from is not None:
            out["forked_from"] = self.forked_from
        if self.parent is not None:
            out["parent"] = self.parent
        if self.trace is not None:
            out["trace"] = self.trace
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(Event):
    """The intent: a step with effects is about to run (written before the effect)."""

    kind: ClassVar[str] = STEP_STARTED
    step: str
    key: str
    effect: Effect
    hash: str | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none(
            {"step": self.step, "hash": self.hash, "key": self.key, "effect": self.effect}
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted(Event):
    """A step's result, recorded before the run moves on."""

    kind: ClassVar[str] = STEP_COMPLETED
    step: str
    result: Any
    ms: float
    hash: str | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none({"step": self.step, "hash": self.hash, "result": self.result, "ms": self.ms})


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptFailed(Event):
    """An attempt at a step raised; ``delay`` is the wait before the next one, None if none.

    ``error_type`` is the failure's own type as the failing service named it (``""``: it named
    none), for a caller whose rules read it again on resume; None where it was not recorded (the
    caller keeps no type, or the line is older than the field).

    ``usage`` is what a streamed model reply reported it had used before it broke (its
    ``message_start`` and any ``message_delta``: the API's usage counts, with ``model``, the model
    that answered, and ``asked_model``): paid for, so a run's figures and budget count it. None
    (left out of the line) when nothing was reported, and in lines older than the field."""

    kind: ClassVar[str] = ATTEMPT_FAILED
    step: str
    attempt: int
    error: str
    message: str = ""
    status: int | None = None
    delay: float | None = None
    error_type: str | None = None
    usage: Mapping[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none(
            {
                "step": self.step,
                "attempt": self.attempt,
                "error": self.error,
                "message": self.message,
                "status": self.status,
                "delay": self.delay,
                "error_type": self.error_type,
                "usage": self.usage,
            }
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision(Event):
    """How an in-doubt step or an approval was settled (``decision``) and by whom (``by``).

    ``carries`` is the result of the step the decision is written for, where that step is
    recorded after it (a resume's settings change): a process killed between the two lines
    leaves the step to be completed with it, as it was meant. None where there is no such
    result, and in lines older than the field."""

    kind: ClassVar[str] = DECISION
    step: str
    decision: str
    by: str
    note: str = ""
    carries: Mapping[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        out = {"step": self.step, "decision": self.decision, "by": self.by, "note": self.note}
        return out if self.carries is None else {**out, "carries": self.carries}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(Event):
    """The run ended: completed, failed or interrupted; ``output`` is its final answer."""

    kind: ClassVar[str] = RUN_FINISHED
    status: RunOutcome
    output: Any = None
    error: str | None = None

    def fields(self) -> dict[str, Any]:
        return _drop_none({"status": self.status, "output": self.output, "error": self.error})


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


EVENT_CLASSES: dict[str, type[Event]] = {
    cls.kind: cls for cls in (RunStarted, StepStarted, StepCompleted, AttemptFailed, Decision, RunFinished)
}
"""Each kind's class, by the name the log writes."""


def shape_error(cls: type[Event], values: Mapping[str, Any]) -> str | None:
    """What is wrong with ``values`` (a line's JSON) as the fields of a ``cls`` event: a
    required field missing, or one of another type than the class declares; None if nothing."""
    for name, required, _, _ in _SHAPES[cls]:
        if required and name not in values:
            return f"its {cls.kind} event has no {name}"
    wrong = wrong_field(cls, values)
    if wrong is None:
        return None
    name, value, expected = wrong
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:56] + " ..."
    return f"its {cls.kind} event's {name} is {shown}, not {expected}"


def wrong_field(cls: type[Event], values: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """The first of ``values`` of another type than ``cls`` declares for it: its name, its
    value and the words for what it must be; None if none."""
    for name, _, accepts, expected in _SHAPES[cls]:
        if name in values and not accepts(values[name]):
            return name, values[name], expected
    return None


def _accepts(hint: Any) -> tuple[Callable[[Any], bool], str]:
    """A test of a JSON value against a field's type hint, and the words for what it wants."""
    args = get_args(hint)
    if get_origin(hint) in (Union, UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        test, words = _accepts(inner)
        return (lambda v: v is None or test(v)), f"{words} or null"
    if get_origin(hint) is Literal:
        return (lambda v: v in args), "one of " + ", ".join(map(repr, args))
    if hint is Any:
        return (lambda v: True), "anything"
    if hint is str:
        return (lambda v: type(v) is str), "a string"
    if hint is int:
        return (lambda v: type(v) is int), "an integer"
    if hint is float:
        return (lambda v: type(v) is float or type(v) is int), "a number"
    if get_origin(hint) is Mapping:
        return (lambda v: type(v) is dict), "an object"
    raise TypeError(f"no JSON test for a field of type {hint!r}")  # a new field's type: add its test here


def _shape(cls: type[Event]) -> tuple[tuple[str, bool, Callable[[Any], bool], str], ...]:
    hints = get_type_hints(cls)
    return tuple(
        (f.name, f.default is MISSING and f.default_factory is MISSING, *_accepts(hints[f.name]))
        for f in fields(cls)
    )


_SHAPES = {cls: _shape(cls) for cls in EVENT_CLASSES.values()}
"""Each kind's fields as its class declares them (the one owner of what a line must hold)."""
