"""Steps in doubt: what may settle them, and what replay hands back when one is skipped.

A step is in doubt when an external step's intent is in the log and its result is not: its
process died during the effect, so nobody knows whether the effect happened. Pure and
idempotent steps are never in doubt (they simply run again). An in-doubt step is settled
once, by a ``check`` guard that looks at the world, or by the in-doubt policy (rerun, skip,
fail, or a callable that asks a person), and the decision is recorded so replay never asks
again (see docs/design.md, "In-doubt steps"). ``settle`` does it, through the log's public
surface: its records, its decisions and ``complete_step``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import InDoubtError, SettingError
from .context import StepContext, running
from .steps import StepIndex, StepRecord

if TYPE_CHECKING:
    from .log import EventLog

__all__ = ["RERUN", "VERDICTS", "InDoubtPolicy", "OutcomeUnknown", "Verdict", "ask", "check_policy", "settle"]

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
            f"Step {self.step_id!r} of run {self.run_id!r} started and its result was never recorded "
            "(its process died, or its store refused the write), so whether its effect happened is "
            "unknown. Check before doing it again "
            f"(idempotency key {self.key})."
        )


def check_policy(policy: object) -> None:
    """Refuse anything that is not a verdict or a callable that decides."""
    if not callable(policy) and policy not in VERDICTS:
        raise SettingError(
            setting="in_doubt", value=policy, reason="must be 'rerun', 'skip', 'fail' or a callable that decides"
        )


def ask(decide: Callable[[StepRecord], Any], record: StepRecord, run_id: str = "") -> tuple[Verdict, str, str]:
    """A callable policy's verdict on one step, who gave it ('callback' unless it says), and why.

    The callable returns a verdict, ``(verdict, by)`` or ``(verdict, by, note)``.
    """
    answer = decide(record)
    if not isinstance(answer, tuple):
        answer = (answer, "callback")
    verdict, by, note = (*answer, "")[:3]
    if verdict not in VERDICTS:
        of = f" of run {run_id!r}" if run_id else ""
        raise SettingError(
            setting="in_doubt",
            value=verdict,
            reason=f"callable's decision on step {record.step_id!r}{of} must be 'rerun', 'skip' or 'fail' (nothing was recorded)",
        )
    return verdict, str(by), str(note)


RERUN: Any = object()
"""What ``settle`` returns for a step that is to run again."""


def settle(log: EventLog, step: StepIndex, policy: InDoubtPolicy, check: Callable[[], Any] | None) -> Any:
    """Settle the in-doubt step at the log's cursor, once, and record how.

    A ``check`` guard looks at the world first: what it finds is recorded as the step's
    result, and if it finds nothing the step runs again. Without one, ``policy`` decides;
    ``fail`` raises ``InDoubtError``. Returns the step's result, ``OutcomeUnknown`` for a
    skipped step (the cursor moved past it), or ``RERUN``.
    """
    record = log.record_at(step.position)
    key = log.idempotency_key(step.step_id)
    if check is not None:
        with running(StepContext(log, step.step_id, key, "external", step.position)):
            found = check()
        if found is None:
            log.record_decision(step.step_id, "rerun", by="check", note="the check found no effect")
            return RERUN
        log.record_decision(step.step_id, "done", by="check", note="the check found the effect")
        return log.complete_step(step.position, step.step_id, step.hash, found, 0.0, what=f"the check of step {step.step_id!r}")
    check_policy(policy)
    verdict, by, note = (policy, "policy", "") if isinstance(policy, str) else ask(policy, record, log.run_id)
    if verdict == "fail":
        raise InDoubtError(
            run_id=log.run_id,
            step_id=step.step_id,
            started=time.strftime("%H:%M:%S", time.localtime(record.started_at or 0)),
        )
    log.record_decision(step.step_id, verdict, by=by, note=note)
    if verdict == "skip":
        log.cursor = step.position + 1
        return OutcomeUnknown(log.run_id, step.step_id, key)
    return RERUN
