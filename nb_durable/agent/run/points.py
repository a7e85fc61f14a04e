"""The points of a run: before each model call, where the run may change course.

A point holds recorded steps of two kinds, replayed in place and in order: ``settings:N``
(a resume's new model, max_tokens, thinking or budget, what becomes of a turn that stopped
the run short, or a refused turn moved to a fallback model, recorded as a decision) and
``user:N`` (a follow-up message). A session records what it was asked for (its ``Changes``)
at the first point where the log has nothing more to replay, then forgets it, so every later
replay meets the same steps in the same places and sends the same requests. A point can be
the first with nothing more to replay for more than one session (a resume that raised the
budget too little stops there again), so each kind is numbered within its point
(``settings:N``, ``settings:N:1``, ...): the next session's change is recorded after the
last one, never dropped.

What a session asks of a run (``SessionAsks``) is a ``Change`` of settings a resume brings
(the model, ``max_tokens``, thinking, the budgets: the table's rows a resume may change), a
follow-up message a continue brings, and the worker that took it. After a turn that stopped
the run short, a resume also records what becomes of that turn: ``continue`` (a truncated
reply kept, the model asked to go on) when nothing was changed, else ``reask`` (the reply
dropped, the turn asked again with the new settings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ...core.events import RunOutcome
from ...core.log import EventLog, run_step
from ...core.runs import BY_WORKER
from ...core.status import Status
from ..display.switches import RESUMED_BY
from ..display.views import StepId, view_of
from ..settings import AgentSettings, Change
from .fallback import refusal_switch, refusal_switch_recorded
from .hooks import who

if TYPE_CHECKING:
    from .session import RunSession

__all__ = ["CONTINUE_TEXT", "Points", "SessionAsks", "Stopped", "said_of"]

CONTINUE_TEXT = (
    "Your previous answer was cut off by the output limit before you finished. Continue from "
    "where you stopped; do not repeat what you already wrote."
)
"""What the model is told when a truncated turn is continued (recorded with the decision)."""


@dataclass(frozen=True, slots=True)
class Stopped:
    """A turn that ended the run's work for now: its reply, held until a point decides."""

    outcome: RunOutcome
    message: dict[str, Any]
    live: bool


@dataclass(frozen=True, slots=True)
class SessionAsks:
    """What a session brings to a run: a change of settings, a follow-up message, who resumed it."""

    change: Change = field(default_factory=Change)
    follow_up: str | None = None
    resuming: bool = False
    """A resume goes on past a stopped turn (truncated, refused, ...); a rerun of a cell does not."""
    resumed_by: str | None = None
    """The worker (``host:pid``) resuming the run: recorded at the next point with nothing to replay."""

    def but(self, **changes: Any) -> SessionAsks:
        """These changes with some fields replaced (what is left once some were recorded)."""
        return replace(self, **changes)

    def decision(self, current: AgentSettings, stopped: Stopped | None) -> dict[str, Any] | None:
        """The settings step to record at this point (None: nothing to record)."""
        changed = {k: v for k, v in self.change.recorded().items() if getattr(current, k) != v}
        action = None
        if stopped is not None and not stopped.live and self.resuming:
            if stopped.outcome == "truncated" and not changed:
                action = "continue"
            elif Status(stopped.outcome).stopped_short:
                action = "reask"
        if stopped is not None and action is None and not stopped.live and self.follow_up is None:
            # A run that had ended before this session stays ended (completed, or a rerun of
            # a cell): a change of settings or a worker's mark would only write to it. A
            # follow-up's change is recorded here, before it, so the follow-up's turn has it.
            return None
        marked = self.resumed_by is not None
        if not changed and action is None and not marked:
            return None
        by = f"{BY_WORKER}{self.resumed_by}" if marked else RESUMED_BY
        decision: dict[str, Any] = {"changes": changed, "action": action, "by": by}
        if stopped is not None and action is not None:
            decision["after"] = stopped.outcome
        if action == "continue":
            decision["message"] = CONTINUE_TEXT
        return decision


def said_of(decision: Mapping[str, Any]) -> str:
    """A recorded settings decision in a few words ('model=claude-x', 'continue')."""
    changes = decision.get("changes") or {}
    said = ", ".join(f"{k}={v}" for k, v in sorted(changes.items())) or decision.get("action")
    return str(said or "resumed")


class Points:
    """The points of one session's run (see the module docstring)."""

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self._live: set[tuple[str, int]] = set()
        """(kind, turn): the points where this session recorded a step of that kind (once at most)."""

    def _recorded(self, log: EventLog, step: StepId) -> dict[str, Any] | None:
        """Replay the step recorded at the cursor if it is ``step``; None if another step is.
        One its session died in (its decision written, not the step) completes with what that
        decision carries; a decision older than that field, with what a refusal switch's says,
        or with nothing, as it always has."""
        record = log.record_at(log.cursor, result=False)
        if record.step_id != str(step):
            return None

        def meant() -> dict[str, Any]:
            carried = next((dict(d.carries) for d in reversed(record.decisions) if d.carries is not None), None)
            return carried or refusal_switch_recorded(record.decisions) or {}

        result: dict[str, Any] = run_step(log, str(step), meant, effect="pure")
        self.session.step_done(view_of(log.record_at(log.cursor - 1), state="replayed"), False)
        return result

    def _record(self, log: EventLog, step: StepId, decide: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Record what this session brings to the point ``step`` (a change, a follow-up)."""
        recorded: dict[str, Any] = run_step(log, str(step), decide, effect="pure")
        self.session.step_done(view_of(log.record_at(log.cursor - 1), state="live"), True)
        return recorded

    def settings(self, log: EventLog, turn: int, index: int, stopped: Stopped | None) -> dict[str, Any] | None:
        """The ``index``-th settings change recorded before model call ``turn``, or (past the
        recorded ones) the one this session records; None when there is no more."""
        step = StepId.settings(turn, index)
        if log.replaying:
            return self._recorded(log, step)
        if ("settings", turn) in self._live:
            return None
        current = self.session.current
        decision = self.session.asks.decision(current, stopped) or refusal_switch(
            current.model, current.fallback_models, stopped
        )
        if decision is None:
            return None

        def decide() -> dict[str, Any]:
            # As for an approval: the decision, then the step that carries it.
            said = str(decision.get("decision") or said_of(decision))
            log.record_decision(str(step), said, by=str(decision.get("by") or RESUMED_BY), carries=decision)
            return decision

        recorded = self._record(log, step, decide)
        self._live.add(("settings", turn))
        self.session.asks = self.session.asks.but(change=Change(), resumed_by=None)
        return recorded

    def user(self, log: EventLog, turn: int, index: int) -> str | None:
        """The ``index``-th follow-up recorded before model call ``turn``, or (past the recorded
        ones) the one this session records; None when there is no more."""
        step = StepId.user(turn, index)
        if log.replaying:
            said = self._recorded(log, step)
            return None if said is None else str(said.get("text", ""))
        # A follow-up session's first live point is where its finished run stopped: after the
        # final reply, or (a run out of budget) before the model call the budget refused.
        text = self.session.asks.follow_up
        if text is None:
            return None
        self._record(log, step, lambda: {"text": text, "by": who()})
        self.session.asks = self.session.asks.but(follow_up=None)
        return text
