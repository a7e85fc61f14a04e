"""What became of one run a worker tried: its outcome, or why it was passed over (the CLI prints a line of it)."""

from __future__ import annotations

from dataclasses import dataclass

from ..run.outcomes import AgentResult

__all__ = ["PASSED_OVER", "Taken"]


PASSED_OVER = "passed over"
"""The outcome of a run a worker left as it is: printed as ``RUN: passed over: why``, never ``passed``,
which reads as a success."""


@dataclass(frozen=True, slots=True)
class Taken:
    """What became of one run a worker tried: its outcome, or why it was passed over."""

    run_id: str
    outcome: str
    """completed, interrupted, ... (the run's status after this session), locked, error, or ``PASSED_OVER``."""
    detail: str = ""
    result: AgentResult | None = None

    @property
    def ran(self) -> bool:
        """Whether the worker ran it: not passed over, and not lost to another writer."""
        return self.outcome not in (PASSED_OVER, "locked")
