"""The points of a run: before each model call, where the run may change course.

A point holds at most one recorded step of each kind, replayed in place: ``settings:N`` (a
resume's new model, max_tokens, thinking or budget, what becomes of a turn that stopped
the run short, or a refused turn moved to a fallback model, recorded as a decision) and ``user:N`` (a follow-up message). A session
records what it was asked for (its ``Changes``) at the first point where the log has
nothing more to replay, then forgets it, so every later replay meets the same steps in the
same places and sends the same requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...core.log import EventLog, run_step
from ..display.views import StepId, view_of
from ..settings import Change
from .changes import Stopped, said_of
from .fallback import refusal_switch
from .hooks import who

if TYPE_CHECKING:
    from .session import RunSession

__all__ = ["Points"]


class Points:
    """The points of one session's run (see the module docstring)."""

    def __init__(self, session: RunSession) -> None:
        self.session = session

    def _recorded(self, log: EventLog, step: StepId) -> dict[str, Any] | None:
        """Replay the step recorded at the cursor if it is ``step``; None if another step is."""
        if log.record_at(log.cursor, result=False).step_id != str(step):
            return None
        result: dict[str, Any] = run_step(log, str(step), dict, effect="pure")
        self.session.step_done(view_of(log.record_at(log.cursor - 1), state="replayed"), False)
        return result

    def _record(self, log: EventLog, step: StepId, decide: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """Record what this session brings to the point ``step`` (a change, a follow-up)."""
        recorded: dict[str, Any] = run_step(log, str(step), decide, effect="pure")
        self.session.step_done(view_of(log.record_at(log.cursor - 1), state="live"), True)
        return recorded

    def settings(self, log: EventLog, turn: int, stopped: Stopped | None) -> dict[str, Any] | None:
        """The settings change recorded before model call ``turn``, or the one this session records."""
        step = StepId.settings(turn)
        if log.replaying:
            return self._recorded(log, step)
        current = self.session.current
        decision = self.session.asks.decision(current, stopped) or refusal_switch(
            current.model, current.fallback_models, stopped
        )
        if decision is None:
            return None

        def decide() -> dict[str, Any]:
            # As for an approval: the decision, then the step that carries it.
            said = str(decision.get("decision") or said_of(decision))
            log.record_decision(str(step), said, by=str(decision.get("by") or "resume"))
            return decision

        recorded = self._record(log, step, decide)
        self.session.asks = self.session.asks.but(change=Change(), resumed_by=None)
        return recorded

    def user(self, log: EventLog, turn: int, stopped: Stopped | None) -> str | None:
        """The follow-up recorded before model call ``turn``, or the one this session records."""
        step = StepId.user(turn)
        if log.replaying:
            said = self._recorded(log, step)
            return None if said is None else str(said.get("text", ""))
        text = self.session.asks.follow_up
        if text is None or stopped is None:
            return None
        self._record(log, step, lambda: {"text": text, "by": who()})
        self.session.asks = self.session.asks.but(follow_up=None)
        return text
