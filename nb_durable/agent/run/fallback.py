"""Fallback models on overload: a recorded, sticky switch to the next model of a chain.

A model step that fails overloaded (529, 503, a connection that fails or stalls) ``after``
times on one model, or so at its last attempt there (an ``after`` above the retry policy's
attempts), moves on to the next model of the run's ``fallback_models``, inside the same step: its id and request hash stay those of the turn, as any retried attempt's do.
The switch is a decision on that step (``model -> M because overloaded: 3 x 529``, by
``fallback``), written before the fallback is asked, so

* a process killed after the switch resumes the step on the fallback (the step's decisions
  say so) without asking the overloaded model again; one killed before it counts the failures
  its step recorded as it counted them live (each attempt records its error's type, a 529 sent
  mid-stream as much as one sent as a status): both count by one function, ``counted``, on the
  step's record (live, with the failure in hand). In batch mode the failures on the way into
  the Message Batch count for neither: they are the Batches endpoint's, met on behalf of every
  run gathered whatever its model, and a switch would send the request to it again;
* every later turn is asked of the fallback (sticky): the session reads the switch from the
  step's record, live and on replay alike, and records nothing more;
* thinking blocks are model-bound (another model cannot verify their signatures), so the
  messages before the switch go out without them, exactly as after ``resume --model``
  (``request.cut_thinking``).

A refused turn (``stop_reason: "refusal"``) is asked again of the next model of the chain, on
the client's side: a ``settings:N`` decision at the point after it (``refusal_switch``:
``model -> M because refused: category cyber``, by ``fallback``), which changes the model
from there on (sticky) and asks the turn again, replayed in place as any settings step is.
Without a fallback left, ``refused`` stays the run's honest outcome, for a person.

A switch's wording is ``display.switches``': the one place that writes it and reads it back,
for the session as for every display.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...core.context import StepContext
from ...core.events import AttemptFailed, Decision
from ...core.log import EventLog
from ...core.steps import StepRecord
from ...errors import ModelError, TransientModelError
from ..display.switches import ASKED_ON_RESUME, RESUMED_BY, SWITCHED_BY, switch_decision, switch_of
from ..models.failures import OVERLOAD_STATUSES, overload_kind
from .batch_step import BATCH_BY, into_batch
from .request import cut_thinking

if TYPE_CHECKING:
    from .model_call import ModelCall
    from .points import Stopped

__all__ = [
    "SWITCHED_BY", "Fallback", "counted", "models_asked", "next_model", "record_failure", "refusal_switch",
    "refusal_switch_recorded", "resumed_live", "road", "switched_request",
    "switched_to",
]  # fmt: skip

def _said(failures: Iterable[str]) -> str:
    counted = Counter(failures)
    return ", ".join(f"{n} x {what}" for what, n in counted.most_common())


def record_failure(context: StepContext, attempt: int, error: ModelError, delay: float | None) -> None:
    """Record a failed attempt of a model step with its status and type ("" for none): with
    them a resume counts it toward a switch as the step counted it live (``_counted``); and with
    the usage a stream reported before it broke, which the run's figures and budget count."""
    context.record_attempt_failed(
        attempt, type(error).__name__, message=str(error), status=error.status, delay=delay, error_type=error.error_type or "",
        usage=error.usage,
    )  # fmt: skip


def _counted(attempt: AttemptFailed) -> str | None:
    """What a recorded failure counts as toward a switch (``overload_kind``), or None."""
    if attempt.error_type is not None:
        return overload_kind(attempt.status, attempt.error_type or None)
    # Recorded before attempts kept their type: the rule such a log has always resumed by.
    if attempt.status in OVERLOAD_STATUSES:
        return str(attempt.status)
    return "connection" if attempt.status is None and attempt.error == "TransientModelError" else None


def counted(record: StepRecord) -> list[str]:
    """What a step's recorded failures count toward its next switch, in order: those of the
    model it asks now (after its last switch), and of that model's calls only, not of its
    request's way into a Message Batch (``batch_step.into_batch``). The one rule: a resume
    starts from it, and a live step decides each switch by it and the failure in hand."""
    since = max((d.seq for d in record.decisions if switch_of(d) is not None), default=-1)
    batch = into_batch(record)
    return [kind for a in record.attempts if a.seq > since and a.seq not in batch and (kind := _counted(a)) is not None]


def switched_to(decisions: Iterable[Decision]) -> str | None:
    """The model the last fallback switch among ``decisions`` moved to, if any."""
    model = None
    for decision in decisions:
        found = switch_of(decision)
        if found:
            model = found[0]
    return model


def models_asked(model: str, log: EventLog) -> list[str]:
    """The models the step at the log's cursor asked in turn, ``model`` first, when it moved
    on (to a fallback, to the model a resume named); [] when no step is there."""
    if not log.replaying:
        return []
    return [model, *(m for m, _ in filter(None, map(switch_of, log.record_at(log.cursor, result=False).decisions)))]


def next_model(model: str, fallbacks: Sequence[str]) -> str | None:
    """The model the chain goes on to after ``model``, if any."""
    rest = tuple(fallbacks)
    if model in rest:
        rest = rest[rest.index(model) + 1 :]
    return next((m for m in rest if m != model), None)


