"""The step running live: its identity, its idempotency key, and its failed attempts.

``run_step`` sets the context while a step's function runs (and while a ``check`` guard
looks at the world), so code deep inside a step, a tool or a model client, can find its
key with ``current_step().key`` and record failed attempts without being handed the log.
During replay nothing runs, so there is no context.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from .events import AttemptFailed, Effect

if TYPE_CHECKING:
    from .log import EventLog

__all__ = ["StepContext", "current_step", "running"]


class StepContext:
    """The step now running live: its identity, key, and a way to record failed attempts."""

    __slots__ = ("log", "step_id", "key", "effect", "position", "attempts", "gave_up")

    def __init__(self, log: EventLog, step_id: str, key: str, effect: Effect, position: int) -> None:
        self.log = log
        self.step_id = step_id
        self.key = key
        self.effect: Effect = effect
        self.position = position
        self.attempts = 0
        self.gave_up = False

    def record_attempt_failed(
        self,
        attempt: int,
        error: str,
        *,
        message: str = "",
        status: int | None = None,
        delay: float | None = None,
        error_type: str | None = None,
        usage: Mapping[str, Any] | None = None,
    ) -> AttemptFailed:
        """Record that an attempt raised; ``delay`` is the wait before the next one, None if none;
        ``error_type`` the failure's own type, ``usage`` what it reported using (``AttemptFailed``)."""
        event = self.log.record_attempt_failed(
            self.step_id, attempt, error, message=message, status=status, delay=delay, error_type=error_type, usage=usage
        )
        self.attempts = max(self.attempts, attempt)
        self.gave_up = delay is None
        return event

    def __repr__(self) -> str:
        return f"StepContext({self.log.run_id!r}, {self.step_id!r}, {self.effect})"


_current: ContextVar[StepContext | None] = ContextVar("nb_durable_current_step", default=None)


def current_step() -> StepContext | None:
    """The step running live in this context, or None (outside steps, and during replay)."""
    return _current.get()




@contextmanager
def running(context: StepContext) -> Iterator[StepContext]:
    """Make ``context`` the current step while the block runs."""
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)
