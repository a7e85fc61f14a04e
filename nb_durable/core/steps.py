"""What a recorded step is, and the statuses a run and its steps have, as readers see them.

Values only: ``History`` (``history``) derives them from a log, and every reader (runs,
the agent's views, the displays) names them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from .events import ATTEMPT_FAILED, STEP_COMPLETED, AttemptFailed, Decision, Effect

__all__ = ["QUEUED", "RunStatus", "StepIndex", "StepRecord", "StepState"]

StepState = Literal["completed", "skipped", "failed", "interrupted", "in_doubt"]
"""completed: has a result. skipped: in doubt, settled as outcome unknown. failed: the step
raised. interrupted / in_doubt: it was running when its writer stopped; only an external
step's outcome is in doubt, the others simply run again."""

RunStatus = Literal[
    "queued",
    "running",
    "waiting",
    "completed",
    "failed",
    "interrupted",
    "in_doubt",
    "truncated",
    "refused",
    "context_full",
    "budget_exhausted",
    "bad_tool_input",
    "unknown_stop",
]
"""A run's status as readers see it: how it ended (a ``RunOutcome``), running, waiting (running,
and asking a person: its lease says so, ``core.holders``), in doubt, or queued (submitted for a
worker: settings recorded with ``queued``, no step yet). Only running and waiting need a live lease."""

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
"""Every status a run can have, in ``RunStatus``'s order (what a listing's filter accepts)."""

QUEUED = "queued"
"""The setting (true) a submitted run records, and the status it has until a worker takes it."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of a run as recorded: identity, state, result and the events around it."""

    position: int
    step_id: str
    state: StepState
    effect: Effect | None
    hash: str | None
    result: Any
    started_at: float | None
    completed_at: float | None
    ms: float | None
    attempts: tuple[AttemptFailed, ...]
    decisions: tuple[Decision, ...]


class StepIndex:
    """Where one step's events are in the log, and what they add up to (kept current as
    the writer appends; a view for the code in ``core``, never handed to users)."""

    __slots__ = ("position", "step_id", "hash", "effect", "seqs", "completed", "decision", "last_kind", "retrying", "attempts")

    def __init__(self, position: int, step_id: str, digest: str | None, completed: int | None = None) -> None:
        self.position = position
        self.step_id = step_id
        self.hash = digest
        self.effect: Effect | None = None
        self.seqs: list[int] = [] if completed is None else [completed]
        self.completed = completed
        self.decision: str | None = None
        self.last_kind = "" if completed is None else STEP_COMPLETED
        self.retrying = False  # the last attempt failed with a retry scheduled
        self.attempts = 0  # failed attempts recorded

    @property
    def open(self) -> bool:
        return self.completed is None and self.decision != "skip"

    @property
    def state(self) -> StepState:
        if self.completed is not None:
            return "completed"
        if self.decision == "skip":
            return "skipped"
        if self.last_kind == ATTEMPT_FAILED and not self.retrying:
            return "failed"
        return "in_doubt" if self.effect == "external" else "interrupted"