def refusal_switch(model: str, fallbacks: Sequence[str], stopped: Stopped | None) -> dict[str, Any] | None:
    """The settings decision that asks a refused turn again of the next model, if there is one."""
    if stopped is None or stopped.outcome != "refused" or not stopped.live:
        return None
    moved = next_model(model, fallbacks)
    if moved is None:
        return None
    details = stopped.message.get("stop_details") or {}
    category = details.get("category") if isinstance(details, Mapping) else None
    return _reasked_of(moved, f"refused: category {category}" if category else "refused")


def _reasked_of(model: str, why: str) -> dict[str, Any]:
    return {"changes": {"model": model}, "action": "reask", "by": SWITCHED_BY, "after": "refused", "decision": switch_decision(model, why)}


def refusal_switch_recorded(decisions: Iterable[Decision]) -> dict[str, Any] | None:
    """The settings decision a refusal switch recorded, read back from its decision: what a
    point completes with when its process died between the decision and the step carrying
    it, as the session would have (not empty, so the refusing model is not asked again)."""
    found = next(filter(None, (switch_of(d) for d in decisions if d.by == SWITCHED_BY)), None)
    return None if found is None else _reasked_of(*found)


def switched_request(request: Mapping[str, Any], model: str) -> dict[str, Any]:
    """``request`` asked of ``model``: the thinking blocks of the conversation so far cut."""
    return cut_thinking({**request, "model": model}, len(request.get("messages") or []))


@dataclass(slots=True)
class Fallback:
    """One model step's road through the chain: which model it asks, and when it moves on."""

    model: str
    """The model the step asks now."""
    chain: tuple[str, ...]
    """The models still to fall back to, in order."""
    after: int
    failures: list[str] = field(default_factory=list)
    """The overload-like failures of ``model`` in this step so far."""

    @classmethod
    def of(cls, model: str, fallbacks: Sequence[str], after: int, record: StepRecord | None = None) -> Fallback:
        """The road of a step asking ``model`` first; ``record``: the step as recorded before a crash."""
        if record is not None:
            moved = switched_to(record.decisions)
            if moved is not None:
                model = moved
        rest = tuple(fallbacks)
        if model in rest:
            rest = rest[rest.index(model) + 1 :]
        fallback = cls(model, tuple(m for m in rest if m != model), after)  # in order, as next_model goes
        if record is not None:
            fallback.failures = counted(record)
        return fallback

    def due(self, error: TransientModelError, record: StepRecord, exhausted: bool = False) -> bool:
        """Whether this failure makes the step move on to the next model: counted with those
        its ``record`` holds so far, as a resume would count them; ``exhausted``: it was the
        model's last attempt, so the step moves on before ``after`` failures rather than fail
        with a fallback never asked."""
        what = overload_kind(error.status, error.error_type)
        if what is None or not self.chain:
            return False
        self.failures = [*counted(record), what]
        return len(self.failures) >= self.after or exhausted

    def switch(self, context: StepContext) -> str:
        """Record the move to the next model on the running step; return what the row says of it."""
        left, said = self.model, _said(self.failures)
        model, self.chain = self.chain[0], self.chain[1:]
        context.log.record_decision(context.step_id, switch_decision(model, f"overloaded: {said}"), by=SWITCHED_BY)
        self.model, self.failures = model, []
        return f"switched to {model}: {left} was overloaded ({said})"


class _Moving:
    """A model call's move to the next fallback model (``retry.Moving``)."""

    def __init__(self, call: ModelCall, fallback: Fallback, context: StepContext) -> None:
        self.call = call
        self.fallback = fallback
        self.context = context

    def due(self, error: TransientModelError, exhausted: bool) -> bool:
        # Counted from the log, not kept here: live, the step counts exactly what a resume would.
        return self.fallback.due(error, self.context.log.record_at(self.context.position), exhausted)

    def move(self) -> None:
        said = self.fallback.switch(self.context)
        self.call.request = switched_request(self.call.request, self.fallback.model)
        self.call.moved(said)


def _batched(record: StepRecord) -> bool:
    """Whether a step went into a Message Batch: its answer comes from there, asked as recorded."""
    return any(d.by == BATCH_BY for d in record.decisions)


def resumed_live(log: EventLog) -> bool:
    """Whether the step at the log's cursor is one it holds unfinished, so asked live again now
    (perhaps of the model a resume names: ``road``), not answered by a Message Batch."""
    if not log.replaying:
        return False
    record = log.record_at(log.cursor, result=False)
    return record.state != "completed" and not _batched(record)


def road(call: ModelCall, context: StepContext) -> _Moving | None:
    """A live model call's road through the chain. A step resumed after a switch starts on the
    model it moved to; one a resume finds unfinished, when that resume names another model,
    moves to it first (recorded as a switch by the resume, so a crash after it resumes there):
    a failure the person fixed by naming a model (a wrong name, a storm past the chain) is
    not asked of the old model again."""
    seam = call.seam
    log = context.log
    record = log.record_at(context.position) if log.replaying else None
    named, seam.resumed_model = seam.resumed_model, None  # the first model call of the session only
    if (
        record is not None
        and named not in (None, switched_to(record.decisions) or call.request.get("model"))
        and not _batched(record)
    ):
        log.record_decision(context.step_id, switch_decision(str(named), ASKED_ON_RESUME), by=RESUMED_BY)
        record = log.record_at(context.position)
    moved = switched_to(record.decisions) if record is not None else None
    if moved is not None and moved != call.request.get("model"):
        call.request = switched_request(call.request, moved)
    if not seam.fallbacks:
        return None
    fallback = Fallback.of(str(call.request.get("model")), seam.fallbacks, seam.fallback_after, record)
    return _Moving(call, fallback, context)
