"""What a session asks of a run, and the decision it records at the run's next point.

A resume may bring a ``Change`` of settings (the model, ``max_tokens``, thinking, the
budgets: the table's rows a resume may change); a continue brings a follow-up message. Each
is recorded as a step where the run next has nothing to replay (see ``session``). After a turn that stopped the run short, a resume also records what becomes of
that turn: ``continue`` (a truncated reply kept, the model asked to go on) when nothing was
changed, else ``reask`` (the reply dropped, the turn asked again with the new settings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ...core.events import RunOutcome
from ...core.runs import BY_WORKER
from ...core.status import Status
from ..display.switches import RESUMED_BY
from ..settings import AgentSettings, Change

__all__ = ["CONTINUE_TEXT", "SessionAsks", "Stopped", "said_of"]

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
