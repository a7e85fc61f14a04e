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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core.log import EventLog, run_step
from ..display.switches import RESUMED_BY
from ..display.views import StepId, view_of
from ..settings import Change
from .changes import Stopped, said_of
from .fallback import refusal_switch, refusal_switch_recorded
from .hooks import who

if TYPE_CHECKING:
    from .session import RunSession

__all__ = ["Points"]


class Points:
    """The points of one session's run (see the module docstring)."""

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self._live: set[tuple[str, int]] = set()
        """(kind, turn): the points where this session recorded a step of that kind (once at most)."""

    def _recorded(self, log: EventLog, step: StepId) -> dict[str, Any] | None:
        """Replay the step recorded at the cursor if it is ``step``; None if another step is.
        One its session died in (its decision written, not the step) completes with what that
        decision says, for a refusal switch; with nothing, as it always has, for any other."""
        record = log.record_at(log.cursor, result=False)
        if record.step_id != str(step):
            return None
        result: dict[str, Any] = run_step(log, str(step), lambda: refusal_switch_recorded(record.decisions) or {}, effect="pure")
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
            log.record_decision(str(step), said, by=str(decision.get("by") or RESUMED_BY))
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
