"""A run's status, and what each status means for what can come next: defined once.

A run's log yields one of the recorded statuses (``core.history`` derives it); a reader of the
store also gives two the run's lease says, never the log: ``running`` while the lease is held,
and ``waiting`` while its holder waits for a person's answer (an approval, a step in doubt to
settle; the session derives it as it asks and marks its lease, ``core.holders``, so every reader
in every process says it). A display may also show three that no reader gives: ``crashed`` (a simulated crash ended the session
in the notebook, leaving the log as a killed process would), ``not run`` (the session never
got going: an unknown or locked run) and ``started`` (a saved page of a run that was going). Each status knows whether its session is over
(``ended``: displays freeze), whether a resume goes on from it (``resumable``), whether the
model's work stopped short for a named reason (``stopped_short``), whether the model's work
is over so a follow-up may continue it (``finished``), and whether it waits for a person to
fix or decide something before anyone should go on (``needs_person``).

``Status`` is a ``str``: a status compares equal to its text and is written as its text.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Status"]


class Status(str, Enum):
    """A run's status, as a reader or a display meets it."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    """Never written to the log: the session waits for a person's answer (an approval, a step in
    doubt to settle). Its lease says so while it asks (``core.holders``), so displays, ``list_runs``,
    ``nb-durable runs`` and ``show`` in any process say it; it ends with the answer or the lease."""
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    IN_DOUBT = "in_doubt"
    TRUNCATED = "truncated"
    REFUSED = "refused"
    CONTEXT_FULL = "context_full"
    BUDGET_EXHAUSTED = "budget_exhausted"
    BAD_TOOL_INPUT = "bad_tool_input"
    UNKNOWN_STOP = "unknown_stop"
    """The model stopped for a reason the recording version did not know (one the API added later)."""
    CRASHED = "crashed"
    """Shown only: a simulated crash ended the session (the log looks killed)."""
    NOT_RUN = "not run"
    """Shown only: the session never got going (an unknown or locked run, a bad setting)."""
    STARTED = "started"
    """Shown only: a saved page's run that was running when it was saved (only a live kernel knows more)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @property
    def going(self) -> bool:
        """A session is going on with it (its writer holds the lease): running, or waiting for a person."""
        return self in (Status.RUNNING, Status.WAITING)

    @property
    def recorded(self) -> bool:
        """Whether a reader of the store can give this status (a ``RunStatus``): those the log
        records, and running and waiting, which the run's lease says. The others are only shown."""
        return self not in _SHOWN_ONLY

    @property
    def stopped_short(self) -> bool:
        """The model's work stopped for a named reason, not a fault: truncated, refused, ..."""
        return self in _STOPPED_SHORT

    @property
    def finished(self) -> bool:
        """The model's work is over (completed, or stopped short): a follow-up may continue it."""
        return self is Status.COMPLETED or self.stopped_short

    @property
    def ended(self) -> bool:
        """This session of the run is over: displays freeze on it."""
        return self not in (Status.QUEUED, Status.RUNNING, Status.WAITING, Status.STARTED)

    @property
    def resumable(self) -> bool:
        """A resume goes on from it (after the fix it names, where one is needed)."""
        return self.ended and self not in (Status.COMPLETED, Status.NOT_RUN)

    @property
    def needs_person(self) -> bool:
        """It waits for a person: a step in doubt to settle, a fault or a limit to fix."""
        return self in (Status.FAILED, Status.IN_DOUBT) or self.stopped_short


_SHOWN_ONLY = frozenset({Status.CRASHED, Status.NOT_RUN, Status.STARTED})
_STOPPED_SHORT = frozenset(
    {Status.TRUNCATED, Status.REFUSED, Status.CONTEXT_FULL, Status.BUDGET_EXHAUSTED, Status.BAD_TOOL_INPUT,
     Status.UNKNOWN_STOP}
)
