"""How a turn's stop reason ends a run, and what each outcome tells the person to do.

Only ``end_turn`` (and ``stop_sequence``) mean the model finished its work: the run is
*completed*. A reply cut off by ``max_tokens`` (thinking counts against it) is *truncated*,
a ``refusal`` is *refused* (with the API's ``stop_details``), and
``model_context_window_exceeded`` is *context_full*. A model call the budget cannot cover is
*budget_exhausted* before it is made; a tool called with input its schema refuses
``max_invalid_tool_calls`` times is *bad_tool_input*, before the next model call. A reply that
stopped for a reason its recorder did not know (one the API added later: ``models.stops`` marks
it) is *unknown_stop*; a reply an earlier version recorded unmarked, for a reason this version
does not know, ended its run *completed* and replays so. Each of these is resumable, and each has its own exit
code (``errors.EXIT_CODES``); none of them is ever reported as completed.

A reply stopped short never runs its tool calls, unless the log records that they ran
(``tools_recorded``: an earlier version ran them, and replay must). A run whose model call
failed is recorded *failed*; ``failed_error`` is what it raises, saying what to fix first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.events import RunOutcome
from ...core.log import EventLog
from ...errors import (
    ModelCallError,
    ModelError,
    RetriesExhaustedError,
    RunFailedError,
    TransientModelError,
)
from ..display.step_ids import StepId
from ..models.stops import KNOWN_STOPS
from ..money.cost import Cost

__all__ = ["ENDING_STOPS", "AgentResult", "ending_outcome", "explain", "failed_error", "tools_recorded"]

ENDING_STOPS: dict[str, RunOutcome] = {
    "end_turn": "completed",
    "stop_sequence": "completed",
    "max_tokens": "truncated",
    "refusal": "refused",
    "model_context_window_exceeded": "context_full",
}
"""Stop reasons that end the model's turn without a tool call, and the outcome each gives."""



@dataclass(frozen=True, slots=True)
class AgentResult:
    """How a run ended, and what this session paid and replay saved."""

    run_id: str
    status: RunOutcome
    text: str
    stop_reason: str | None
    turns: int
    replayed_steps: int
    live_steps: int
    cost: Cost
    location: str
    elapsed: float
    """Seconds this session took."""
    detail: str = ""
    """For any status but completed: what happened and what to do next."""


def ending_outcome(stop_reason: str | None, *, unknown: bool = False) -> RunOutcome:
    """The outcome of a final turn that stopped for ``stop_reason``; ``unknown``: its recorder
    did not know that reason (its result is marked ``UNKNOWN_STOP``). An unknown reason recorded
    unmarked, by a version before the mark, ended its run completed, and replays so."""
    known = ENDING_STOPS.get(stop_reason or "end_turn")
    if known is not None:
        return known
    return "unknown_stop" if unknown and stop_reason not in KNOWN_STOPS else "completed"


def explain(outcome: RunOutcome, message: Mapping[str, Any], *, max_tokens: int) -> str:
    """What happened, and what to do, for a run that stopped short (empty for completed)."""
    if outcome == "truncated":
        return (
            f"the model's answer was cut off at max_tokens={max_tokens} (its thinking counts against "
            "that limit). Resume to let it continue, or resume with a higher max_tokens to ask the "
            "turn again with more room."
        )
    if outcome == "refused":
        details = message.get("stop_details") or {}
        category = details.get("category") if isinstance(details, Mapping) else None
        explanation = details.get("explanation") if isinstance(details, Mapping) else None
        why = "; ".join(str(x) for x in (f"category {category}" if category else "", explanation) if x)
        return (
            f"the model declined to continue{f' ({why})' if why else ''}. Resume with another model "
            "(model=M) to ask the turn again, or start a new run with a narrower task."
        )
    if outcome == "bad_tool_input":
        tool, count = message.get("tool", "a tool"), message.get("invalid", "too many")
        return (
            f"the model called {tool} {count} times with input its schema refuses (each time it was told "
            "why). Resume to let it try again (the count starts over), resume with another model "
            "(model=M), or raise max_invalid_tool_calls."
        )
    if outcome == "unknown_stop":
        return (
            f"the model stopped for a reason this version of nb_durable does not know (stop_reason "
            f"{message.get('stop_reason')!r}), so it cannot tell whether the run's work is done; the reply is "
            "recorded. Resume to ask the turn again, or upgrade nb_durable (pip install -U nb-durable) and "
            "resume, if a newer version knows the reason."
        )
    if outcome == "context_full":
        return (
            "the conversation filled the model's context window. Fork the run at an earlier step and "
            "give it a narrower task, or resume with a model that has a larger context window (model=M)."
        )
    return ""


def tools_recorded(log: EventLog, turn: int) -> bool:
    """Whether the log's next step is one of the tool calls of ``turn`` (replayed, they ran):
    a reply that stopped short runs its tool calls only where an earlier version recorded them."""
    if not log.replaying:
        return False
    try:
        step = StepId.parse(log.record_at(log.cursor, result=False).step_id)
    except ValueError:
        return False
    return step.turn == turn and step.kind in ("tool", "approval", "delegate")


def failed_error(
    run_id: str, error: ModelError | RunFailedError, *, max_attempts: int, models: Sequence[str] = ()
) -> RunFailedError:
    """The error a run recorded failed raises for ``error``: what happened, and what to fix
    before resuming (``max_attempts``: the retry policy's, which a transient error exhausted;
    ``models``: those the failed step asked in turn, when it moved through its fallbacks)."""
    if isinstance(error, RunFailedError):
        return error  # it says what happened to this run (a decision needed, a child's outage)
    if isinstance(error, TransientModelError):
        if len(models) < 2:
            return RetriesExhaustedError(
                f"run {run_id!r} stopped: the model kept failing after "
                f"{max_attempts} attempts ({error}). Nothing recorded is "
                f"lost: resume it with resume_agent({run_id!r}) when the service recovers.",
                run_id=run_id,
            )
        # A storm past the whole chain: the switches stick, so a plain resume stays on the last model.
        last, before = models[-1], " and ".join(dict.fromkeys(m for m in models[:-1] if m != models[-1]))
        return RetriesExhaustedError(
            f"run {run_id!r} stopped: {last}, the last of its fallback models, kept failing after "
            f"{max_attempts} attempts, as {before} did before it ({error}). Nothing recorded is lost: "
            f"resume it with resume_agent({run_id!r}) when the service recovers (it goes on with {last}, "
            f"where the fallback left it), or resume it with another model: resume_agent({run_id!r}, model=M).",
            run_id=run_id,
        )
    return ModelCallError(
        f"run {run_id!r} failed: {str(error).rstrip('. ')}. Then resume it with resume_agent({run_id!r}); "
        "completed steps will not repeat.",
        run_id=run_id,
        status=error.status,
    )
