"""Steps in doubt: what may settle them, and what replay hands back when one is skipped.

A step is in doubt when an external step's intent is in the log and its result is not: its
process died during the effect, so nobody knows whether the effect happened. Pure and
idempotent steps are never in doubt (they simply run again). An in-doubt step is settled
once, by a ``check`` guard that looks at the world, or by the in-doubt policy (rerun, skip,
fail, or a callable that asks a person), and the decision is recorded so replay never asks
again (see docs/design.md, "In-doubt steps").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .steps import StepRecord

__all__ = ["VERDICTS", "InDoubtPolicy", "OutcomeUnknown", "Verdict", "ask", "check_policy"]

Verdict = Literal["rerun", "skip", "fail"]
VERDICTS: tuple[Verdict, ...] = ("rerun", "skip", "fail")

InDoubtPolicy = Verdict | Callable[[StepRecord], "Verdict | tuple[Verdict, str] | tuple[Verdict, str, str]"]
"""What to do with an external step that started and never completed: run it again, skip it
(the caller gets ``OutcomeUnknown``), fail, or ask a callable (a person in a notebook) that
returns one of those, optionally with who decided and why: ``("skip", "ada", "it ran once")``."""


@dataclass(frozen=True, slots=True)
class OutcomeUnknown:
    """What replay hands back for an in-doubt step that was skipped: nobody knows if it ran."""

    run_id: str
    step_id: str
    key: str

    @property
    def message(self) -> str:
        """The situation in words, for the model or the person."""
        return (
            f"The process died while step {self.step_id!r} of run {self.run_id!r} was running, "
            "so whether its effect happened is unknown. Check before doing it again "
            f"(idempotency key {self.key})."
        )


def check_policy(policy: object) -> None:
    """Refuse anything that is not a verdict or a callable that decides."""
    if not callable(policy) and policy not in VERDICTS:
        raise ValueError(
            f"in_doubt must be 'rerun', 'skip', 'fail' or a callable that decides, not {policy!r}"
        )


def ask(decide: Callable[[StepRecord], Any], record: StepRecord) -> tuple[Verdict, str, str]:
    """A callable policy's verdict on one step, who gave it ('callback' unless it says), and why.

    The callable returns a verdict, ``(verdict, by)`` or ``(verdict, by, note)``.
    """
    answer = decide(record)
    if not isinstance(answer, tuple):
        answer = (answer, "callback")
    verdict, by, note = (*answer, "")[:3]
    if verdict not in VERDICTS:
        raise ValueError(f"an in-doubt decision is 'rerun', 'skip' or 'fail', not {verdict!r}")
    return verdict, str(by), str(note)
